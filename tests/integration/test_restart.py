"""State survives a restart of the server: definitions are kept, labelled containers adopted or replaced."""

from __future__ import annotations

import json
import time
from pathlib import Path

import docker
import pytest

from emulator.runtime import labels
from tests.fixtures.smlocal_server import start_smlocal

pytestmark = pytest.mark.docker


def _containers(client: docker.DockerClient, endpoint: str) -> list[str]:
    """Ids of the endpoint's containers, running or not (one list call: no inspect to race a removal)."""
    return [
        c["Id"] for c in client.api.containers(all=True, filters={"label": f"{labels.ENDPOINT}={endpoint}"})
    ]


def test_restart_after_a_crash_adopts_running_containers(
    tmp_path: Path, echo_image: str, aws_credentials: None
) -> None:
    client = docker.from_env()
    crashed = start_smlocal(
        tmp_path, echo_image, stop_containers=False
    )  # like a killed server: containers stay
    try:
        assert crashed.deploy("Keep", count=2)["EndpointStatus"] == "InService"
        crashed.sm.create_model(ModelName="Spare", PrimaryContainer={"Image": echo_image})
    finally:
        crashed.server.stop()
    before = sorted(_containers(client, "Keep"))
    assert len(before) == 2

    restarted = start_smlocal(tmp_path, echo_image)
    try:
        assert restarted.wait("Keep")["EndpointStatus"] == "InService"
        assert sorted(_containers(client, "Keep")) == before  # the same containers, adopted
        assert restarted.rt.invoke_endpoint(EndpointName="Keep", Body=b"again")["Body"].read() == b"again"
        assert {m["ModelName"] for m in restarted.sm.list_models()["Models"]} == {"Keep", "Spare"}
        assert (
            restarted.sm.describe_endpoint_config(EndpointConfigName="Keep")["ProductionVariants"][0][
                "InitialInstanceCount"
            ]
            == 2
        )
    finally:
        restarted.server.stop()  # a graceful stop stops the containers
    assert _containers(client, "Keep") == []

    replaced = start_smlocal(tmp_path, echo_image)
    try:
        assert replaced.wait("Keep")["EndpointStatus"] == "InService"
        after = _containers(client, "Keep")
        assert len(after) == 2 and not set(after) & set(before)  # started afresh
        replaced.cleanup("Keep")
        replaced.sm.delete_model(ModelName="Spare")
    finally:
        replaced.server.stop()
    client.close()


def test_orphans_of_this_state_dir_are_removed_on_start(
    tmp_path: Path, echo_image: str, aws_credentials: None
) -> None:
    client = docker.from_env()
    orphan = client.containers.run(
        echo_image,
        ["serve"],
        detach=True,
        labels={
            labels.MANAGED: "true",
            labels.OWNER: labels.owner_id(tmp_path),
            labels.ENDPOINT: "Ghost",
            labels.VARIANT: "AllTraffic",
        },
    )
    other_owner = client.containers.run(
        echo_image,
        ["serve"],
        detach=True,
        labels={labels.MANAGED: "true", labels.OWNER: "someone-else", labels.ENDPOINT: "Ghost"},
    )
    try:
        env = start_smlocal(tmp_path, echo_image)
        env.server.stop()
        remaining = {
            c.id for c in client.containers.list(all=True, filters={"label": f"{labels.ENDPOINT}=Ghost"})
        }
        assert orphan.id not in remaining
        assert other_owner.id in remaining  # another server's container is not ours to remove
    finally:
        for container in (orphan, other_owner):
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                pass
        client.close()


def _owned(client: docker.DockerClient, state_dir: Path) -> list[str]:
    """This server's containers, running or not (one list call: no inspect that can race a removal)."""
    owner = labels.owner_id(state_dir)
    found = client.api.containers(all=True, filters={"label": f"{labels.OWNER}={owner}"})
    return [f"{c['Names'][0]} ({c['Status']})" for c in found]


def test_a_graceful_stop_while_deleting_leaves_no_container(
    tmp_path: Path, echo_image: str, aws_credentials: None
) -> None:
    """The container ignores SIGTERM, so its deletion is still waiting out the stop grace when the
    server stops: the stop waits for the deletion, which removes the container (it used to be left
    Exited (137))."""
    client = docker.from_env()
    env = start_smlocal(tmp_path, echo_image)
    try:
        assert env.deploy("Going", env={"IGNORE_SIGTERM": "1"})["EndpointStatus"] == "InService"
        env.sm.delete_endpoint(EndpointName="Going")
        assert env.sm.describe_endpoint(EndpointName="Going")["EndpointStatus"] == "Deleting"
    finally:
        env.server.stop()
    assert _owned(client, tmp_path) == []
    client.close()


