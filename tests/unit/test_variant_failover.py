"""A variant whose every instance is out of rotation (emulator/hosting/fleet/variants.py,
EndpointFleet.choose): requests chosen by weight go to the variants that have instances; found by
the lifecycle suite (two variants of one instance, one killed: 45 of 136 requests answered 424 "no
healthy instance is in rotation" while the other variant could serve)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from multidict import CIMultiDict

from emulator.hosting.endpoints.invoke import Invocations, NoInstanceInRotation
from emulator.hosting.fleet.variants import EndpointFleet, VariantFleet
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


class Routed:
    """The two methods Invocations._call_routed uses: `_call` answers from a variant unless its every
    instance refused the request (NoInstanceInRotation), `_variant` is the variant chosen now."""

    def __init__(self, refused: set[str], now: VariantFleet) -> None:
        self.refused, self.now = refused, now
        self.called: list[str] = []

    async def _call(self, endpoint: str, variant: VariantFleet, *_: object) -> str:
        name = variant.variant.variant_name
        self.called.append(name)
        if name in self.refused:
            raise NoInstanceInRotation("no healthy instance is in rotation", 0, "", "arn")
        return f"answer of {name}"

    async def _variant(
        self, endpoint: str, target_variant: str | None, target_container: str | None
    ) -> VariantFleet:
        return self.now


def _routed(routed: Routed, variant: VariantFleet, target_variant: str | None = None) -> tuple[object, str]:
    call = Invocations._call_routed(routed, "e", variant, b"", CIMultiDict(), target_variant, None)  # type: ignore[arg-type]
    reply, answered = asyncio.run(call)
    return reply, answered.variant.variant_name


def test_a_request_whose_variant_lost_its_last_instance_on_the_way_goes_once_to_the_variant_chosen_now() -> (
    None
):
    # Routed by weight to A; A's only instance refused it (killed, its exit not yet seen by smlocal)
    # and went out of rotation: the request answered 424 "no healthy instance is in rotation" (1 of
    # 261 in two-variants-instance-killed) while B could serve it.
    a, b = variant("A", 1.0), variant("B", 1.0)
    routed = Routed({"A"}, now=b)
    assert _routed(routed, a) == ("answer of B", "B")
    assert routed.called == ["A", "B"]


def test_no_second_route_for_a_target_variant_the_same_variant_or_a_second_refusal() -> None:
    a, b = variant("A", 1.0), variant("B", 1.0)
    for routed, target in ((Routed({"A"}, now=b), "A"), (Routed({"A"}, now=a), None)):
        with pytest.raises(NoInstanceInRotation):
            _routed(routed, a, target)  # TargetVariant: that variant's answer; or nowhere else to go
        assert routed.called == ["A"]
    b.remove(b.instances)
    routed = Routed({"A"}, now=b)
    with pytest.raises(NoInstanceInRotation):
        _routed(routed, a)  # the variant chosen now has no instance either
    assert routed.called == ["A"]
    b = variant("B", 1.0)
    routed = Routed({"A", "B"}, now=b)
    with pytest.raises(NoInstanceInRotation):
        _routed(routed, a)  # once: B refused too
    assert routed.called == ["A", "B"]
