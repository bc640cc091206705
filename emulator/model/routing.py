"""Routing decisions, pure: which variant, then which instance of it, serves a request."""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Sequence
from typing import Protocol, TypeVar


class WeightedChoice:
    """Weighted random choice over variants: share = w / sum(w) (SageMaker's traffic split).

    Built once per routing change, not per request. Zero-weight entries are reachable only by
    TargetVariant; if every weight is zero, traffic is spread evenly (our choice, [U]).
    """

    def __init__(
        self, names: Sequence[str], weights: Sequence[float], rng: random.Random | None = None
    ) -> None:
        if not names:
            raise ValueError("no variants to route to")
        total = sum(weights)
        if total <= 0:
            weights = [1.0] * len(names)
            total = float(len(names))
        self._names = tuple(names)
        self._cumulative = list(itertools.accumulate(weights))
        self._total = total
        self._rng = rng or random.Random()

    def choose(self) -> str:
        if len(self._names) == 1:
            return self._names[0]
        point = self._rng.random() * self._total
        index = bisect.bisect_right(self._cumulative, point)
        return self._names[min(index, len(self._names) - 1)]


class Routable(Protocol):
    @property
    def outstanding(self) -> int: ...


R = TypeVar("R", bound=Routable)


class InstancePicker:
    """Least outstanding requests, ties broken round-robin; or uniform random."""

    def __init__(
        self, strategy: str = "LEAST_OUTSTANDING_REQUESTS", rng: random.Random | None = None
    ) -> None:
        self._random = strategy == "RANDOM"
        self._rng = rng or random.Random()
        self._next = 0

    def pick(self, instances: Sequence[R]) -> R:
        n = len(instances)
        if n == 1:
            return instances[0]
        if n == 0:
            raise LookupError("no instance in rotation")
        if self._random:
            return instances[self._rng.randrange(n)]
        start = self._next % n
        self._next += 1
        best = instances[start]
        for offset in range(1, n):
            candidate = instances[(start + offset) % n]
            if candidate.outstanding < best.outstanding:
                best = candidate
        return best
