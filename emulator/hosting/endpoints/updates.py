"""Changes to a serving endpoint: UpdateEndpointWeightsAndCapacities (weights at once, capacity as a
task) and UpdateEndpoint (blue/green or rolling deployments through emulator.hosting.endpoints.rollout, for
which this class is the `FleetHost`)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from emulator.errors import ResourceInProgress, ValidationFailed, first_error
from emulator.hosting.endpoints import rollout
from emulator.hosting.endpoints.base import ServiceBase, failure_reason
from emulator.hosting.fleet.plan import VariantPlan
from emulator.hosting.fleet.variants import EndpointFleet, Instance, VariantFleet
from emulator.model import deployment as dp
from emulator.model import messages, quota
from emulator.model import serverless as serverless_rules
from emulator.model.deployment import DeploymentConfig
from emulator.model.resources import (
    Endpoint,
    EndpointConfig,
    EndpointStatus,
    ProductionVariant,
    ServerlessConfig,
    VariantStatus,
)


class FleetUpdates(ServiceBase):
    def _serving(self, name: str) -> tuple[Endpoint, EndpointFleet]:
        """The endpoint and its fleet, if it may be updated now (InService)."""
        endpoint = self.describe_endpoint(name)
        fleet = self._fleets.get(endpoint.name)
        if endpoint.status is not EndpointStatus.IN_SERVICE or fleet is None:
            raise ResourceInProgress(messages.in_progress(endpoint.arn))
        return endpoint, fleet

    def update_endpoint_weights_and_capacities(
        self,
        name: str,
        desired: tuple[tuple[str, float | None, int | None], ...],
        serverless: tuple[tuple[str, int | None, int | None], ...] = (),
    ) -> Endpoint:
        """Weights apply to routing at once; capacity changes run as a task (Updating -> InService).
        `serverless`: (variant, MaxConcurrency, ProvisionedConcurrency) of ServerlessUpdateConfigs."""
        endpoint, fleet = self._serving(name)
        # an asynchronous endpoint may scale to zero (its requests wait in the queue); [U] smlocal
        # keeps at least one instance of any other
        minimum = 0 if self.async_inference.is_async(endpoint.name) else 1
        updated_configs = self._serverless_updates(endpoint, fleet, serverless)
        for variant_name, _, count in desired:
            if variant_name not in fleet.variants:
                raise ValidationFailed(messages.unknown_variant_update(variant_name, endpoint.name))
            if count is not None and fleet.variants[variant_name].variant.serverless is not None:
                raise ValidationFailed(messages.serverless_instance_count(variant_name))
            if count is not None and count < minimum:
                raise ValidationFailed(
                    f"DesiredInstanceCount of variant {variant_name} must be at least 1 in smlocal."
                )
        counts = {n: c for n, _, c in desired if c is not None}
        self._check_instance_quota(
            endpoint.name,
            quota.instances(
                dataclasses.replace(
                    v.variant,
                    initial_instance_count=counts.get(n, v.summary().desired_instance_count),
                )
                for n, v in fleet.variants.items()
            ),
        )
        overrides = {name: (w, c) for name, w, c in endpoint.variant_overrides}
        # (the variant's desired count, the endpoint's count override) before this call
        previous = {
            n: (v.desired_count, overrides.get(n, (None, None))[1]) for n, v in fleet.variants.items()
        }
        for variant_name, weight, count in desired:
            variant = fleet.variants[variant_name]
            old_weight, old_count = overrides.get(variant_name, (None, None))
            if weight is not None:
                variant.desired_weight = weight
            if count is not None:
                variant.desired_count = count
            overrides[variant_name] = (
                old_weight if weight is None else weight,
                old_count if count is None else count,
            )
        self._apply_serverless(endpoint.name, fleet, updated_configs)
        self._quiesce(endpoint.name)
        updated = self._set_status(
            endpoint.name,
            EndpointStatus.UPDATING,
            variant_overrides=tuple((name, w, c) for name, (w, c) in sorted(overrides.items())),
        )
        self._spawn(endpoint.name, self._apply_capacities(endpoint.name, fleet, previous))
        return updated

    def _serverless_updates(
        self,
        endpoint: Endpoint,
        fleet: EndpointFleet,
        updates: tuple[tuple[str, int | None, int | None], ...],
    ) -> dict[str, ServerlessConfig]:
        """Each ServerlessUpdateConfig as the variant's new ServerlessConfig, checked (nothing is
        changed before every one passes)."""
        configs: dict[str, ServerlessConfig] = {}
        for variant_name, max_concurrency, provisioned in updates:
            variant = fleet.variants.get(variant_name)
            if variant is None:
                raise ValidationFailed(messages.unknown_variant_update(variant_name, endpoint.name))
            current = variant.variant.serverless
            if current is None:
                raise ValidationFailed(messages.serverless_update_not_serverless(variant_name))
            new = dataclasses.replace(
                current,
                max_concurrency=current.max_concurrency if max_concurrency is None else max_concurrency,
                provisioned_concurrency=current.provisioned_concurrency
                if provisioned is None
                else provisioned,
            )
            serverless_rules.check_config(variant_name, new)
            configs[variant_name] = new
        return configs

    def _apply_serverless(
        self, name: str, fleet: EndpointFleet, configs: dict[str, ServerlessConfig]
    ) -> None:
        """The variants serve with their new ServerlessConfig at once (a new ProvisionedConcurrency's
        container is started by the capacity task, _scale); the deployed copy of the endpoint config
        has them too, so that a restart keeps them (DescribeEndpointConfig keeps the config's own)."""
        if not configs:
            return
        for variant_name, config in configs.items():
            variant = fleet.variants[variant_name]
            variant.variant = dataclasses.replace(
                variant.variant,
                serverless=config,
                initial_instance_count=serverless_rules.warm_containers(config),
            )
            self.serverless.reconfigure(variant)
        deployed = self._deployed.get(name.lower())
        if deployed is not None:
            variants = tuple(
                fleet.variants[v.variant_name].variant if v.variant_name in configs else v
                for v in deployed.endpoint_config.production_variants
            )
            self._deployed[name.lower()] = dataclasses.replace(
                deployed,
                endpoint_config=dataclasses.replace(deployed.endpoint_config, production_variants=variants),
            )

    async def _apply_capacities(
        self, name: str, fleet: EndpointFleet, previous: dict[str, tuple[int | None, int | None]]
    ) -> None:
        """`previous`: each variant's (desired count, count override) before the call, restored if
        its scaling fails."""
        weights = {
            n: v.desired_weight
            for n, v in fleet.variants.items()
            if v.desired_weight is not None and v.desired_weight != v.weight
        }
        if weights:
            fleet.set_weights(weights)
            self.deployer.platform_log(name, f"weights now {weights}")
        failure: str | None = None
        # Each variant scales on its own: a failed scale-out of one does not cut another's short
        # (a cancelled scale-in would leave its victims out of rotation and never removed).
        variants = list(fleet.variants.values())
        results = await asyncio.gather(*(self._scale(name, v) for v in variants), return_exceptions=True)
        reverted: dict[str, int | None] = {}
        for variant, result in zip(variants, results, strict=True):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, BaseException):
                failure = failure or failure_reason(name, result)
                # The failed DesiredInstanceCount is not kept (nor re-launched by a restart): the
                # variant keeps the count it has.
                desired, override = previous.get(variant.variant.variant_name, (None, None))
                variant.desired_count = desired
                reverted[variant.variant.variant_name] = override
        if failure is not None:
            self.deployer.platform_log(name, f"capacity update failed: {failure}")
        endpoint = self.endpoints.get(name)
        overrides = endpoint.variant_overrides if endpoint is not None else ()
        if reverted:
            overrides = tuple(
                (n, w, reverted[n] if n in reverted else c) for n, w, c in overrides if n in fleet.variants
            )
        self._set_status(name, EndpointStatus.IN_SERVICE, failure, variant_overrides=overrides)
        self._watch(name)

    async def _scale(self, name: str, variant: VariantFleet) -> None:
        if variant.hosts is not None:  # instances for inference components: capacity, no container
            target = variant.desired_count
            if target is not None and target != len(variant.hosts):
                await self._set_hosts(name, variant, target)
            return
        if variant.variant.serverless is not None:  # capacity on demand: hosting/serverless/
            if variant.variant.serverless.provisioned_concurrency and not variant.instances:
                assert variant.plan is not None  # a new ProvisionedConcurrency: its warm container
                variant.add(await self.deployer.start_healthy(variant.plan, 1))
            return
        target = variant.desired_count
        if target is None:
            target = variant.variant.initial_instance_count
        current = len(variant.instances)
        if target == current:
            return
        now = self._clock()
        try:
            if target > current:
                assert variant.plan is not None
                self.deployer.platform_log(
                    name,
                    f"{variant.variant.variant_name}: scaling out from {current} to {target} instance(s)",
                )
                variant.statuses = (
                    VariantStatus("Updating", f"Scaling out desired instance count to {target}.", now),
                    VariantStatus("Creating", f"Launching {target - current} instance(s).", now),
                )
                new = await self.deployer.start_healthy(variant.plan, target - current)
                variant.add(new)
                return
            victims = variant.instances[target:]
            self.deployer.platform_log(
                name, f"{variant.variant.variant_name}: scaling in from {current} to {target} instance(s)"
            )
            variant.statuses = (VariantStatus("Deleting", f"Terminating {len(victims)} instance(s).", now),)
            variant.remove(victims)
            await self._retire(victims)
        finally:
            variant.statuses = ()

    async def _retire(self, instances: list[Instance]) -> None:
        """Instances already out of rotation: let their outstanding requests finish (bounded by the
        stop grace period; an asynchronous request's by its own InvocationTimeoutSeconds, up to an
        hour, plus the grace: docs/async-inference.md), then SIGTERM -> grace -> SIGKILL."""
        loop = asyncio.get_running_loop()
        grace = self.config.limits.stop_grace_s
        deadline = max(loop.time(), self.async_inference.drain_deadline(instances) or 0.0) + grace
        while any(i.outstanding for i in instances) and loop.time() < deadline:
            await asyncio.sleep(0.02)  # bounded polling: the count has no event of its own
        self.async_inference.retiring(instances)  # a call broken by the stop is no failure
        await self.deployer.stop_instances(instances)

    def update_endpoint(
        self,
        name: str,
        config_name: str,
        retain_all: bool = False,
        exclude_retained: frozenset[str] = frozenset(),
        deployment: DeploymentConfig | None = None,
        retain_deployment: bool = False,
    ) -> Endpoint:
        """Blue/green by default (all at once, or canary/linear traffic shifting), or rolling, per
        `deployment` (or the endpoint's last one with `retain_deployment`). `retain_all` keeps the
        current DesiredInstanceCount and DesiredWeight of same-named variants
        (RetainAllVariantProperties), except the property types in `exclude_retained`."""
        endpoint, fleet = self._serving(name)
        endpoint_config = self.describe_endpoint_config(config_name)
        # what the endpoint serves, as deployed (the config of that name may be gone or new)
        deployed = self._deployed.get(endpoint.name.lower())
        current = (
            deployed.endpoint_config
            if deployed is not None
            else self.endpoint_configs.get(endpoint.endpoint_config_name)
        )
        if (current is not None and current.hosts_components) or endpoint_config.hosts_components:
            raise ValidationFailed(messages.component_endpoint_update_not_yet())
        if (
            current is not None
            and not any(v.serverless is not None for v in current.production_variants)
            and any(v.serverless is not None for v in endpoint_config.production_variants)
        ):  # one-way: serverless -> instances is allowed (spec 6.4)
            raise ValidationFailed(messages.serverless_from_instances(endpoint.name, endpoint_config.name))
        for guard in self.update_guards:
            guard(endpoint.name, current, endpoint_config)
        if deployment is None and retain_deployment:
            deployment = endpoint.last_deployment_config
        if deployment is not None:
            dp.validate(deployment)
            if deployment.rolling is not None and set(fleet.variants) != {
                v.variant_name for v in endpoint_config.production_variants
            }:
                raise ValidationFailed(messages.rolling_needs_same_variants())
        overrides: tuple[tuple[str, float | None, int | None], ...] = ()
        if retain_all:
            summaries = {v.variant_name: v for v in (f.summary() for f in fleet.variants.values())}
            overrides = tuple(
                (
                    v.variant_name,
                    None if "DesiredWeight" in exclude_retained else summaries[v.variant_name].desired_weight,
                    None
                    if "DesiredInstanceCount" in exclude_retained
                    else summaries[v.variant_name].desired_instance_count,
                )
                for v in endpoint_config.production_variants
                if v.variant_name in summaries
            )
        retained = dataclasses.replace(endpoint, variant_overrides=overrides).effective_config(
            endpoint_config
        )
        self._check_instance_quota(endpoint.name, quota.instances(retained.production_variants))
        self._quiesce(endpoint.name)
        pending = rollout.pending_summary(retained, self._clock())
        updated = self._set_status(
            endpoint.name,
            EndpointStatus.UPDATING,
            pending_deployment=pending,
            last_deployment_config=deployment or endpoint.last_deployment_config,
        )
        self._spawn(endpoint.name, self._update(endpoint.name, retained, overrides, deployment))
        return updated

    async def _update(
        self,
        name: str,
        endpoint_config: EndpointConfig,
        overrides: tuple[tuple[str, float | None, int | None], ...],
        deployment: DeploymentConfig | None,
    ) -> None:
        """`endpoint_config` has the retained properties applied already; `overrides` are kept on
        the endpoint afterwards so that a restart re-launches them."""
        self.deployer.platform_log(name, f"updating to endpoint config {endpoint_config.name}")
        try:
            if deployment is not None and deployment.rolling is not None:
                outcome = await rollout.rolling(self, name, endpoint_config, deployment)
            else:
                outcome = await rollout.blue_green(self, name, endpoint_config, deployment)
        except Exception as exc:  # noqa: BLE001 - a plan or the new fleet failed; the old one serves
            error = first_error(exc) if isinstance(exc, ExceptionGroup) else exc
            reason = failure_reason(name, error)
            # [U] SageMaker reports a failed update as InService (old fleet) with a FailureReason.
            self.deployer.platform_log(name, f"update failed, old fleet keeps serving: {reason}")
            self._set_status(name, EndpointStatus.IN_SERVICE, reason, pending_deployment=None)
            self._watch(name)
            return
        if outcome.rollback_failed:
            reason = messages.rollback_failed(outcome.reason or "")
            self.deployer.platform_log(name, reason)
            self._set_status(name, EndpointStatus.UPDATE_ROLLBACK_FAILED, reason, pending_deployment=None)
            self._watch(name)  # the mixed fleet serves: its instances stay watched
            return
        if outcome.reason is not None:
            reason = messages.rolled_back(outcome.reason)
            self.deployer.platform_log(name, f"{reason}; the old fleet serves")
            self._set_status(name, EndpointStatus.IN_SERVICE, reason, pending_deployment=None)
            self._watch(name)
            return
        self._remember_deployed(name, endpoint_config)
        self._set_status(
            name,
            EndpointStatus.IN_SERVICE,
            endpoint_config_name=endpoint_config.name,
            variant_overrides=overrides,
            pending_deployment=None,
        )
        self._watch(name)
        self.deployer.platform_log(name, "endpoint InService (update complete)")

    async def launch(self, name: str, variant: ProductionVariant) -> VariantFleet:
        return await self._launch(name, variant, [])

    async def plan(self, name: str, variant: ProductionVariant) -> VariantPlan:
        return await self._plan(name, variant)

    def serving(self, name: str) -> EndpointFleet | None:
        return self._fleets.get(name)

    def route(self, name: str, fleet: EndpointFleet) -> None:
        self._fleets[name] = fleet

    async def retire(self, instances: list[Instance]) -> None:
        await self._retire(instances)

    def deployment_stage(self, name: str, status: str, message: str) -> None:
        """The pending deployment's variants show the stage (ActivatingTraffic, Baking, ...)."""
        endpoint = self.endpoints.get(name)
        if endpoint is None or endpoint.pending_deployment is None:
            return
        stage = (VariantStatus(status, message, self._clock()),)
        pending = endpoint.pending_deployment
        variants = tuple(dataclasses.replace(v, statuses=stage) for v in pending.production_variants)
        self.endpoints.put(
            dataclasses.replace(
                endpoint, pending_deployment=dataclasses.replace(pending, production_variants=variants)
            )
        )

    def rolling_back(self, name: str) -> None:
        endpoint = self.endpoints.get(name)
        if endpoint is not None:
            self._set_status(
                name, EndpointStatus.ROLLING_BACK, pending_deployment=endpoint.pending_deployment
            )

    def firing(self, alarms: Sequence[str]) -> list[str]:
        return list(self.alarm_states(alarms)) if self.alarm_states is not None else []
