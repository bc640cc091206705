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
import logging
from datetime import UTC, datetime

from emulator.errors import DeploymentFailed, EngineError
from emulator.hosting.endpoints import component_state
from emulator.hosting.endpoints.base import ServiceBase, failure_reason
from emulator.hosting.endpoints.component_live import LiveComponent, component_fleet
from emulator.hosting.endpoints.health import ping_instance
from emulator.hosting.fleet.plan import VariantPlan
from emulator.hosting.fleet.variants import Instance, VariantFleet, new_instance_id
from emulator.model import messages, placement
from emulator.model.components import (
    ComponentRuntime,
    ComponentStatus,
    DeployedComponentImage,
    InferenceComponent,
    PlacementSummary,
)
from emulator.model.placement import Capacity, HostLoad, Need
from emulator.model.resources import (
    ContainerDefinition,
    EndpointConfig,
    Model,
    ModelDataSource,
    ProductionVariant,
)
from emulator.model.routing import InstancePicker
from emulator.runtime import labels
from emulator.runtime.base import ContainerHandle

log = logging.getLogger(__name__)

#: A copy's need when the instance type is not in the table: nothing is reserved [U].
_UNLIMITED = Capacity(float("inf"), 2**62, 2**31)


class ComponentCopies(ServiceBase):
    # ------------------------------------------------------------------ the endpoint's instances

    def _host_fleet(self, endpoint_name: str, variant: ProductionVariant) -> VariantFleet:
        """A variant for inference components: its instances as capacity records, no container.
        After a restart the instances keep their ids (components.json), so that adopted copies find
        theirs."""
        known = self._component_hosts.get(endpoint_name, {}).get(variant.variant_name, [])
        count = variant.initial_instance_count
        hosts = known[:count] + [new_instance_id() for _ in range(count - len(known))]
        self._component_hosts.setdefault(endpoint_name, {})[variant.variant_name] = hosts
        self.deployer.platform_log(
            endpoint_name, f"{variant.variant_name}: {count} instance(s) ready for inference components"
        )
        return VariantFleet(
            variant=variant,
            instances=[],
            deployed_image=None,
            weight=variant.initial_variant_weight,
            picker=InstancePicker(variant.routing_strategy.value),
            hosts=hosts,
        )

    def _capacity(self, instance_type: str | None) -> Capacity:
        found = Capacity.of_type(instance_type) if instance_type else None
        return found or _UNLIMITED

    def _loads(self, endpoint_name: str, variant: VariantFleet) -> list[HostLoad]:
        """Each instance of the variant with every component's copies (and reservations) on it."""
        capacity = self._capacity(variant.variant.instance_type)
        copies: dict[str, dict[str, tuple[str, Need]]] = {h: {} for h in variant.hosts or ()}
        for live in self._live_components.values():
            if live.endpoint_name != endpoint_name or live.variant_name != variant.variant.variant_name:
                continue
            need = live.need
            for copy_id, host in (*live.host_of.items(), *live.reserved.items()):
                if host in copies:
                    copies[host][copy_id] = (live.name, need)
        return [HostLoad(h, capacity, copies[h]) for h in variant.hosts or ()]

    def _host_variant(self, live: LiveComponent) -> VariantFleet | None:
        fleet = self._fleets.get(live.endpoint_name)
        return None if fleet is None else fleet.variants.get(live.variant_name)

    def _wake_endpoint_components(self, endpoint_name: str) -> None:
        for live in self._live_components.values():
            if live.endpoint_name == endpoint_name:
                live.wake.set()

    async def _set_hosts(self, endpoint_name: str, variant: VariantFleet, count: int) -> None:
        """UpdateEndpointWeightsAndCapacities (or ManagedInstanceScaling) on a variant for
        components: instances are added empty; removed ones (the newest first) take their copies
        with them, which their components then place again (or keep pending)."""
        hosts = variant.hosts
        assert hosts is not None
        if count > len(hosts):
            variant.hosts = hosts + [new_instance_id() for _ in range(count - len(hosts))]
        else:
            gone = set(hosts[count:])
            variant.hosts = hosts[:count]
            victims: list[Instance] = []
            for live in self._live_components.values():
                if live.endpoint_name != endpoint_name or live.variant_name != variant.variant.variant_name:
                    continue
                on_gone = [c for c in live.copies if live.host_of.get(c.instance_id) in gone]
                for copy in on_gone:
                    self._forget_copy(live, copy)
                victims.extend(on_gone)
            if victims:
                await self._retire(victims)
        self._component_hosts.setdefault(endpoint_name, {})[variant.variant.variant_name] = variant.hosts
        self._persist_components()
        self._wake_endpoint_components(endpoint_name)

    def _grow(self, endpoint_name: str, variant: VariantFleet, pending: int, need: Need) -> bool:
        """ManagedInstanceScaling: instances added for `pending` copies, up to its maximum; whether
        any was added."""
        managed = variant.variant.managed_instance_scaling
        hosts = variant.hosts
        assert hosts is not None
        per_instance = placement.copies_per_instance(self._capacity(variant.variant.instance_type), need)
        initial = variant.variant.initial_instance_count
        added = placement.scale_out(len(hosts), pending, managed, initial, per_instance)
        if not added:
            return False
        variant.hosts = hosts + [new_instance_id() for _ in range(added)]
        self._hosts_changed(endpoint_name, variant, f"{added} instance(s) added for {pending} pending copies")
        return True

    def _shrink_idle(self, endpoint_name: str, variant: VariantFleet) -> None:
        """ManagedInstanceScaling: instances that host no copy go, down to its minimum (0 allowed)."""
        managed = variant.variant.managed_instance_scaling
        if managed is None or not managed.enabled or variant.hosts is None:
            return
        if any(
            live.pending for live in self._live_components.values() if live.endpoint_name == endpoint_name
        ):
            return  # another component waits for room: it may take an idle instance
        loads = self._loads(endpoint_name, variant)
        idle = set(placement.idle_to_remove(loads, managed, variant.variant.initial_instance_count))
        if not idle:
            return
        variant.hosts = [h for h in variant.hosts if h not in idle]
        self._hosts_changed(endpoint_name, variant, f"{len(idle)} idle instance(s) removed")

    def _hosts_changed(self, endpoint_name: str, variant: VariantFleet, why: str) -> None:
        assert variant.hosts is not None
        variant.desired_count = len(variant.hosts)
        self._component_hosts.setdefault(endpoint_name, {})[variant.variant.variant_name] = variant.hosts
        self._persist_components()
        self.deployer.platform_log(
            endpoint_name,
            f"{variant.variant.variant_name}: managed instance scaling: {why}; {len(variant.hosts)} now",
        )
        self._wake_endpoint_components(endpoint_name)

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
        """UpdateInferenceComponent: the new specification's copies replace the old ones a batch at a
        time (RollingUpdatePolicy.MaximumBatchSize, WaitIntervalInSeconds between batches; all at
        once without one [U]); each batch is started and healthy before as many old copies leave
        rotation, so that the component never serves fewer copies. A batch that fails (or an alarm of
        AutoRollbackConfiguration in ALARM) rolls back: the new copies stop, the old ones serve on, the
        old specification is kept and the failure is the component's FailureReason (InService) [U]."""
        old = list(live.copies)
        old_spec, old_plan = live.spec, live.plan
        deployment = record.last_deployment_config
        desired = record.desired_copies
        batch = (
            desired if deployment is None else deployment.rolling_update.maximum_batch_size.copies(desired)
        )
        wait_s = 0.0 if deployment is None else float(deployment.rolling_update.wait_interval_s)
        new: list[Instance] = []
        try:
            plan = await self._component_plan(record)
            live.spec, live.plan = record.spec, plan
            while len(new) < desired:
                step = min(batch, desired - len(new))
                new += await self._add_copies(live, plan, step, variant)
                if live.pending:
                    raise DeploymentFailed(messages.component_update_no_room(live.name, live.pending))
                retiring = old[:step]
                old = old[step:]
                for copy in retiring:
                    self._forget_copy(live, copy)
                await self._retire(retiring)
                if wait_s and len(new) < desired:
                    await self._bake(record, wait_s)
            if old:
                for copy in old:
                    self._forget_copy(live, copy)
                await self._retire(old)
            if deployment is not None and wait_s:
                await self._bake(record, wait_s)
        except (DeploymentFailed, EngineError) as exc:
            reason = failure_reason(live.endpoint_name, exc)
            self.deployer.platform_log(
                live.endpoint_name, f"{live.name}: update failed, rolling back: {reason}"
            )
            await self._stop_copies(live, [c for c in new if c in live.copies])
            live.spec, live.plan = old_spec, old_plan
            current = self.inference_components.get(live.name)
            if current is not None:
                self.inference_components.put(
                    dataclasses.replace(
                        current,
                        spec=old_spec,
                        status=ComponentStatus.IN_SERVICE,
                        failure_reason=reason,
                        last_modified_time=self._clock(),
                    )
                )
                self._persist_components()
            live.wake.set()  # the old specification's copies are brought back to the count
            return
        self._record_image(live)
        self.deployer.platform_log(live.endpoint_name, f"{live.name}: update complete")

    async def _bake(self, record: InferenceComponent, wait_s: float) -> None:
        """WaitIntervalInSeconds (scaled by --time-scale as every other wait): an alarm of the
        deployment's AutoRollbackConfiguration in ALARM meanwhile fails the update."""
        deployment = record.last_deployment_config
        alarms = () if deployment is None else deployment.alarms
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.real_seconds(wait_s)
        while True:
            if alarms and self.alarm_states is not None:
                firing = list(self.alarm_states(alarms))
                if firing:
                    raise DeploymentFailed(f"alarm(s) in ALARM during the update: {', '.join(firing)}")
            left = deadline - loop.time()
            if left <= 0:
                return
            await asyncio.sleep(min(left, 0.2))  # alarms have no event of their own: bounded polling

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
        return dataclasses.replace(plan, component=record.name, compute=spec.compute)

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

    # ------------------------------------------------------------------ state

    def _set_component(self, name: str, status: ComponentStatus, failure: str | None) -> None:
        record = self.inference_components.get(name)
        if record is None:
            return
        self.inference_components.put(
            dataclasses.replace(
                record, status=status, failure_reason=failure, last_modified_time=self._clock()
            )
        )
        self._persist_components()

    def _persist_components(self) -> None:
        endpoints = {e.name for e in self.endpoints}
        hosts = {e: v for e, v in self._component_hosts.items() if e in endpoints}
        snapshot = component_state.ComponentSnapshot(list(self.inference_components), hosts)
        component_state.save(component_state.path_in(self.config.state_dir), snapshot)

    def _load_components(self) -> None:
        snapshot = component_state.load(component_state.path_in(self.config.state_dir))
        for record in snapshot.components:
            self.inference_components.put(record)
        self._component_hosts = snapshot.hosts

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
