"""EnableNetworkIsolation in the deployer's container spec and adoption digest (no engine needed)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import aiohttp

from emulator.config import ServerConfig
from emulator.hosting.fleet.deployer import Deployer
from emulator.hosting.fleet.plan import VariantPlan
from emulator.model.resources import ContainerDefinition, Model, ProductionVariant
from emulator.runtime import labels
from emulator.runtime.base import ContainerHandle, ContainerRuntime, ResolvedImage


def _plan(isolated: bool) -> VariantPlan:
    model = Model(
        "M",
        "arn:aws:sagemaker:us-east-1:123456789012:model/m",
        ContainerDefinition("img", {"A": "1"}),
        datetime(2026, 1, 1, tzinfo=UTC),
        enable_network_isolation=isolated,
    )
    image = ResolvedImage("img", "img@sha256:1", "sha256:1")
    return VariantPlan("E", ProductionVariant("AllTraffic", "M"), model, image, Path("/m"))


def _deployer(tmp_path: Path) -> Deployer:
    def no_session() -> aiohttp.ClientSession:
        raise AssertionError("no pings here")

    return Deployer(ServerConfig(state_dir=tmp_path), cast(ContainerRuntime, object()), no_session)


def test_the_spec_of_an_isolated_model_asks_for_isolation(tmp_path: Path) -> None:
    deployer = _deployer(tmp_path)
    assert deployer._spec(_plan(True), "i-1").network_isolation is True
    assert deployer._spec(_plan(False), "i-1").network_isolation is False


def test_isolation_changes_the_digest() -> None:
    # a container started without isolation is never adopted for an isolated model, nor the reverse
    assert _plan(False).spec_digest(8080) != _plan(True).spec_digest(8080)


def test_a_candidate_without_a_port_is_not_adopted(tmp_path: Path) -> None:
    deployer = _deployer(tmp_path)
    plan = _plan(True)
    digest = {labels.SPEC_DIGEST: plan.spec_digest(ServerConfig(state_dir=tmp_path).limits.container_port)}
    reachable = ContainerHandle("a", "a", 32768, digest)
    forwarder_gone = dataclasses.replace(reachable, id="b", host_port=0)
    assert deployer.matching(plan, [reachable, forwarder_gone]) == [reachable]
