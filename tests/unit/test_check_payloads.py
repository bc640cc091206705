"""`smlocal check --payload FILE [--content-type T] [--accept T] ...`: several inputs, each with its own
content type and Accept (an option applies to the --payload before it; one before any --payload to the
first); usage errors exit 2 with a message naming the option. No Docker: parsing stops before it."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from rich.console import Console

from contract_tests.check_config import CheckConfig, Payload
from contract_tests.cli import _sigterm_cleans_up, check_config, main
from emulator.cli import build_parser


def config_of(*argv: str) -> CheckConfig:
    return check_config(build_parser().parse_args(["check", "img:1", *argv]))


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {}
    for name, body in {"a.json": b'{"x": 1}', "b.csv": b"1,2\n", "c.bin": b"\x00\x01"}.items():
        (tmp_path / name).write_bytes(body)
        paths[name] = str(tmp_path / name)
    return paths


def test_no_payload_is_the_default_and_not_given() -> None:
    config = config_of()
    assert (config.payload, config.content_type, config.accept) == (b"{}", "application/json", None)
    assert config.extra_payloads == () and config.payload_given is False
    assert config.payloads == (Payload(b"{}", "application/json", None, "the default payload"),)


def test_a_content_type_without_payload_applies_to_the_default() -> None:
    config = config_of("--content-type", "text/csv", "--accept", "text/csv")
    assert (config.payload, config.content_type, config.accept) == (b"{}", "text/csv", "text/csv")
    assert config.payload_given is False


def test_each_option_applies_to_the_payload_before_it(files: dict[str, str]) -> None:
    config = config_of(
        "--payload", files["a.json"], "--accept", "application/json",
        "--payload", files["b.csv"], "--content-type", "text/csv",
        "--payload", files["c.bin"], "--content-type", "application/x-npy", "--accept", "text/csv",
    )  # fmt: skip
    assert config.payload_given is True
    assert (config.payload, config.content_type, config.accept) == (
        b'{"x": 1}',
        "application/json",
        "application/json",
    )
    assert config.extra_payloads == (
        Payload(b"1,2\n", "text/csv", None, f"--payload {files['b.csv']}"),
        Payload(b"\x00\x01", "application/x-npy", "text/csv", f"--payload {files['c.bin']}"),
    )
    assert [p.body for p in config.payloads] == [b'{"x": 1}', b"1,2\n", b"\x00\x01"]
    assert config.payloads[0].source == f"--payload {files['a.json']}"


def test_an_option_before_any_payload_applies_to_the_first(files: dict[str, str]) -> None:
    config = config_of(
        "--content-type", "text/csv", "--payload", files["b.csv"], "--payload", files["a.json"]
    )
    assert (config.payload, config.content_type) == (b"1,2\n", "text/csv")
    (second,) = config.extra_payloads
    assert (second.body, second.content_type) == (b'{"x": 1}', "application/json")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--payload", "A", "--content-type", "text/csv", "--content-type", "text/plain"],
         "--content-type given twice for --payload A: 'text/csv' and 'text/plain'"),
        (["--accept", "a/b", "--payload", "A", "--accept", "c/d"],
         "--accept given twice for --payload A: 'a/b' (before it) and 'c/d'"),
        (["--accept", "a/b", "--accept", "c/d"], "--accept given twice for the first payload"),
        (["--payload", "A", "--payload", "/no/such/file"], "--payload /no/such/file: No such file"),
        (["--payload", "A", "--content-type", " "], "--content-type needs a media type, got ' '"),
    ],
)  # fmt: skip
def test_payload_usage_errors_exit_2(
    argv: list[str], says: str, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [files["a.json"] if a == "A" else a for a in argv]
    assert main(["img:1", *argv]) == 2
    err = capsys.readouterr().err
    assert says.replace("--payload A", f"--payload {files['a.json']}") in err
    assert "Traceback" not in err


def test_sigterm_handler_is_restored_after_a_check_run() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with _sigterm_cleans_up(Console(stderr=True)):
        assert signal.getsignal(signal.SIGTERM) is not before  # the run's own handler
    assert signal.getsignal(signal.SIGTERM) is before
