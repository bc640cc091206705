"""model/placement.py: where inference-component copies go, and when instances come and go."""

from __future__ import annotations

from emulator.model import messages
from emulator.model.components import ComputeRequirements, ManagedInstanceScaling, PlacementStrategy
from emulator.model.placement import (
    Capacity,
    HostLoad,
    Need,
    Placement,
    copies_per_instance,
    copies_to_remove,
    idle_to_remove,
    never_fits,
    place,
    scale_out,
)

SPREAD = PlacementStrategy.SPREAD
BINPACK = PlacementStrategy.BINPACK


def _cap(instance_type: str) -> Capacity:
    capacity = Capacity.of_type(instance_type)
    assert capacity is not None
    return capacity


def _host(instance_id: str, instance_type: str = "ml.m5.xlarge", **copies: tuple[str, Need]) -> HostLoad:
    return HostLoad(instance_id, _cap(instance_type), copies)


def test_capacity_of_type_reads_the_table() -> None:
    assert Capacity.of_type("ml.m5.large") == Capacity(2.0, 8192, 0, "ml.m5.large")
    assert Capacity.of_type("ml.g5.12xlarge") == Capacity(48.0, 196608, 4, "ml.g5.12xlarge")
    assert Capacity.of_type("ml.inf2.24xlarge") == Capacity(96.0, 393216, 6, "ml.inf2.24xlarge")
    assert Capacity.of_type("ml.unknown.large") is None


def test_need_reserves_the_minimum_memory_and_whole_accelerators() -> None:
    compute = ComputeRequirements(min_memory_mb=2048, cpus=0.5, accelerators=1.5, max_memory_mb=8192)
    assert Need.of(compute) == Need(0.5, 2048, 2)
    assert Need.of(ComputeRequirements(min_memory_mb=1024)) == Need(0.0, 1024, 0)
    assert Need.of(None) == Need()  # an adapter: its base's copies carry it


def test_three_fit_the_fourth_is_pending_until_an_instance_is_added() -> None:
    need = Need(1.0, 5000)  # ml.m5.xlarge: 4 vCPUs, 16384 MiB: three copies by memory, not four
    first = _host("i-1")
    placement = place([first], "ic", need, 4, SPREAD)
    assert placement == Placement(("i-1", "i-1", "i-1"), 1)

    managed = ManagedInstanceScaling(True, min_instances=1, max_instances=2)
    per_instance = copies_per_instance(first.capacity, need)
    assert per_instance == 3
    assert scale_out(1, placement.pending, managed, 1, per_instance) == 1

    loaded = first
    for n, instance_id in enumerate(placement.assigned):
        assert instance_id == "i-1"
        loaded = loaded.with_copy(f"c{n}", "ic", need)
    assert not loaded.fits(need)
    assert place([loaded, _host("i-2")], "ic", need, 1, SPREAD) == Placement(("i-2",), 0)


def test_spread_and_binpack_on_two_instances() -> None:
    need = Need(1.0, 4096)
    empty = [_host("i-a"), _host("i-b")]
    assert place(empty, "ic", need, 3, SPREAD).assigned == ("i-a", "i-b", "i-a")
    assert place(empty, "ic", need, 3, BINPACK).assigned == ("i-a", "i-a", "i-a")

    # i-b already hosts another component's copy: BINPACK fills it, SPREAD starts on the emptier i-a
    busy = [_host("i-a"), _host("i-b", o1=("other", Need(1.0, 8192)))]
    assert place(busy, "ic", need, 2, BINPACK).assigned == ("i-b", "i-b")
    assert place(busy, "ic", need, 2, SPREAD).assigned == ("i-a", "i-b")
    # SPREAD counts copies of this component first, free memory only breaks ties
    mine = [_host("i-a", c1=("ic", need)), _host("i-b", o1=("other", Need(1.0, 8192)))]
    assert place(mine, "ic", need, 1, SPREAD).assigned == ("i-b",)


def test_accelerators_are_placed_in_whole_devices() -> None:
    need = Need.of(ComputeRequirements(min_memory_mb=1024, cpus=1.0, accelerators=1.5))
    gpu = _host("i-g", "ml.g5.12xlarge")  # 4 GPUs: two copies of 2 devices
    assert place([gpu], "llm", need, 3, BINPACK) == Placement(("i-g", "i-g"), 1)
    assert place([_host("i-c", "ml.m5.24xlarge")], "llm", need, 1, SPREAD) == Placement((), 1)


