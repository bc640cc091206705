"""State survives a restart of the server: definitions are kept, labelled containers adopted or replaced."""

from __future__ import annotations

from pathlib import Path

import docker
import pytest

from emulator.runtime import labels
from tests.fixtures.smlocal_server import start_smlocal

pytestmark = pytest.mark.docker


def _containers(client: docker.DockerClient, endpoint: str) -> list[str]:
    return [
        c.id for c in client.containers.list(all=True, filters={"label": f"{labels.ENDPOINT}={endpoint}"})
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
