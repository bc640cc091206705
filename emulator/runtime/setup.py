"""`smlocal setup`: make this machine ready to run containers (engine, base image), with timings.

Exposed by the CLI as `smlocal setup`; until then `python3 -m emulator.runtime.setup`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from emulator.errors import SmlocalError
from emulator.runtime.engine import ensure_engine
from emulator.runtime.images import ensure_base_image


def run_setup(log: Callable[[str], None] = print) -> str:
    """Ensure the engine and the base image; return the base image name. Raises SmlocalError."""
    say = log
    started = time.monotonic()
    ensure_engine(log=say)
    engine_s = time.monotonic() - started
    say(f"setup: engine ready in {engine_s:.1f} s")
    started = time.monotonic()
    base = ensure_base_image(log=say)
    say(f"setup: base image {base} ready in {time.monotonic() - started:.1f} s")
    return base


def main() -> int:
    try:
        run_setup(lambda line: print(line, flush=True))
    except SmlocalError as exc:
        print(f"smlocal setup failed: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
