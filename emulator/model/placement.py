"""Where an inference component's copies go: pure decisions over a variant's instances (no IO).

A variant of an inference-component endpoint provides instances of one type; each copy of a component
reserves part of one instance (its ComputeResourceRequirements). The hosting side asks this module
which instance gets each new copy (`place`), which copies go when a component scales in
(`copies_to_remove`), whether a copy can never fit the type at all (`never_fits`: fail the component
instead of keeping it pending forever), and, with ManagedInstanceScaling, how many instances to add
for pending copies (`scale_out`) and which idle ones to remove (`idle_to_remove`).

Every choice is deterministic (ties broken by instance id or launch order) so that a test, a restart
and a replay place the same copies on the same instances.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from emulator.model import messages
from emulator.model.components import ComputeRequirements, ManagedInstanceScaling, PlacementStrategy
from emulator.model.instance_types import lookup

#: Float slack for CPU sums (0.1 + 0.2 copies must fit 0.3 cores).
_EPS = 1e-9


@dataclass(frozen=True)
class Capacity:
    """What an instance offers copies (or, as `HostLoad.free`, what it has left).

    The whole instance as the instance-type table gives it: SageMaker does not publish how much of an
    instance its own agents keep, so smlocal reserves nothing [U] (no documented figure was found).
    """

    vcpus: float
    memory_mb: int
    accelerators: int
    #: the type's name, for the texts of `never_fits`
    instance_type: str | None = None

    @classmethod
    def of_type(cls, instance_type: str) -> Capacity | None:
        """The capacity of one instance of `instance_type`, None for a type the table does not know
        (the caller then applies no limits). Memory in MiB (the API's "Mb"); accelerators are the
        table's devices of any kind (NVIDIA GPUs, Inferentia/Trainium devices) [U]."""
        row = lookup(instance_type)
        if row is None:
            return None
        return cls(float(row.vcpus), int(row.memory_gib * 1024), row.accelerators, row.name)


@dataclass(frozen=True)
class Need:
    """What one copy reserves of its instance."""

    cpus: float = 0.0
    memory_mb: int = 0
    accelerators: int = 0

    @classmethod
    def of(cls, compute: ComputeRequirements | None) -> Need:
        """Placement reserves MinMemoryRequiredInMb (MaxMemoryRequiredInMb is only the container's
        limit, which copies may share as they would on SageMaker); a fractional accelerator count
        takes whole devices (a device is not shared between copies). A component without
        ComputeRequirements (an adapter, which runs in its base's copies) needs nothing."""
        if compute is None:
            return cls()
        return cls(compute.cpus or 0.0, compute.min_memory_mb, math.ceil(compute.accelerators or 0))

    def __add__(self, other: Need) -> Need:
        return Need(
            self.cpus + other.cpus, self.memory_mb + other.memory_mb, self.accelerators + other.accelerators
        )


@dataclass(frozen=True)
class HostLoad:
    """One instance of the variant and the copies it hosts: copy id -> (component name, Need), in the
    order the copies were started (the newest last)."""

    instance_id: str
    capacity: Capacity
    copies: Mapping[str, tuple[str, Need]] = field(default_factory=dict)

    @property
    def used(self) -> Need:
        return sum((need for _, need in self.copies.values()), Need())

    @property
    def free(self) -> Capacity:
        used = self.used
        c = self.capacity
        return replace(
            c,
            vcpus=c.vcpus - used.cpus,
            memory_mb=c.memory_mb - used.memory_mb,
            accelerators=c.accelerators - used.accelerators,
        )

    def fits(self, need: Need) -> bool:
        free = self.free
        return (
            need.cpus <= free.vcpus + _EPS
            and need.memory_mb <= free.memory_mb
            and need.accelerators <= free.accelerators
        )

    def count(self, component: str) -> int:
        """How many copies of `component` this instance hosts."""
        return sum(1 for name, _ in self.copies.values() if name == component)

    def with_copy(self, copy_id: str, component: str, need: Need) -> HostLoad:
        return replace(self, copies={**self.copies, copy_id: (component, need)})

    def without_copy(self, copy_id: str) -> HostLoad:
        return replace(self, copies={k: v for k, v in self.copies.items() if k != copy_id})


@dataclass(frozen=True)
class Placement:
    """The instance id of each new copy, in order (an id may repeat), and how many found no room."""

    assigned: tuple[str, ...]
    pending: int


def place(
    hosts: Sequence[HostLoad], component: str, need: Need, count: int, strategy: PlacementStrategy
) -> Placement:
    """Place `count` new copies of `component`, one at a time, each accounted before the next.

    SPREAD: the instance with the fewest copies of this component (resilience: one instance lost takes
    the fewest), ties by the most free memory, then instance id. BINPACK: the fullest instance that
    still fits (least free accelerators, then memory, then CPUs [U]: the scarcest resource first), ties
    by instance id, so whole instances stay empty for ManagedInstanceScaling to remove. A copy that
    fits nowhere is pending, and so are the ones after it (they are the same size).
    """
    loads = list(hosts)
    assigned: list[str] = []
    for n in range(count):
        fitting = [i for i, h in enumerate(loads) if h.fits(need)]
        if not fitting:
            return Placement(tuple(assigned), count - n)
        if strategy is PlacementStrategy.BINPACK:
            best = min(fitting, key=lambda i: _fullness(loads[i]))
        else:
            best = min(fitting, key=lambda i: _spread(loads[i], component))
        loads[best] = loads[best].with_copy(f"\0new-{n}", component, need)
        assigned.append(loads[best].instance_id)
    return Placement(tuple(assigned), 0)


def _fullness(h: HostLoad) -> tuple[int, int, float, str]:
    free = h.free
    return (free.accelerators, free.memory_mb, free.vcpus, h.instance_id)


def _spread(h: HostLoad, component: str) -> tuple[int, int, str]:
    return (h.count(component), -h.free.memory_mb, h.instance_id)


def never_fits(capacity: Capacity, need: Need) -> str | None:
    """Why one copy can never be placed on an instance of this type (bigger than a whole, empty one),
    or None when it fits an empty instance. Each resource that is short gives its text, joined by
    "; " [U]."""
    name = capacity.instance_type or "the instance type"
    reasons: list[str] = []
    if need.cpus > capacity.vcpus + _EPS:
        reasons.append(messages.copy_needs_cpus(need.cpus, name, capacity.vcpus))
    if need.memory_mb > capacity.memory_mb:
        reasons.append(messages.copy_needs_memory(need.memory_mb, name, capacity.memory_mb))
    if need.accelerators > capacity.accelerators:
        reasons.append(messages.copy_needs_accelerators(need.accelerators, name, capacity.accelerators))
    return "; ".join(reasons) or None


def copies_per_instance(capacity: Capacity, need: Need) -> int:
    """How many copies of `need` one empty instance holds (0: never fits; a need of nothing fits
    without bound, given as sys.maxsize). The `per_instance` of `scale_out`."""
    bounds = [sys.maxsize]
    if need.cpus > 0:
        bounds.append(math.floor(capacity.vcpus / need.cpus + _EPS))
    if need.memory_mb > 0:
        bounds.append(capacity.memory_mb // need.memory_mb)
    if need.accelerators > 0:
        bounds.append(capacity.accelerators // need.accelerators)
    return max(0, min(bounds))


def scale_out(
    hosts_count: int,
    pending: int,
    managed: ManagedInstanceScaling | None,
    initial: int,
    per_instance: int = 1,
) -> int:
    """How many instances to add so that `pending` copies fit, each new instance holding
    `per_instance` of them, never past ManagedInstanceScaling's ceiling. 0 without managed scaling
    (the variant keeps its InitialInstanceCount) or for a copy that fits no instance."""
    if managed is None or not managed.enabled or pending <= 0 or per_instance <= 0:
        return 0
    wanted = -(-pending // per_instance)
    return max(0, min(wanted, managed.ceiling(initial) - hosts_count))


def idle_to_remove(
    hosts: Sequence[HostLoad], managed: ManagedInstanceScaling | None, initial: int
) -> tuple[str, ...]:
    """The instances that host no copy and may go, newest first (`hosts` in launch order, the newest
    last), keeping ManagedInstanceScaling's floor (0 allowed: an endpoint with no copies has no
    instances). Nothing without managed scaling."""
    if managed is None or not managed.enabled:
        return ()
    excess = len(hosts) - managed.floor(initial)
    idle = [h.instance_id for h in reversed(hosts) if not h.copies]
    return tuple(idle[: max(0, excess)])


def copies_to_remove(
    hosts: Sequence[HostLoad], component: str, count: int, strategy: PlacementStrategy
) -> tuple[str, ...]:
    """The ids of `count` copies of `component` to stop when it scales in, one at a time, each
    accounted before the next, the newest copy of the chosen instance first.

    SPREAD takes from the instance with the most copies of the component (the spread stays even);
    BINPACK from the emptiest instance (fewest copies of any component, then most free memory), so
    that instances become idle and ManagedInstanceScaling can remove them. Ties: the newest instance
    (`hosts` in launch order), which `idle_to_remove` also takes first [U].
    """
    loads = list(hosts)
    chosen: list[str] = []
    for _ in range(count):
        holding = [i for i, h in enumerate(loads) if h.count(component)]
        if not holding:
            break
        if strategy is PlacementStrategy.BINPACK:
            best = min(holding, key=lambda i: (len(loads[i].copies), -loads[i].free.memory_mb, -i))
        else:
            best = max(holding, key=lambda i: (loads[i].count(component), i))
        copy_id = [k for k, (name, _) in loads[best].copies.items() if name == component][-1]
        loads[best] = loads[best].without_copy(copy_id)
        chosen.append(copy_id)
    return tuple(chosen)
