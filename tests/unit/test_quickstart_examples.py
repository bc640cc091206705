"""The quick starts show the examples the client tests run: each `<!-- example: PATH -->` block of
docs/quickstart-*.md must be that file, byte for byte, so the page cannot drift from what is tested."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"<!-- example: (\S+) [^\n]*-->\n```\w*\n(.*?)```\n", re.S)
PAGES = ["quickstart-aws-cli.md", "quickstart-sdk-v2.md", "quickstart-sdk-v3.md"]


def example_blocks(page: str) -> list[tuple[str, str]]:
    return BLOCK.findall((REPO / "docs" / page).read_text())


@pytest.mark.parametrize("page", PAGES)
def test_each_example_block_is_the_file_the_tests_run(page: str) -> None:
    blocks = example_blocks(page)
    assert blocks, f"docs/{page} shows no example"
    for path, shown in blocks:
        assert (REPO / path).is_file(), f"docs/{page} shows {path}, which does not exist"
        assert shown == (REPO / path).read_text(), f"docs/{page}: the block of {path} differs from the file"
        tests = "\n".join(p.read_text() for p in (REPO / "tests" / "integration").glob("test_clients_*.py"))
        assert Path(path).name in tests, f"no client test runs {path}"


def test_a_changed_example_is_caught(tmp_path: Path) -> None:
    page = (REPO / "docs" / PAGES[0]).read_text()
    ((path, shown),) = BLOCK.findall(page)
    assert shown == (REPO / path).read_text()
    altered = page.replace("sm wait endpoint-in-service", "sm wait endpoint-deleted", 1)
    ((_, shown_after),) = BLOCK.findall(altered)
    assert shown_after != (REPO / path).read_text()


def test_the_inference_components_page_shows_the_example_its_test_runs() -> None:
    """docs/inference-components.md's block is docs/examples/inference_components.py, byte for byte,
    and tests/integration/test_inference_components.py runs that file."""
    ((path, shown),) = example_blocks("inference-components.md")
    assert path == "docs/examples/inference_components.py"
    assert shown == (REPO / path).read_text()
    runner = (REPO / "tests" / "integration" / "test_inference_components.py").read_text()
    assert '"inference_components.py"' in runner
