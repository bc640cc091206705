"""emulator.model.routing: the variant split and the instance pick, with seeded randomness."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import pytest

from emulator.model.routing import InstancePicker, WeightedChoice

DRAWS = 30_000


@dataclass
class Inst:
    name: str
    outstanding: int = 0


def shares(choice: WeightedChoice, draws: int = DRAWS) -> dict[str, float]:
    counts = Counter(choice.choose() for _ in range(draws))
    return {name: n / draws for name, n in counts.items()}


def test_weights_two_to_one_split_within_two_percent() -> None:
    got = shares(WeightedChoice(["a", "b"], [2.0, 1.0], rng=random.Random(7)))
    assert got["a"] == pytest.approx(2 / 3, abs=0.02)
    assert got["b"] == pytest.approx(1 / 3, abs=0.02)


def test_three_uneven_weights() -> None:
    got = shares(WeightedChoice(["a", "b", "c"], [0.5, 0.3, 0.2], rng=random.Random(11)))
    assert got["a"] == pytest.approx(0.5, abs=0.02)
    assert got["b"] == pytest.approx(0.3, abs=0.02)
    assert got["c"] == pytest.approx(0.2, abs=0.02)


def test_zero_weight_variant_gets_no_traffic_when_others_have_weight() -> None:
    got = shares(WeightedChoice(["a", "zero", "b"], [1.0, 0.0, 1.0], rng=random.Random(3)), 5_000)
    assert "zero" not in got
    assert got["a"] == pytest.approx(0.5, abs=0.03)


def test_single_variant_always_chosen_without_using_the_rng() -> None:
    class NoRandom(random.Random):
        def random(self) -> float:
            raise AssertionError("rng used for a single variant")

    choice = WeightedChoice(["only"], [0.0], rng=NoRandom())
    assert {choice.choose() for _ in range(100)} == {"only"}


def test_all_zero_weights_spread_evenly() -> None:
    got = shares(WeightedChoice(["a", "b", "c"], [0.0, 0.0, 0.0], rng=random.Random(5)))
    assert set(got) == {"a", "b", "c"}
    for share in got.values():
        assert share == pytest.approx(1 / 3, abs=0.02)


def test_no_variants_is_an_error() -> None:
    with pytest.raises(ValueError):
        WeightedChoice([], [])


def test_seeded_choice_is_reproducible() -> None:
    a = WeightedChoice(["a", "b"], [1, 3], rng=random.Random(42))
    b = WeightedChoice(["a", "b"], [1, 3], rng=random.Random(42))
    assert [a.choose() for _ in range(200)] == [b.choose() for _ in range(200)]


# ------------------------------------------------------------------------------ InstancePicker


def test_least_outstanding_picks_the_least_loaded() -> None:
    instances = [Inst("a", 3), Inst("b", 1), Inst("c", 2)]
    picker = InstancePicker()
    for _ in range(6):  # whatever the round-robin start, the least loaded wins
        assert picker.pick(instances).name == "b"


def test_least_outstanding_follows_changing_load() -> None:
    a, b = Inst("a", 0), Inst("b", 0)
    picker = InstancePicker()
    first = picker.pick([a, b])
    first.outstanding += 1
    second = picker.pick([a, b])
    assert second is not first
    second.outstanding += 1
    first.outstanding -= 1
    assert picker.pick([a, b]) is first


def test_ties_rotate_round_robin() -> None:
    instances = [Inst("a"), Inst("b"), Inst("c")]
    picker = InstancePicker("LEAST_OUTSTANDING_REQUESTS")
    picked = [picker.pick(instances).name for _ in range(9)]
    assert picked == ["a", "b", "c"] * 3


def test_single_instance_is_returned() -> None:
    only = Inst("only", 99)
    assert InstancePicker().pick([only]) is only
    assert InstancePicker("RANDOM").pick([only]) is only


def test_random_strategy_uses_the_rng() -> None:
    instances = [Inst("a", 0), Inst("b", 100), Inst("c", 100)]
    picker = InstancePicker("RANDOM", rng=random.Random(1))
    expected_rng = random.Random(1)
    picked = [picker.pick(instances).name for _ in range(300)]
    assert picked == [instances[expected_rng.randrange(3)].name for _ in range(300)]
    # load is ignored: the busy instances are picked too, about evenly
    counts = Counter(picked)
    assert set(counts) == {"a", "b", "c"}
    assert all(60 <= n <= 140 for n in counts.values())


def test_empty_list_raises_lookup_error() -> None:
    with pytest.raises(LookupError):
        InstancePicker().pick([])
    with pytest.raises(LookupError):
        InstancePicker("RANDOM").pick([])
