"""Nothing lost: every real-time endpoint kind under a steady load of real boto3 clients while each
lifecycle event happens (tests/fixtures/lifecycle/: the kinds, the events, the accounting).

One `smlocal serve` process per kind serves one endpoint through the kind's events in order (the
endpoint carries over from one event to the next; DeleteModel/DeleteEndpointConfig comes last). Each
event runs with a few seconds of load around it; every request must end ok, failed as SageMaker
would fail it, or refused while smlocal itself was down (the client knows) - never failed where
SageMaker would have served, crossed, or lost. bench/lifecycles.py runs the same with more load
and prints the table.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import docker
import pytest

from emulator.runtime import labels
from tests.fixtures.docker_env import track_owner
from tests.fixtures.lifecycle.events import EVENTS, Deployment, applies, under_load
from tests.fixtures.lifecycle.kinds import ENDPOINT, KINDS, Site
from tests.fixtures.lifecycle.load import runtime_client
from tests.fixtures.lifecycle.outcomes import Accepted, Expected, Result, classify
from tests.fixtures.lifecycle.s3kinds import async_answer_id, invoke_mme, mme_variants
from tests.fixtures.lifecycle.server import ServeProcess
from tests.fixtures.lifecycle.settle import settle
from tests.fixtures.s3server import make_s3_client

pytestmark = [pytest.mark.docker, pytest.mark.slow]

#: every kind through every event that applies to it (serverless has no instances to scale or roll)
CASES = [(kind, event) for kind in KINDS for event in EVENTS if applies(KINDS[kind], event)]


@pytest.fixture(scope="module")
def site(streamer_image: str, mme_image: str, echo_image: str, s3_server: str) -> Site:
    """The images and an S3 bucket (moto's server) the kinds deploy with."""
    bucket = f"smlocal-life-{uuid.uuid4().hex[:8]}"
    make_s3_client(s3_server).create_bucket(Bucket=bucket)
    return Site({"streamer": streamer_image, "mme": mme_image, "echo": echo_image}, s3_server, bucket)


@pytest.fixture(scope="module")
def deployments() -> Iterator[dict[str, Deployment]]:
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


def _server(state_dir: Path, site: Site) -> ServeProcess:
    """`smlocal serve` whose S3 is moto's server."""
    server = ServeProcess(state_dir, env={"AWS_ENDPOINT_URL_S3": site.s3_url})
    track_owner(labels.owner_id(server.state_dir))
    server.start()
    return server


def _deployment(
    made: dict[str, Deployment], kind: str, base: Path, engine: docker.DockerClient, site: Site
) -> Deployment:
    if kind not in made:
        server = _server(base / kind, site)
        made[kind] = Deployment(server, KINDS[kind], site, engine)
        made[kind].create()
    return made[kind]


@pytest.mark.parametrize(("kind", "event"), CASES, ids=[f"{k}-{e}" for k, e in CASES])
def test_nothing_is_lost(
    kind: str,
    event: str,
    deployments: dict[str, Deployment],
    tmp_path_factory: pytest.TempPathFactory,
    docker_engine: docker.DockerClient,
    site: Site,
) -> None:
    base = tmp_path_factory.getbasetemp() / "lifecycles"
    base.mkdir(exist_ok=True)
    deployment = _deployment(deployments, kind, base, docker_engine, site)
    tally = under_load(deployment, event)
    assert tally.accounted == tally.sent, tally.row()
    assert tally.bad() == {}, (tally.row(), deployment.server.log_tail())
    assert tally.counts["queued"] == 0, tally.row()  # async: everything accepted was written in time
    assert tally.counts["ok"] >= 20, tally.row()  # the load ran before and after the event


def test_a_request_sent_while_the_endpoint_is_restored_waits_for_it(
    tmp_path: Path, docker_engine: docker.DockerClient, site: Site
) -> None:
    """After a graceful restart the server answers at once while the endpoint (SystemUpdating) starts
    its containers again: an InvokeEndpoint then waits for it and is served, as SageMaker serves an
    endpoint through SystemUpdating (it was answered 400 "Endpoint ... not found.")."""
    server = _server(tmp_path / "state", site)
    deployment = Deployment(server, KINDS["single"], site, docker_engine)
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


def test_an_async_request_sent_while_the_endpoint_is_restored_is_accepted(
    tmp_path: Path, docker_engine: docker.DockerClient, site: Site
) -> None:
    """As above for InvokeEndpointAsync: during the restore it was answered 400 ValidationError
    "Endpoint life of account ... not found." (10 of 72 requests around a graceful restart under
    load); now it waits for the endpoint as InvokeEndpoint does, is accepted (202), and its output
    is written."""
    server = _server(tmp_path / "state", site)
    deployment = Deployment(server, KINDS["async"], site, docker_engine)
    try:
        deployment.create()
        server.stop()
        server.start()
        assert deployment.sm.describe_endpoint(EndpointName=ENDPOINT)["EndpointStatus"] == "SystemUpdating"
        accepted = KINDS["async"].invoke(runtime_client(server.url), "restored-r0-0")
        assert isinstance(accepted, Accepted)
        (settled,) = settle(
            [Result("restored-r0-0", "accepted", accepted=accepted)],
            make_s3_client(site.s3_url),
            None,
            async_answer_id,
            timeout_s=30,
        )
        assert classify(settled, Expected()) == ("ok", "output written")
    finally:
        try:
            if server.running():
                deployment.wait_in_service()
                deployment.sm.delete_endpoint(EndpointName=ENDPOINT)
        finally:
            server.stop()


def test_a_multi_model_container_adopted_after_a_kill_unloads_the_models_smlocal_no_longer_knows(
    tmp_path: Path, docker_engine: docker.DockerClient, site: Site
) -> None:
    """smlocal killed and started again adopts the running multi-model container, which still holds
    the models loaded before (here 2, its MAX_LOADED) while smlocal's new process knows none: a call
    for a third model got the container's 507, found no model of its own to unload and answered 424
    (2 of 112 requests around a kill under load). Now a 507 with nothing known to unload lists the
    container's models (GET /models) and unloads those smlocal has no entry for."""
    one_instance = replace(
        KINDS["multi-model"],
        variants=lambda s, gen: [
            {**v, "variant": {**v["variant"], "InitialInstanceCount": 1}} for v in mme_variants(s, gen)
        ],
    )
    server = _server(tmp_path / "state", site)
    deployment = Deployment(server, one_instance, site, docker_engine)
    try:
        deployment.create()
        rt = runtime_client(server.url)
        assert [invoke_mme(rt, f"r0-{n}", model=n) for n in (0, 1)] == ["r0-0", "r0-1"]
        server.kill()
        server.start()
        deployment.wait_in_service()
        rt = runtime_client(server.url)
        assert [invoke_mme(rt, f"r1-{n}", model=n) for n in (2, 3, 0)] == ["r1-2", "r1-3", "r1-0"]
    finally:
        try:
            if server.running():
                deployment.sm.delete_endpoint(EndpointName=ENDPOINT)
        finally:
            server.stop()


def test_a_serverless_request_whose_warm_container_died_gets_a_new_one(
    tmp_path: Path, docker_engine: docker.DockerClient, site: Site
) -> None:
    """The serverless variant's warm container is killed; requests sent at once (before smlocal saw
    the exit) found it refused, took it out of rotation and answered 424 "no healthy instance is in
    rotation" (1 of 55 under load). SageMaker starts a container for them: now they are admitted
    once more, which cold-starts one."""
    server = _server(tmp_path / "state", site)
    deployment = Deployment(server, KINDS["serverless"], site, docker_engine)
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
