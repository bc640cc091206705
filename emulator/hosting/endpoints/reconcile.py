"""Restart reconciliation: after `smlocal serve` restarts on its state dir, each endpoint that was
serving or being created or updated adopts its running containers (those started from the same plan)
or re-launches; an endpoint being deleted finishes its deletion, and containers no endpoint owns are
removed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from emulator.hosting.endpoints.deployments import Deployments
from emulator.hosting.multi_model import folders
from emulator.model import messages
from emulator.model.resources import EndpointStatus
from emulator.runtime import labels
from emulator.runtime.base import ContainerHandle

log = logging.getLogger(__name__)


class Reconciliation(Deployments):
    async def _reconcile(self) -> None:
        # Isolation networks a crash left without containers (before any deployment starts here).
        await self.executors.engine(self.runtime.remove_leftovers, {labels.OWNER: self.deployer.owner})
        owned = await self.executors.engine(self.deployer.owned_containers)
        states = await asyncio.gather(*(self.executors.engine(self.runtime.state, h.id) for h in owned))
        running = [h for h, st in zip(owned, states, strict=True) if st.running]
        # Multi-model folders of instances that no longer run (a stop or a crash mid-load left them)
        await self.executors.engine(folders.sweep, self.config.state_dir / "multi-model", _instances(running))
        claimed: set[str] = set()
        for endpoint in list(self.endpoints):
            mine = [h for h in running if h.labels.get(labels.ENDPOINT) == endpoint.name]
            if endpoint.status is EndpointStatus.DELETING:
                self._spawn(endpoint.name, self._teardown(endpoint.name, None))
                continue
            if endpoint.status not in (
                EndpointStatus.IN_SERVICE,
                EndpointStatus.CREATING,
                EndpointStatus.UPDATING,
                EndpointStatus.SYSTEM_UPDATING,
            ):
                continue
            # What it served, kept with the endpoint; state files written before that was kept
            # name only the config (and its models must still exist).
            deployed = self._deployed.get(endpoint.name.lower())
            endpoint_config = (
                deployed.endpoint_config
                if deployed is not None
                else self.endpoint_configs.get(endpoint.endpoint_config_name)
            )
            if endpoint_config is None:
                reason = messages.not_found(
                    "endpoint-config", self.account.endpoint_config_arn(endpoint.endpoint_config_name)
                )
                self._set_status(endpoint.name, EndpointStatus.FAILED, reason)
                continue
            # Containers of variants the config no longer has (e.g. a blue/green update interrupted by a
            # restart: its new fleet) are not claimed, so they are removed below as orphans.
            names = {v.variant_name for v in endpoint_config.production_variants}
            mine = [h for h in mine if h.labels.get(labels.VARIANT) in names]
            claimed.update(h.id for h in mine)
            # inference components' copies: adopted by their components once the endpoint serves
            copies = [h for h in mine if labels.COMPONENT in h.labels]
            self._component_handles[endpoint.name] = copies
            mine = [h for h in mine if labels.COMPONENT not in h.labels]
            # [U] an endpoint that was serving shows SystemUpdating (SageMaker's maintenance status)
            # while its containers are adopted or re-launched; one that was being created, Creating
            relaunch = (
                EndpointStatus.CREATING
                if endpoint.status is EndpointStatus.CREATING
                else EndpointStatus.SYSTEM_UPDATING
            )
            updated = self._set_status(endpoint.name, relaunch)
            # weights and counts changed since the config was deployed (autoscaling, too) come back
            effective = endpoint.effective_config(endpoint_config)
            self._spawn(
                endpoint.name,
                self._deploy(updated, effective, group_by_variant(mine, endpoint.name), deployed),
            )
        orphans = [h for h in owned if h.id not in claimed]
        if orphans:
            log.info("removing %d container(s) no endpoint owns", len(orphans))
        await asyncio.gather(
            *(self.deployer.stop_container(h.id, self.config.limits.stop_grace_s) for h in orphans)
        )


def _instances(handles: list[ContainerHandle]) -> set[tuple[str, str]]:
    """(endpoint, instance id) of each container's instance."""
    return {(h.labels.get(labels.ENDPOINT, ""), h.labels.get(labels.INSTANCE, "")) for h in handles}


def group_by_variant(
    handles: Sequence[ContainerHandle], endpoint: str
) -> Mapping[str, list[ContainerHandle]]:
    grouped: dict[str, list[ContainerHandle]] = {}
    for h in handles:
        if h.labels.get(labels.ENDPOINT) == endpoint:
            grouped.setdefault(h.labels.get(labels.VARIANT, ""), []).append(h)
    return grouped
