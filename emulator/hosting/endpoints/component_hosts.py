"""The instances of an endpoint for inference components and the components' records on disk.

Such an endpoint's instances have no container of their own: they are capacity records
(VariantFleet.hosts: their ids, in launch order) of the instance type's vCPUs, memory and
accelerators, on which the components' copies are placed (component_copies.py). Their number is the
variant's count (UpdateEndpointWeightsAndCapacities), or ManagedInstanceScaling's: instances added for
copies no instance has room for, idle ones removed down to its minimum.
"""

from __future__ import annotations

import dataclasses

from emulator.hosting.endpoints import component_state
from emulator.hosting.endpoints.base import ServiceBase
from emulator.hosting.endpoints.component_live import LiveComponent
from emulator.hosting.fleet.variants import Instance, VariantFleet, new_instance_id
from emulator.model import placement
from emulator.model.components import ComponentStatus
from emulator.model.placement import Capacity, HostLoad, Need
from emulator.model.resources import ProductionVariant
from emulator.model.routing import InstancePicker

#: A copy's need when the instance type is not in the table: nothing is reserved [U].
_UNLIMITED = Capacity(float("inf"), 2**62, 2**31)


class ComponentHosts(ServiceBase):
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

    def _forget_copy(self, live: LiveComponent, copy: Instance) -> None:
        raise NotImplementedError  # component_copies.py
