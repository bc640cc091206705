"""`python3 -m sd_server serve`: the container's entry point (ENTRYPOINT ["python3", "-m", "sd_server"]).

SIGTERM is handled from the first statement: until the server runs, a SIGTERM (nothing to drain yet,
e.g. during the seconds torch takes to import) exits 0 at once; once it runs, the server's own handler
stops listening and drains the requests in flight (see server.py).

Options are for running outside SageMaker (tests, the GPU check); SageMaker passes only `serve`:
  --model-dir DIR   (or env SD_MODEL_DIR)  default /opt/ml/model
  --port N          default $SAGEMAKER_BIND_TO_PORT, else 8080
  --host ADDR       default 0.0.0.0
  --device NAME     (or env SD_DEVICE)     default cuda when torch sees a GPU (fp16), else cpu
  --max-side N      (or env SD_MAX_SIDE)   largest image side accepted, default 1024
"""

import signal
import sys


def _exit_now(signum: int, frame: object) -> None:
    raise SystemExit(0)  # not serving yet: nothing in flight to drain


signal.signal(signal.SIGTERM, _exit_now)
signal.signal(signal.SIGINT, _exit_now)

import argparse  # noqa: E402 - after the signal handlers, on purpose
import asyncio  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402

DEFAULT_MODEL_DIR = "/opt/ml/model"


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python3 -m sd_server", description="Stable Diffusion for SageMaker"
    )
    parser.add_argument(
        "command", nargs="?", default="serve", choices=["serve"], help="SageMaker passes serve"
    )
    parser.add_argument(
        "--model-dir", type=Path, default=Path(os.environ.get("SD_MODEL_DIR", DEFAULT_MODEL_DIR))
    )
    parser.add_argument("--port", type=int, default=int(os.environ.get("SAGEMAKER_BIND_TO_PORT") or 8080))
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--device", default=os.environ.get("SD_DEVICE") or None)
    parser.add_argument("--max-side", type=int, default=int(os.environ.get("SD_MAX_SIDE") or 1024))
    return parser.parse_args(argv)


def _configure_logging() -> None:
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # one line at a time, even without PYTHONUNBUFFERED
    logging.basicConfig(
        stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    _configure_logging()
    # no model hub here: whatever the folder lacks must fail at once, not after network timeouts
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from .inputs import Limits
    from .server import serve

    limits = Limits(max_side=args.max_side)
    return asyncio.run(
        serve(args.model_dir, host=args.host, port=args.port, device=args.device, limits=limits)
    )


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip joining worker threads: a model still loading, or a generation past the drain budget, must
    # not hold the exit beyond SageMaker's grace period.
    os._exit(code)
