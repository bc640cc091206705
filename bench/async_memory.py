"""Asynchronous inference's memory: the rise of the server's peak RSS while N requests move large
payloads at once (each input of SIZE bytes, each answer as large: the echo image), in one run.

    python3 bench/async_memory.py [--requests 4] [--mib 128]

smlocal runs as a subprocess (`smlocal serve`, S3 pointed at moto's server in this process; moto keeps
every object in this process's memory: about 2 x requests x size x 2). The figure is VmHWM of the
server process after every output is in S3 minus VmHWM before the requests (after one small request
has made the S3 client and its threads): tests/fixtures/async_memory.py.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from moto.server import ThreadedMotoServer  # noqa: E402

from bench._harness import HOST, IMAGE  # noqa: E402
from tests.fixtures.async_memory import MIB, measure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--mib", type=int, default=128)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    moto = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    try:
        run = measure(IMAGE, f"http://{host}:{port}", args.requests, args.mib * MIB)
    finally:
        moto.stop()
    print(
        f"{run.requests} concurrent async requests, {args.mib} MiB in and {args.mib} MiB out each: "
        f"the server's peak RSS rose {run.peak_rise_mib:.0f} MiB; all outputs in S3 after {run.seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
