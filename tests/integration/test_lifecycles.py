"""Nothing lost: every real-time endpoint kind under a steady load of real boto3 clients while each
lifecycle event happens (tests/fixtures/lifecycle/: the kinds, the events, the accounting).

One `smlocal serve` process per kind serves one endpoint through the kind's events in order (the
endpoint carries over from one event to the next; DeleteModel/DeleteEndpointConfig comes last). Each
event runs with a few seconds of load around it; every request must end ok, failed as SageMaker
would fail it, or refused while smlocal itself was down (the client knows) - never failed where
SageMaker would have served, crossed, or lost. bench/lifecycles.py runs the same with more load.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from emulator.runtime import labels
from tests.fixtures.docker_env import track_owner
from tests.fixtures.lifecycle.events import EVENTS, Deployment, applies, under_load
from tests.fixtures.lifecycle.kinds import ENDPOINT, KINDS
from tests.fixtures.lifecycle.load import runtime_client
from tests.fixtures.lifecycle.server import ServeProcess

pytestmark = [pytest.mark.docker, pytest.mark.slow]

#: the events each kind goes through here (all of them in bench/lifecycles.py); single goes through all
QUICK = ("instance-killed", "serve-sigkill", "delete-definitions")
CASES = [
    (kind, event)
    for kind in KINDS
    for event in EVENTS
    if applies(KINDS[kind], event) and (kind == "single" or event in QUICK)
]


@pytest.fixture(scope="module")
def deployments(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: docker.DockerClient, streamer_image: str
) -> Iterator[dict[str, Deployment]]:
    """One server and endpoint per kind, made on first use and kept for the kind's later events."""
    made: dict[str, Deployment] = {}
    yield made
    for deployment in made.values():
        try:
            if not deployment.server.running():
                deployment.server.start()
            deployment.sm.delete_endpoint(EndpointName=ENDPOINT)
        finally:
            deployment.server.stop()


def _deployment(
    made: dict[str, Deployment], kind: str, base: Path, engine: docker.DockerClient, image: str
) -> Deployment:
    if kind not in made:
        server = ServeProcess(base / kind)
        track_owner(labels.owner_id(server.state_dir))
        server.start()
        made[kind] = Deployment(server, KINDS[kind], image, engine)
        made[kind].create()
    return made[kind]


@pytest.mark.parametrize(("kind", "event"), CASES, ids=[f"{k}-{e}" for k, e in CASES])
def test_nothing_is_lost(
    kind: str,
    event: str,
    deployments: dict[str, Deployment],
    tmp_path_factory: pytest.TempPathFactory,
    docker_engine: docker.DockerClient,
    streamer_image: str,
) -> None:
    base = tmp_path_factory.getbasetemp() / "lifecycles"
    base.mkdir(exist_ok=True)
    deployment = _deployment(deployments, kind, base, docker_engine, streamer_image)
    tally = under_load(deployment, event)
    assert tally.accounted == tally.sent, tally.row()
    assert tally.bad() == {}, (tally.row(), deployment.server.log_tail())
    assert tally.counts["ok"] >= 20, tally.row()  # the load ran before and after the event


def test_a_request_sent_while_the_endpoint_is_restored_waits_for_it(
    tmp_path: Path, docker_engine: docker.DockerClient, streamer_image: str
) -> None:
    """After a graceful restart the server answers at once while the endpoint (SystemUpdating) starts
    its containers again: an InvokeEndpoint then waits for it and is served, as SageMaker serves an
    endpoint through SystemUpdating (it was answered 400 "Endpoint ... not found.")."""
    server = ServeProcess(tmp_path / "state")
    track_owner(labels.owner_id(server.state_dir))
    server.start()
    deployment = Deployment(server, KINDS["single"], streamer_image, docker_engine)
    try:
        deployment.create()
        server.stop()
        server.start()
        assert deployment.sm.describe_endpoint(EndpointName=ENDPOINT)["EndpointStatus"] == "SystemUpdating"
        answered = KINDS["single"].invoke(runtime_client(server.url), "r0-0")
        assert answered == "r0-0"
        assert deployment.sm.describe_endpoint(EndpointName=ENDPOINT)["EndpointStatus"] == "InService"
    finally:
        try:
            if server.running():
                deployment.wait_in_service()
                deployment.sm.delete_endpoint(EndpointName=ENDPOINT)
        finally:
            server.stop()


def test_a_serverless_request_whose_warm_container_died_gets_a_new_one(
    tmp_path: Path, docker_engine: docker.DockerClient, streamer_image: str
) -> None:
    """The serverless variant's warm container is killed; requests sent at once (before smlocal saw
    the exit) found it refused, took it out of rotation and answered 424 "no healthy instance is in
    rotation" (1 of 55 under load). SageMaker starts a container for them: now they are admitted
    once more, which cold-starts one."""
    server = ServeProcess(tmp_path / "state")
    track_owner(labels.owner_id(server.state_dir))
    server.start()
    deployment = Deployment(server, KINDS["serverless"], streamer_image, docker_engine)
    rt = runtime_client(server.url)
    try:
        deployment.create()
        for round_ in range(3):
            assert KINDS["serverless"].invoke(rt, f"r0-{round_}") == f"r0-{round_}"  # warm
            (warm,) = deployment.containers()
            warm.kill()
            assert KINDS["serverless"].invoke(rt, f"r1-{round_}") == f"r1-{round_}"
    finally:
        rt.close()
        try:
            deployment.sm.delete_endpoint(EndpointName=ENDPOINT)
        finally:
            server.stop()
