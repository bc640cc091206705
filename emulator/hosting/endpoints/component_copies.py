"""The live side of inference components: each component's copies (containers) placed on its
endpoint's instances, kept at its desired count by one converging task per component.

An endpoint for inference components has instances without containers of their own: capacity
records (VariantFleet.hosts) of the instance type's vCPUs, memory and accelerators
(model/placement.py's Capacity). Each copy of a component is one container, started exactly as an
endpoint's instance is (the deployer: `serve`, /opt/ml/model, pinged until healthy), with the
component's reservation as its limits (instance_limits.component_limits), labelled with the component
and the instance it is placed on.

Each component has one task (`_component_loop`) that converges it: copies that exited or failed
their ping leave rotation and are stopped; missing copies are placed (SPREAD or BINPACK over every
component's reservations on the endpoint) and started, those that find no room are pending (counted,
and placed when an instance is added or another component frees room); extra copies leave rotation,
finish their requests and stop; a new specification rolls out batch by batch. Every change wakes it
(`_wake_component`); between changes it waits for a copy's exit or the next health check.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from datetime import UTC, datetime
from pathlib import Path

from emulator.errors import DeploymentFailed
from emulator.hosting.endpoints.base import failure_reason
from emulator.hosting.endpoints.component_hosts import ComponentHosts
from emulator.hosting.endpoints.component_live import LiveComponent, component_fleet
from emulator.hosting.endpoints.health import ping_instance
from emulator.hosting.fleet.plan import VariantPlan
from emulator.hosting.fleet.variants import Instance, VariantFleet, new_instance_id
from emulator.model import placement
from emulator.model.components import (
    ADAPTER_ROOT,
    ComponentRuntime,
    ComponentStatus,
    DeployedComponentImage,
    InferenceComponent,
    PlacementSummary,
)
from emulator.model.placement import Need
from emulator.model.resources import (
    ContainerDefinition,
    EndpointConfig,
    Model,
    ModelDataSource,
    ProductionVariant,
)
from emulator.runtime import labels
from emulator.runtime.base import ContainerHandle

log = logging.getLogger(__name__)


class ComponentCopies(ComponentHosts):
    # ------------------------------------------------------------------ a component's copies

    def _start_component(
        self, record: InferenceComponent, adopt: list[ContainerHandle] | None = None
    ) -> None:
        host = self._fleets[record.endpoint_name].variants[record.variant_name]
        live = LiveComponent(
            record.name,
            record.endpoint_name,
            record.variant_name,
            component_fleet(record.name, host.variant),
            record.spec,
            adopt=list(adopt or ()),
        )
        if adopt is None:  # a new component: nothing to wait for
            live.restored.set()
        self._live_components[record.name.lower()] = live
        live.task = asyncio.ensure_future(self._component_loop(live))

    def _wake_component(self, name: str) -> None:
        live = self._live_components.get(name.lower())
        if live is not None:
            live.wake.set()

    def component_load(self, name: str) -> tuple[int, int] | None:
        """(requests in flight on its copies, copies in rotation) of a serving component, None for
        one that does not serve: ConcurrentRequestsPerCopy's sample."""
        live = self._live_components.get(name.lower())
        if live is None:
            return None
        copies = list(live.fleet.instances)
        return sum(c.outstanding for c in copies), len(copies)

    def inference_component_runtime(self, name: str) -> ComponentRuntime | None:
        record = self.inference_components.get(name)
        live = self._live_components.get(name.lower())
        if record is None or live is None:
            return None
        serving = len(live.fleet.instances)
        variant = self._host_variant(live)
        instance_type = variant.variant.instance_type if variant is not None else None
        summary = (PlacementSummary(instance_type, serving),) if instance_type and serving else ()
        return ComponentRuntime(record.desired_copies, serving, summary)

    async def _component_loop(self, live: LiveComponent) -> None:
        """Converge the component until it is deleted; a failed step is retried after the health
        check interval (a component still Creating fails instead)."""
        loop = asyncio.get_running_loop()
        next_ping = loop.time() + self.health_check_interval_s
        while True:
            live.wake.clear()
            record = self.inference_components.get(live.name)
            if record is None or record.status is ComponentStatus.DELETING:
                return
            failure: str | None = None
            try:
                await self._converge(live, record)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure is the component's FailureReason
                failure = failure_reason(live.endpoint_name, exc)
            live.restored.set()
            record = self.inference_components.get(live.name)
            if record is None or record.status is ComponentStatus.DELETING:
                return
            if failure is not None:
                self.deployer.platform_log(live.endpoint_name, f"{live.name}: {failure}")
                if record.status is ComponentStatus.CREATING:
                    self._set_component(live.name, ComponentStatus.FAILED, failure)
                    await self._stop_copies(live, list(live.copies))
                    return
                if record.status is ComponentStatus.UPDATING:  # [U] serving on, tried again
                    self._set_component(live.name, ComponentStatus.IN_SERVICE, failure)
            elif live.wake.is_set():
                pass  # changed while it converged: the status follows the next step
            elif (
                record.status is ComponentStatus.CREATING
                and record.desired_copies
                and not live.fleet.instances
            ):
                # [U] no copy found room yet: Creating until one serves (an instance added, room freed)
                self.deployer.platform_log(live.endpoint_name, f"{live.name}: waiting for room for a copy")
            elif record.status in (ComponentStatus.CREATING, ComponentStatus.UPDATING):
                self._set_component(live.name, ComponentStatus.IN_SERVICE, None)
                self.deployer.platform_log(
                    live.endpoint_name,
                    f"{live.name}: InService with {len(live.fleet.instances)} of "
                    f"{record.desired_copies} copies"
                    + (f" ({live.pending} pending: no instance has room)" if live.pending else ""),
                )
            if live.wake.is_set():
                continue
            await _until_changed(live, max(0.0, next_ping - loop.time()))
            if loop.time() >= next_ping:
                next_ping = loop.time() + self.health_check_interval_s
                await self._ping_copies(live)

    async def _ping_copies(self, live: LiveComponent) -> None:
        """A copy in rotation that fails its /ping leaves rotation and is stopped (then replaced)."""
        serving = list(live.fleet.instances)
        timeout_s = self.config.limits.ping_timeout_s
        results = await asyncio.gather(*(ping_instance(self.ping_session, c, timeout_s) for c in serving))
        failed = [c for c, ok in zip(serving, results, strict=True) if not ok and c in live.copies]
        for copy in failed:
            self.deployer.platform_log(
                live.endpoint_name,
                f"{live.name}/{copy.instance_id} failed its ping health check; replacing it",
            )
            self._forget_copy(live, copy)
        if failed:
            await self.deployer.stop_instances(failed)

    def _forget_copy(self, live: LiveComponent, copy: Instance) -> None:
        """Out of rotation and of the placement at once (its container is the caller's to stop)."""
        live.fleet.remove([copy])
        if copy in live.copies:
            live.copies.remove(copy)
        live.host_of.pop(copy.instance_id, None)

    async def _stop_copies(self, live: LiveComponent, copies: list[Instance]) -> None:
        for copy in copies:
            self._forget_copy(live, copy)
        await self.deployer.stop_instances(copies)

    async def _converge(self, live: LiveComponent, record: InferenceComponent) -> None:
        """One step toward the record: dead copies out, the plan made, copies added or removed, a
        new specification rolled out."""
        variant = self._host_variant(live)
        if variant is None:  # the endpoint is not serving (being restored): woken when it is
            return
        dead = [c for c in live.copies if c.exited.is_set()]
        for copy in dead:
            why = f"exited with code {copy.exit_code}" if copy.exit_code is not None else "exited"
            self.deployer.platform_log(
                live.endpoint_name, f"{live.name}/{copy.instance_id} {why}; replacing it"
            )
        if dead:
            await self._stop_copies(live, dead)
        if live.plan is None:
            live.plan = await self._component_plan(record)
            self._adopt_copies(live, variant)
            self._record_image(live)
        if record.spec != live.spec:
            await self._roll_out(live, record, variant)
            return
        await self._scale_copies(live, record.desired_copies, variant)

    def _adopt_copies(self, live: LiveComponent, variant: VariantFleet) -> None:
        """After a restart: the component's running containers started from its plan, on an instance
        the variant still has, are its copies again; the others are stopped by the caller's sweep."""
        assert live.plan is not None
        handles, live.adopt = live.adopt, []
        hosts = set(variant.hosts or ())
        matching = [
            h for h in self.deployer.matching(live.plan, handles) if h.labels.get(labels.HOST) in hosts
        ]
        for handle in matching:
            copy = self.deployer.adopt_instance(live.plan, [handle])
            live.copies.append(copy)
            live.host_of[copy.instance_id] = handle.labels[labels.HOST]
            live.fleet.add([copy])
        kept = {h.id for h in matching}
        for handle in handles:
            if handle.id not in kept:
                self._stop_handle_in_background(live.endpoint_name, handle)

    def _stop_handle_in_background(self, endpoint_name: str, handle: ContainerHandle) -> None:
        task = asyncio.ensure_future(self.deployer.stop_container(handle.id, self.config.limits.stop_grace_s))
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    def _record_image(self, live: LiveComponent) -> None:
        """Specification.Container.DeployedImage, once the image is resolved."""
        record = self.inference_components.get(live.name)
        if record is None or live.plan is None or record.spec.container is None:
            return
        image = DeployedComponentImage(
            live.plan.model.primary_container.image, live.plan.image.resolved, datetime.now(UTC)
        )
        self.inference_components.put(dataclasses.replace(record, deployed_image=image))
        self._persist_components()

    async def _scale_copies(self, live: LiveComponent, desired: int, variant: VariantFleet) -> None:
        assert live.plan is not None
        have = len(live.copies)
        if desired > have:
            await self._add_copies(live, live.plan, desired - have, variant)
            return
        live.pending = 0
        if desired < have:
            loads = self._loads(live.endpoint_name, variant)
            ids = set(placement.copies_to_remove(loads, live.name, have - desired, live.spec.placement))
            victims = [c for c in live.copies if c.instance_id in ids]
            for copy in victims:
                self._forget_copy(live, copy)
            self.deployer.platform_log(live.endpoint_name, f"{live.name}: {len(victims)} copies stopping")
            await self._retire(victims)
            self._wake_endpoint_components(live.endpoint_name)  # room for pending copies elsewhere
            self._shrink_idle(live.endpoint_name, variant)

    async def _add_copies(
        self, live: LiveComponent, plan: VariantPlan, count: int, variant: VariantFleet
    ) -> list[Instance]:
        """Place `count` copies and start the placed ones at once; those with no room are pending.
        The copies that started join rotation even when another failed (the failure is raised)."""
        loads = self._loads(live.endpoint_name, variant)
        need = Need.of(plan.compute)
        decided = placement.place(loads, live.name, need, count, live.spec.placement)
        if decided.pending and self._grow(live.endpoint_name, variant, decided.pending, need):
            loads = self._loads(live.endpoint_name, variant)
            decided = placement.place(loads, live.name, need, count, live.spec.placement)
        live.pending = decided.pending
        placeholders = [f"starting-{n}-{new_instance_id()}" for n in range(len(decided.assigned))]
        live.reserved.update(zip(placeholders, decided.assigned, strict=True))
        try:
            results = await asyncio.gather(
                *(
                    self.deployer.start_healthy(dataclasses.replace(plan, host_id=host), 1)
                    for host in decided.assigned
                ),
                return_exceptions=True,
            )
        finally:
            for placeholder in placeholders:
                live.reserved.pop(placeholder, None)
        started: list[Instance] = []
        errors: list[BaseException] = []
        for host, result in zip(decided.assigned, results, strict=True):
            if isinstance(result, BaseException):
                errors.append(result)
                continue
            for copy in result:
                live.copies.append(copy)
                live.host_of[copy.instance_id] = host
                started.append(copy)
        if started:
            try:
                await self._copies_started(live, started)
            except BaseException:
                await asyncio.shield(self._stop_copies(live, started))
                raise
        live.fleet.add(started)
        if started:
            self.deployer.platform_log(live.endpoint_name, f"{live.name}: {len(started)} copies serving")
        for error in errors:
            if isinstance(error, asyncio.CancelledError):
                raise error
        if errors:
            live.pending += len(errors)
            raise errors[0]
        return started

    async def _roll_out(self, live: LiveComponent, record: InferenceComponent, variant: VariantFleet) -> None:
        raise NotImplementedError  # component_rollout.py

    def _adapter_restored(self, record: InferenceComponent) -> None:
        """After a restart: an adapter being created is loaded again, one being deleted goes
        (component_adapters.py)."""

    async def _copies_started(self, live: LiveComponent, copies: list[Instance]) -> None:
        """New copies are healthy, not yet in rotation: the base's adapters are loaded into them
        (component_adapters.py)."""

    async def _component_plan(self, record: InferenceComponent) -> VariantPlan:
        """What every copy starts from: the component's model (the named one, or one made of its
        Container), as a variant of the endpoint's instance type with its StartupParameters."""
        fleet = self._fleets[record.endpoint_name]
        host = fleet.variants[record.variant_name].variant
        spec = record.spec
        model = self._component_model(record)
        variant = ProductionVariant(
            variant_name=record.variant_name,
            model_name=model.name,
            initial_instance_count=0,
            instance_type=host.instance_type,
            startup_health_check_timeout_s=spec.startup_health_check_timeout_s,
            model_data_download_timeout_s=spec.model_data_download_timeout_s,
            routing_strategy=host.routing_strategy,
        )
        plan = await self._plan(record.endpoint_name, variant, model)
        adapters = self._adapters_dir(record.endpoint_name, record.name)
        await self.executors.model_data(functools.partial(adapters.mkdir, parents=True, exist_ok=True))
        mounts = (*plan.channel_dirs, (adapters, ADAPTER_ROOT))  # adapters appear there (read-only)
        return dataclasses.replace(plan, component=record.name, compute=spec.compute, channel_dirs=mounts)

    def _adapters_dir(self, endpoint_name: str, base: str) -> Path:
        """The host folder of a base component's adapters, mounted in each of its copies at
        ADAPTER_ROOT: one folder per adapter (component_adapters.py)."""
        return self.config.state_dir / "adapters" / endpoint_name / base

    def _component_model(self, record: InferenceComponent) -> Model:
        spec = record.spec
        if spec.model_name is not None:
            model = self.models.get(spec.model_name)
            if model is None:
                raise DeploymentFailed(
                    f"Model {spec.model_name} of inference component {record.name} is gone."
                )
            return model
        container = spec.container
        assert container is not None and container.image is not None
        data = None if container.artifact_url is None else ModelDataSource(uri=container.artifact_url)
        config = self._endpoint_config_of(record.endpoint_name)
        return Model(
            name=record.name,
            arn=record.arn,
            primary_container=ContainerDefinition(container.image, dict(container.environment), data),
            creation_time=record.creation_time,
            execution_role_arn=None if config is None else config.execution_role_arn,
        )

    def _endpoint_config_of(self, endpoint_name: str) -> EndpointConfig | None:
        deployed = self._deployed.get(endpoint_name.lower())
        return None if deployed is None else deployed.endpoint_config

    def _components_serving(self, endpoint_name: str) -> None:
        """The endpoint is InService: after a restart its components start converging again
        (adopting their running copies); otherwise they are woken (the fleet may be new)."""
        self._restore_components(endpoint_name, self._component_handles.pop(endpoint_name, []))
        self._wake_endpoint_components(endpoint_name)

    def _restore_components(self, endpoint_name: str, handles: list[ContainerHandle]) -> None:
        """After a restart, once the endpoint serves again: its components converge again, adopting
        their running copies; a component being deleted finishes its deletion."""
        for record in self.inference_components:
            if record.endpoint_name != endpoint_name or record.name.lower() in self._live_components:
                continue
            if record.spec.adapter:  # no copies: loaded into its base's (component_adapters.py)
                self._adapter_restored(record)
                continue
            mine = [h for h in handles if h.labels.get(labels.COMPONENT) == record.name]
            if record.status is ComponentStatus.DELETING:
                for handle in mine:
                    self._stop_handle_in_background(endpoint_name, handle)
                self.inference_components.remove(record.name)
                self._persist_components()
                continue
            if record.status is ComponentStatus.FAILED:
                for handle in mine:
                    self._stop_handle_in_background(endpoint_name, handle)
                continue
            self._start_component(record, mine)  # `mine` may be empty: still a restore

    async def _close_components(self, stop_containers: bool) -> None:
        lives = list(self._live_components.values())
        for live in lives:
            if live.task is not None:
                live.task.cancel()
        await asyncio.gather(*(live.task for live in lives if live.task is not None), return_exceptions=True)
        if stop_containers:
            await self.deployer.stop_instances([c for live in lives for c in live.copies])
        self._live_components.clear()


async def _until_changed(live: LiveComponent, timeout_s: float) -> None:
    """Until the component is woken, one of its copies exits, or `timeout_s` passes."""
    waiters = [asyncio.ensure_future(live.wake.wait())]
    waiters += [asyncio.ensure_future(c.exited.wait()) for c in live.copies]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
