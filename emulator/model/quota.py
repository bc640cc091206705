"""The account's instance quotas for endpoint usage, pure: SageMaker's per-instance-type limits
("ml.m5.xlarge for endpoint usage"), checked before a change that adds instances.

smlocal's choices [U] (docs/api-coverage.md, "Instance quotas"): every instance type has the same
limit (`smlocal serve --instance-quota N`, DEFAULT_INSTANCE_QUOTA) unless given one of its own
(`--instance-quota TYPE=N`); an endpoint counts the instances of its steady state (its deployed config
with UpdateEndpointWeightsAndCapacities' and autoscaling's counts; while an update runs, the larger
of its old and new fleets per type), not the transient second fleet of a blue/green update;
serverless variants hold no instances; a multi-container instance is one instance.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from emulator.errors import ResourceLimitExceeded
from emulator.model import messages
from emulator.model.resources import ProductionVariant


@dataclass(frozen=True)
class InstanceQuota:
    """The limit of each instance type: `default`, or its own in `per_type`."""

    default: int
    per_type: tuple[tuple[str, int], ...] = ()

    def limit(self, instance_type: str) -> int:
        return dict(self.per_type).get(instance_type, self.default)

    def check(self, utilization: Mapping[str, int], delta: Mapping[str, int]) -> None:
        """Raise ResourceLimitExceeded (SageMaker's text) for the first instance type, by name, whose
        utilization plus the positive delta would pass its limit."""
        for instance_type in sorted(delta):
            more = delta[instance_type]
            current = utilization.get(instance_type, 0)
            limit = self.limit(instance_type)
            if more > 0 and current + more > limit:
                text = messages.instance_limit_exceeded(instance_type, limit, current, more)
                raise ResourceLimitExceeded(text)


def instances(variants: Iterable[ProductionVariant]) -> Counter[str]:
    """Instances by instance type of these variants (serverless ones hold none)."""
    counts: Counter[str] = Counter()
    for v in variants:
        if v.serverless is None and v.instance_type:
            counts[v.instance_type] += v.initial_instance_count
    return counts
