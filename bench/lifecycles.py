"""Nothing lost: each endpoint kind under a steady load of boto3 clients through each lifecycle event.

    python3 bench/lifecycles.py [--kinds single,serial,...] [--events blue-green,...]
                                [--before N] [--after N] [--concurrency N]
                                [--image TAG] [--mme-image TAG] [--echo-image TAG]

For each kind (tests/fixtures/lifecycle/kinds.py) one `smlocal serve` process (its own state dir
and port) serves one endpoint: the real-time kinds on the streaming test image (uvicorn + FastAPI
and gunicorn + Flask), multi-model on the MME test image, async on the echo test image; moto's S3
server (started here, on 127.0.0.1) holds the multi-model artifacts and the async outputs. The kind
goes through every event in turn (tests/fixtures/lifecycle/events.py) with
`concurrency` clients sending `before` requests before the event and `after` once it is over.
Every request is classified once (tests/fixtures/lifecycle/outcomes.py) and the table printed:
kind x event -> sent / ok / failed as SageMaker / refused while smlocal was down / still queued
(async) / failed / crossed / lost, the attempts boto3 made, and the seconds the event took (for
async, with the settling: until every output or failure object is there). The images must exist
(`pytest tests/integration/test_streaming.py tests/integration/test_lifecycles.py` builds them, or
pass their tags).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import docker  # noqa: E402,TID251 - the bench kills containers through the engine itself
from moto.server import ThreadedMotoServer  # noqa: E402

from bench._harness import remove_leftovers  # noqa: E402
from tests.fixtures.docker_env import ECHO_TAG, MME_TAG  # noqa: E402
from tests.fixtures.lifecycle.events import EVENTS, Deployment, applies, under_load  # noqa: E402
from tests.fixtures.lifecycle.kinds import ENDPOINT, KINDS, Site  # noqa: E402
from tests.fixtures.lifecycle.outcomes import OUTCOMES, Tally  # noqa: E402
from tests.fixtures.lifecycle.server import ServeProcess  # noqa: E402
from tests.fixtures.s3server import make_s3_client  # noqa: E402
from tests.fixtures.streaming import STREAMER_TAG  # noqa: E402

HEADER = ("kind", "event", "sent", *OUTCOMES, "attempts", "event s")


Row = tuple[str, str, Tally, float]


def run_kind(kind: str, events: list[str], args: argparse.Namespace, base: Path, site: Site) -> list[Row]:
    server = ServeProcess(base / kind / "state", env={"AWS_ENDPOINT_URL_S3": site.s3_url})
    server.state_dir.parent.mkdir(parents=True)
    rows = []
    engine = docker.from_env()
    server.start()
    deployment = Deployment(server, KINDS[kind], site, engine)
    try:
        deployment.create()
        for event in events:
            if not applies(KINDS[kind], event):
                continue
            started = time.monotonic()
            tally = under_load(deployment, event, args.before, args.after, args.concurrency)
            rows.append((kind, event, tally, time.monotonic() - started))
            print(_line(rows[-1]), flush=True)
            if deployment.timings:
                print("    restart: " + ", ".join(f"{k} {v:.1f}" for k, v in deployment.timings.items()))
                deployment.timings = {}
            for outcome, reasons in tally.reasons.items():
                if outcome != "ok":
                    for reason, n in reasons.most_common(3):
                        print(f"    {outcome}: {n} x {reason}", flush=True)
    finally:
        try:
            if not server.running():
                server.start()
            deployment.sm.delete_endpoint(EndpointName=ENDPOINT)
        finally:
            server.stop()
            remove_leftovers(server.state_dir.parent)
            engine.close()
    return rows


def _line(row: Row) -> str:
    kind, event, tally, seconds = row
    values = tally.row()
    cells = [
        kind,
        event,
        *(str(values[k]) for k in ("sent", *OUTCOMES)),
        str(tally.attempts),
        f"{seconds:.1f}",
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--events", default=",".join(EVENTS))
    parser.add_argument("--before", type=int, default=100)
    parser.add_argument("--after", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--image", default=STREAMER_TAG, help="the streaming test image")
    parser.add_argument("--mme-image", default=MME_TAG)
    parser.add_argument("--echo-image", default=ECHO_TAG)
    args = parser.parse_args()
    events = args.events.split(",")
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    rows = []
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    s3 = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    s3.start()
    host, port = s3.get_host_and_port()
    site = Site(
        {"streamer": args.image, "mme": args.mme_image, "echo": args.echo_image},
        f"http://{host}:{port}",
        f"smlocal-life-{uuid.uuid4().hex[:8]}",
    )
    make_s3_client(site.s3_url).create_bucket(Bucket=site.bucket)
    try:
        with tempfile.TemporaryDirectory(prefix="smlocal-lifecycles-") as tmp:
            for kind in args.kinds.split(","):
                rows += run_kind(kind, events, args, Path(tmp), site)
    finally:
        s3.stop()
    lost = sum(t.counts["lost"] + t.counts["crossed"] + t.counts["failed"] for _, _, t, _ in rows)
    sent = sum(t.sent for _, _, t, _ in rows)
    print(f"\n{sent} requests; failed where SageMaker would have served, crossed or lost: {lost}")


if __name__ == "__main__":
    main()