def test_memory_min_not_max_decides_the_fit() -> None:
    need = Need.of(ComputeRequirements(min_memory_mb=2048, max_memory_mb=8192))
    host = _host("i-1", "ml.m5.large")  # 8192 MiB
    assert place([host], "ic", need, 5, SPREAD) == Placement(("i-1",) * 4, 1)
    assert never_fits(host.capacity, Need(memory_mb=8192)) is None
    assert never_fits(host.capacity, Need(memory_mb=8193)) == "needs 8193 MB of memory, ml.m5.large has 8192"


def test_fractional_cpus_add_up() -> None:
    host = HostLoad("i-1", Capacity(0.3, 1024, 0))
    assert place([host], "ic", Need(0.1, 1), 4, SPREAD) == Placement(("i-1",) * 3, 1)


def test_never_fits_texts() -> None:
    large = _cap("ml.m5.large")
    assert never_fits(large, Need(8.0, 1024)) == "needs 8.0 CPU cores, ml.m5.large has 2"
    assert never_fits(large, Need(0.25, 1024, 1)) == "needs 1 accelerator device, ml.m5.large has 0"
    assert never_fits(_cap("ml.g5.xlarge"), Need(1.0, 1024, 2)) == (
        "needs 2 accelerator devices, ml.g5.xlarge has 1"
    )
    assert never_fits(large, Need(4.0, 16384)) == (
        "needs 4.0 CPU cores, ml.m5.large has 2; needs 16384 MB of memory, ml.m5.large has 8192"
    )
    assert never_fits(large, Need(2.0, 8192)) is None
    assert never_fits(Capacity(2.0, 1024, 0), Need(4.0)) == "needs 4.0 CPU cores, the instance type has 2"
    assert messages.copy_needs_cpus(0.5, "ml.t2.medium", 2.0) == "needs 0.5 CPU cores, ml.t2.medium has 2"


def test_scale_out_stops_at_the_ceiling() -> None:
    managed = ManagedInstanceScaling(True, min_instances=0, max_instances=3)
    assert scale_out(0, 1, managed, 1) == 1  # from zero instances
    assert scale_out(1, 5, managed, 1, per_instance=2) == 2
    assert scale_out(2, 10, managed, 1, per_instance=2) == 1
    assert scale_out(3, 10, managed, 1) == 0
    assert scale_out(1, 0, managed, 1) == 0
    assert scale_out(1, 3, managed, 1, per_instance=0) == 0  # never fits: failed, not scaled
    assert scale_out(1, 3, None, 1) == 0
    assert scale_out(1, 3, ManagedInstanceScaling(False, 0, 3), 1) == 0
    assert scale_out(1, 3, ManagedInstanceScaling(True), 2) == 1  # no maximum: InitialInstanceCount


def test_idle_instances_go_newest_first_down_to_the_floor() -> None:
    need = Need(1.0, 1024)
    hosts = [_host("i-1", c1=("ic", need)), _host("i-2"), _host("i-3")]
    to_zero = ManagedInstanceScaling(True, min_instances=0, max_instances=4)
    assert idle_to_remove(hosts, to_zero, 1) == ("i-3", "i-2")
    assert idle_to_remove(hosts[1:], to_zero, 1) == ("i-3", "i-2")  # zero instances left
    assert idle_to_remove(hosts, ManagedInstanceScaling(True, min_instances=2, max_instances=4), 1) == (
        "i-3",
    )
    assert idle_to_remove(hosts, ManagedInstanceScaling(True, min_instances=3, max_instances=4), 1) == ()
    assert idle_to_remove(hosts, None, 1) == ()
    assert idle_to_remove(hosts, ManagedInstanceScaling(False, 0, 4), 1) == ()


def test_copies_to_remove_spread_takes_from_the_fullest() -> None:
    need = Need(1.0, 1024)
    hosts = [
        _host("i-a", a1=("ic", need), a2=("ic", need), a3=("ic", need)),
        _host("i-b", b1=("ic", need), o1=("other", need)),
    ]
    assert copies_to_remove(hosts, "ic", 2, SPREAD) == ("a3", "a2")
    assert copies_to_remove(hosts, "ic", 3, SPREAD) == ("a3", "a2", "b1")  # a tie: the newest instance
    assert copies_to_remove(hosts, "ic", 9, SPREAD) == ("a3", "a2", "b1", "a1")
    assert copies_to_remove(hosts, "none", 1, SPREAD) == ()


def test_copies_to_remove_binpack_empties_instances() -> None:
    need = Need(1.0, 1024)
    hosts = [
        _host("i-a", a1=("ic", need), a2=("ic", need), o1=("other", need)),
        _host("i-b", b1=("ic", need), b2=("ic", need)),
    ]
    assert copies_to_remove(hosts, "ic", 1, BINPACK) == ("b2",)
    assert copies_to_remove(hosts, "ic", 3, BINPACK) == ("b2", "b1", "a2")
