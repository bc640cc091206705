"""A variant whose every instance is out of rotation (emulator/hosting/fleet/variants.py,
EndpointFleet.choose): requests chosen by weight go to the variants that have instances; found by
the lifecycle suite (two variants of one instance, one killed: 45 of 136 requests answered 424 "no
healthy instance is in rotation" while the other variant could serve)."""

from __future__ import annotations

from collections import Counter

from emulator.hosting.fleet.variants import EndpointFleet
from tests.unit.test_fleet_routing import variant


def test_a_variant_without_instances_hands_its_share_to_the_others() -> None:
    a, b, c = variant("A", 1.0), variant("B", 1.0), variant("C", 3.0)
    fleet = EndpointFleet([a, b, c])
    a.remove(a.instances)  # its only instance died and is being replaced
    got = Counter(fleet.choose(None).variant.variant_name for _ in range(4000))
    assert set(got) == {"B", "C"}
    assert abs(got["C"] / 4000 - 0.75) < 0.04  # by the serving variants' weights


def test_a_target_variant_and_a_lone_variant_are_kept() -> None:
    a, b = variant("A", 1.0), variant("B", 1.0)
    fleet = EndpointFleet([a, b])
    a.remove(a.instances)
    assert fleet.choose("A") is a  # TargetVariant: that variant's answer, whatever it is
    lone = variant("L", 1.0)
    lone.remove(lone.instances)
    assert EndpointFleet([lone]).choose(None) is lone


def test_when_no_variant_has_instances_the_weighted_choice_stands() -> None:
    a, b = variant("A", 1.0), variant("B", 0.0)
    fleet = EndpointFleet([a, b])
    a.remove(a.instances)
    b.remove(b.instances)
    assert {fleet.choose(None).variant.variant_name for _ in range(200)} == {"A"}
