"""The account's instance quotas, counted over the hosting service's endpoints (the rules and the text:
emulator/model/quota.py). CreateEndpoint, UpdateEndpoint and UpdateEndpointWeightsAndCapacities (and
so autoscaling, which calls it) check them before they accept a change: an endpoint's instances after
the change, less what it holds now, must fit beside every other endpoint's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from emulator.hosting.endpoints.base import ServiceBase
from emulator.model import quota
from emulator.model.resources import Endpoint, EndpointStatus

#: Endpoints that hold no instances (their containers are stopped or being stopped).
_RELEASED = (EndpointStatus.DELETING, EndpointStatus.FAILED)


class InstanceQuotas(ServiceBase):
    def _instance_quota(self) -> quota.InstanceQuota:
        return quota.InstanceQuota(self.config.instance_quota, self.config.instance_quota_by_type)

    def _held(self, endpoint: Endpoint) -> Counter[str]:
        """The instances an endpoint holds or is being given, by instance type: its deployed config
        with its count overrides; while an update runs, the larger of the old and new fleets."""
        if endpoint.status in _RELEASED:
            return Counter()
        deployed = self._deployed.get(endpoint.name.lower())
        config = (
            deployed.endpoint_config if deployed else self.endpoint_configs.get(endpoint.endpoint_config_name)
        )
        held = (
            Counter()
            if config is None
            else quota.instances(endpoint.effective_config(config).production_variants)
        )
        pending = endpoint.pending_deployment
        if pending is not None:
            new: Counter[str] = Counter()
            for v in pending.production_variants:
                if v.instance_type and v.serverless is None:
                    new[v.instance_type] += v.desired_instance_count
            held |= new
        return held

    def _check_instance_quota(self, name: str | None, after: Mapping[str, int]) -> None:
        """Refuse (ResourceLimitExceeded) a change after which endpoint `name` (None: a new one) would
        hold `after` instances by type, when that passes a type's limit."""
        utilization: Counter[str] = Counter()
        own: Counter[str] = Counter()
        for endpoint in list(self.endpoints):
            held = self._held(endpoint)
            utilization += held
            if name is not None and endpoint.name.lower() == name.lower():
                own = held
        delta = Counter(after)
        delta.subtract(own)
        self._instance_quota().check(utilization, delta)
