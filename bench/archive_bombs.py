"""The server's peak memory while it refuses each hostile model archive, with the default limits.

    python3 bench/archive_bombs.py [--json PATH]

Each bomb is generated on the fly into a temp dir, then extracted by ArtifactStore.materialize in a
fresh interpreter (tests/fixtures/archive_bombs.py probe): the figure is that process's peak RSS
during the extraction minus its RSS before (VmHWM reset through /proc/self/clear_refs), with
tracemalloc on (which itself adds to the RSS), plus tracemalloc's peak and the time taken.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fixtures import archive_bombs as bombs  # noqa: E402

MIB = bombs.MIB

CASES: list[tuple[str, Callable[[Path], Path]]] = [
    ("PAX header 256 MiB", lambda p: bombs.pax_bomb(p, 256 * MIB)),
    ("GNU long name 256 MiB", lambda p: bombs.gnu_longname_bomb(p, 256 * MIB)),
    ("200,000 empty files", lambda p: bombs.entry_bomb(p, 200_000)),
    ("1 GiB of zeros (ratio)", lambda p: bombs.ratio_bomb(p, 1024 * MIB)),
    ("64 MiB trailing garbage", lambda p: bombs.trailing_garbage(p, 64 * MIB)),
    ("5 chained PAX headers", lambda p: bombs.extension_chain(p, 5)),
    ("PAX sparse member", bombs.pax_sparse),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, make) in enumerate(CASES):
            archive = make(Path(tmp) / f"bomb{i}.tar.gz")
            result = bombs.run_probe(archive)
            result.update(case=name, archive_bytes=archive.stat().st_size)
            results.append(result)
            archive.unlink()
            print(
                f"{name:26} {result['archive_bytes']:>10} B  refused={result['rejected']!s:5}  "
                f"rss +{result['rss_delta_mib']:5.1f} MiB  "
                f"tracemalloc {result['tracemalloc_peak_mib']:5.1f} MiB  "
                f"{result['seconds']:6.2f} s  left={len(result['leftover'])}  {result['detail']}"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if all(r["rejected"] and not r["leftover"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