def test_an_endpoint_whose_model_and_config_were_deleted_survives_restarts(
    tmp_path: Path, echo_image: str, aws_credentials: None
) -> None:
    """SageMaker lets the model and the endpoint config be deleted while the endpoint serves; the
    endpoint keeps serving. Across a crash (containers adopted) and a graceful restart (containers
    re-launched from the copy kept with the endpoint) it stays InService, and DeleteEndpoint then
    removes its containers."""
    client = docker.from_env()
    crashed = start_smlocal(tmp_path, echo_image, stop_containers=False)
    try:
        assert crashed.deploy("Orphaned", count=2, env={"COLOR": "kept"})["EndpointStatus"] == "InService"
        crashed.sm.delete_endpoint_config(EndpointConfigName="Orphaned")
        crashed.sm.delete_model(ModelName="Orphaned")
        # a new config of the same name does not change what the endpoint serves
        crashed.sm.create_model(ModelName="Other", PrimaryContainer={"Image": echo_image})
        crashed.sm.create_endpoint_config(
            EndpointConfigName="Orphaned",
            ProductionVariants=[{"VariantName": "Other", "ModelName": "Other", "InitialInstanceCount": 1}],
        )
    finally:
        crashed.server.stop()
    before = sorted(_containers(client, "Orphaned"))
    assert len(before) == 2

    adopted = start_smlocal(tmp_path, echo_image)
    try:
        described = adopted.wait("Orphaned")
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        assert [v["VariantName"] for v in described["ProductionVariants"]] == ["AllTraffic"]
        assert sorted(_containers(client, "Orphaned")) == before  # the same containers, adopted
        reply = adopted.rt.invoke_endpoint(EndpointName="Orphaned", Body=b"x", CustomAttributes="env=COLOR")
        assert reply["Body"].read() == b"kept"
    finally:
        adopted.server.stop()  # graceful: the adopted containers are stopped with the server
    assert _containers(client, "Orphaned") == []

    relaunched = start_smlocal(tmp_path, echo_image)
    try:
        assert relaunched.wait("Orphaned")["EndpointStatus"] == "InService"
        assert len(_containers(client, "Orphaned")) == 2
        reply = relaunched.rt.invoke_endpoint(
            EndpointName="Orphaned", Body=b"x", CustomAttributes="env=COLOR"
        )
        assert reply["Body"].read() == b"kept"
        relaunched.sm.delete_endpoint(EndpointName="Orphaned")
        assert relaunched.server.service is not None
        relaunched.server.call(relaunched.server.service.wait_idle(), timeout_s=60)
        assert _containers(client, "Orphaned") == []
        relaunched.sm.delete_endpoint_config(EndpointConfigName="Orphaned")
        relaunched.sm.delete_model(ModelName="Other")
    finally:
        relaunched.server.stop()
    assert _owned(client, tmp_path) == []
    client.close()


def test_an_endpoint_that_cannot_be_readopted_leaves_no_container(
    tmp_path: Path, echo_image: str, aws_credentials: None
) -> None:
    """A state file from before the deployed copy was kept names only the config, whose model is
    gone: the endpoint goes Failed and its adopted containers are stopped, not left unowned."""
    client = docker.from_env()
    crashed = start_smlocal(tmp_path, echo_image, stop_containers=False)
    try:
        assert crashed.deploy("Lost")["EndpointStatus"] == "InService"
        crashed.sm.delete_model(ModelName="Lost")
    finally:
        crashed.server.stop()
    state = tmp_path / "state.json"
    document = json.loads(state.read_text())
    document.pop("deployed", None)  # as an earlier version wrote it
    state.write_text(json.dumps(document))
    assert len(_containers(client, "Lost")) == 1

    restarted = start_smlocal(tmp_path, echo_image)
    try:
        described = restarted.wait("Lost")
        assert described["EndpointStatus"] == "Failed"
        assert (
            described["FailureReason"]
            == 'Could not find model "arn:aws:sagemaker:us-east-1:123456789012:model/lost".'
        )
        assert _containers(client, "Lost") == []
        restarted.cleanup("Lost")
    finally:
        restarted.server.stop()
    assert _owned(client, tmp_path) == []
    client.close()


def test_a_graceful_stop_during_an_update_leaves_no_container(
    tmp_path: Path, echo_image: str, aws_credentials: None
) -> None:
    """Stopped while a blue/green update bakes (the new fleet routed, the old one waiting to be
    retired): both fleets' containers are removed."""
    client = docker.from_env()
    env = start_smlocal(tmp_path, echo_image)
    try:
        assert env.deploy("Baking", count=2)["EndpointStatus"] == "InService"
        env.sm.create_model(ModelName="Baking-new", PrimaryContainer={"Image": echo_image})
        env.sm.create_endpoint_config(
            EndpointConfigName="Baking-new",
            ProductionVariants=[
                {"VariantName": "AllTraffic", "ModelName": "Baking-new", "InitialInstanceCount": 2}
            ],
        )
        env.sm.update_endpoint(
            EndpointName="Baking",
            EndpointConfigName="Baking-new",
            DeploymentConfig={
                "BlueGreenUpdatePolicy": {
                    "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 0},
                    "TerminationWaitInSeconds": 600,
                }
            },
        )

        def baking() -> bool:
            pending = env.sm.describe_endpoint(EndpointName="Baking").get("PendingDeploymentSummary", {})
            return any(
                s["Status"] == "Baking"
                for v in pending.get("ProductionVariants", [])
                for s in v.get("VariantStatus", [])
            )

        deadline = time.monotonic() + 60
        while not baking():
            assert time.monotonic() < deadline, "the update never reached its baking stage"
            time.sleep(0.05)
        assert len(_containers(client, "Baking")) == 4
    finally:
        env.server.stop()
    assert _owned(client, tmp_path) == []
    client.close()
