"""Acting on a scaling decision: the variant's (or inference component's) capacity and range, the
cooldowns, and the scaling activity that changes the capacity through UpdateEndpointWeightsAndCapacities
(a component's through UpdateInferenceComponentRuntimeConfig), one at a time per target, recorded as
it starts and when it ends (shared/spec/hosting-contract.md §9).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable
from datetime import datetime

from emulator.config import ServerConfig
from emulator.errors import ResourceNotFound, SmlocalError, ValidationFailed
from emulator.hosting.endpoints.service import HostingService
from emulator.hosting.monitoring.store import Metrics
from emulator.hosting.scaling.registry import resource_of, variant_of
from emulator.hosting.scaling.target_state import TargetState, TargetStates
from emulator.model import messages
from emulator.model import scaling as sc
from emulator.model.components import ComponentStatus, InferenceComponent
from emulator.model.resources import EndpointStatus, VariantSummary

#: How often a component's scaling activity looks whether the component left Updating (wall seconds).
COMPONENT_POLL_S = 0.1


class Actuator:
    def __init__(
        self,
        config: ServerConfig,
        service: HostingService,
        metrics: Metrics,
        states: TargetStates,
        wall: Callable[[], datetime],
        monotonic: Callable[[], float],
    ) -> None:
        self.config = config
        self.service = service
        self.metrics = metrics
        self.states = states
        self._wall = wall
        self._monotonic = monotonic

    def live(
        self, key: sc.TargetKey, target: sc.ScalableTarget
    ) -> tuple[sc.ScalableRef, TargetState, int] | None:
        """The target's variant (or component), state and capacity when it may scale now (no activity
        running, the endpoint or component InService, the capacity within range), else None."""
        state = self.states.of(key)
        if state.action is not None and not state.action.done():
            return None  # one scaling activity at a time per target
        ref = resource_of(key)
        try:
            current = self.capacity(key)
        except (ResourceNotFound, ValidationFailed):
            return None  # not InService now (an update or a deletion under way)
        if self.enforce_range(target, ref, current):
            return None
        return ref, state, current

    def cooling(self, state: TargetState, direction: str) -> bool:
        now = self._monotonic()
        if direction == "out":
            return state.scale_out_at is not None and now < state.scale_out_at + state.scale_out_cooldown_s
        return state.scale_in_at is not None and now < state.scale_in_at + state.scale_in_cooldown_s

    def decide(
        self,
        target: sc.ScalableTarget,
        ref: sc.ScalableRef,
        state: TargetState,
        current: int,
        wanted: int,
        cause: str,
        cooldown: int,
    ) -> None:
        """Scale to `wanted` within the target's range, or record why not (once per reason)."""
        capacity = self._bounded(target, wanted)
        if capacity == current:
            reason = sc.not_scaled(wanted, current, target)
            if reason is not None and state.last_not_scaled != reason.code:
                state.last_not_scaled = reason.code
                self.states.record_not_scaled(target.key, wanted, cause, reason)
            return
        direction = "out" if capacity > current else "in"
        if direction == "out":
            state.scale_out_from = current
        self._act(target.key, ref, capacity, cause, direction, self.config.real_seconds(cooldown))

    def _bounded(self, target: sc.ScalableTarget, capacity: int) -> int:
        # an asynchronous endpoint's variant may go to zero (MinCapacity 0: its requests wait in the
        # queue); [U] smlocal keeps at least one instance of any other
        # (a ProvisionedConcurrency is 1 at least); an inference component's floor is MinCapacity
        # (0 allowed: scale to zero)
        if target.key.dimension == sc.COMPONENT_DIMENSION:
            return sc.clamp(capacity, target)
        ref = sc.parse_resource_id(target.key.resource_id)
        floor = 1
        if target.key.dimension == sc.VARIANT_DIMENSION and ref is not None:
            floor = 0 if self.service.async_inference.is_async(ref.endpoint) else 1
        return max(sc.clamp(capacity, target), floor)

    def capacity(self, key: sc.TargetKey, registering: bool = False) -> int:
        """The variant's desired instance count (or, in sagemaker:variant:DesiredProvisionedConcurrency,
        its ProvisionedConcurrency, or an inference component's desired copy count); ValidationFailed
        unless the endpoint (the component) is InService."""
        ref = resource_of(key)
        if isinstance(ref, sc.ComponentRef):
            return self._component(ref, registering).desired_copies
        variant = self._variant(ref, registering, key.dimension)
        if key.dimension == sc.PROVISIONED_CONCURRENCY_DIMENSION:
            assert variant.serverless is not None and variant.serverless.provisioned_concurrency is not None
            return variant.serverless.provisioned_concurrency
        count = variant.desired_instance_count
        return variant.current_instance_count if count is None else count

    def max_concurrency(self, key: sc.TargetKey) -> int:
        """A serverless variant's MaxConcurrency: the most a ProvisionedConcurrency may be."""
        variant = self._variant(variant_of(key), registering=True, dimension=key.dimension)
        assert variant.serverless is not None
        return variant.serverless.max_concurrency

    def _variant(
        self, ref: sc.VariantRef, registering: bool, dimension: str = sc.VARIANT_DIMENSION
    ) -> VariantSummary:
        try:
            endpoint = self.service.describe_endpoint(ref.endpoint)
        except ResourceNotFound as exc:
            raise ValidationFailed(messages.scaling_endpoint_not_found(ref.endpoint)) from exc
        if endpoint.name != ref.endpoint:
            raise ValidationFailed(messages.scaling_endpoint_not_found(ref.endpoint))
        variant = next((v for v in endpoint.production_variants if v.variant_name == ref.variant), None)
        if variant is None:
            raise ValidationFailed(messages.scaling_variant_not_found(ref.variant, ref.endpoint))
        if dimension == sc.PROVISIONED_CONCURRENCY_DIMENSION:
            if variant.serverless is None or variant.serverless.provisioned_concurrency is None:
                raise ValidationFailed(messages.not_provisioned_scalable(ref.variant, ref.endpoint))
        elif variant.serverless is not None:  # no DesiredInstanceCount to scale (docs/serverless.md)
            raise ValidationFailed(messages.serverless_not_instance_scalable(ref.variant, ref.endpoint))
        if endpoint.status is not EndpointStatus.IN_SERVICE:
            if registering:
                raise ValidationFailed(messages.endpoint_not_in_service(ref.endpoint, endpoint.status.value))
            raise ValidationFailed("not InService")
        return variant

    def _component(self, ref: sc.ComponentRef, registering: bool) -> InferenceComponent:
        """The component a target names, InService ([U] texts when registering)."""
        try:
            record = self.service.describe_inference_component(ref.component)
        except ValidationFailed as exc:
            raise ValidationFailed(messages.scaling_component_not_found(ref.component)) from exc
        if record.status is not ComponentStatus.IN_SERVICE:
            if registering:
                raise ValidationFailed(messages.component_not_in_service(ref.component, record.status.value))
            raise ValidationFailed("not InService")
        return record

    def _log_endpoint(self, ref: sc.ScalableRef) -> str | None:
        """The endpoint whose platform log records a scaling activity (a component's host endpoint)."""
        if isinstance(ref, sc.VariantRef):
            return ref.endpoint
        record = self.service.inference_components.get(ref.component)
        return None if record is None else record.endpoint_name

    def enforce_range(self, target: sc.ScalableTarget, ref: sc.ScalableRef, current: int) -> bool:
        """After RegisterScalableTarget, a capacity outside [MinCapacity, MaxCapacity] is brought
        inside at once (or as soon as the running activity ends). Manual changes later are left
        alone until a policy acts [U]."""
        state = self.states.of(target.key)
        if not state.range_changed or (state.action is not None and not state.action.done()):
            return False
        state.range_changed = False
        capacity = self._bounded(target, current)
        if capacity == current:
            return False
        if capacity > current:
            cause = f"minimum capacity was set to {target.min_capacity}"
        else:
            cause = f"maximum capacity was set to {target.max_capacity}"
        self._act(target.key, ref, capacity, cause, None, 0.0)
        return True

    # ------------------------------------------------------------------ scaling activities

    def _act(
        self,
        key: sc.TargetKey,
        ref: sc.ScalableRef,
        capacity: int,
        cause: str,
        direction: str | None,
        cooldown_s: float,
    ) -> None:
        state = self.states.of(key)
        state.last_not_scaled = None
        activity = sc.ScalingActivity(
            activity_id=str(uuid.uuid4()),
            key=key,
            description=f"Setting desired {sc.capacity_noun(key.dimension)} to {capacity}.",
            cause=cause,
            start_time=self._wall(),
            status=sc.ActivityStatus.IN_PROGRESS,
        )
        self.states.append(activity)
        log_endpoint = self._log_endpoint(ref)
        if log_endpoint is not None:
            subject = ref.variant if isinstance(ref, sc.VariantRef) else ref.component
            self.service.deployer.platform_log(
                log_endpoint, f"autoscaling: {subject}: {activity.description} ({cause})"
            )
        state.action = asyncio.ensure_future(self._scale(activity, ref, capacity, direction, cooldown_s))

    async def _scale(
        self,
        activity: sc.ScalingActivity,
        ref: sc.ScalableRef,
        capacity: int,
        direction: str | None,
        cooldown_s: float,
    ) -> None:
        state = self.states.of(activity.key)
        failure: str | None = None
        provisioned = activity.key.dimension == sc.PROVISIONED_CONCURRENCY_DIMENSION
        noun = sc.capacity_noun(activity.key.dimension)
        try:
            if isinstance(ref, sc.ComponentRef):
                failure = await self._scale_component(ref, capacity)
            elif provisioned:  # ServerlessUpdateConfig.ProvisionedConcurrency, as AWS scales it
                self.service.update_endpoint_weights_and_capacities(
                    ref.endpoint, (), serverless=((ref.variant, None, capacity),)
                )
            else:
                self.service.update_endpoint_weights_and_capacities(
                    ref.endpoint, ((ref.variant, None, capacity),)
                )
            if isinstance(ref, sc.VariantRef):
                await self.service.settled(ref.endpoint)
                endpoint = self.service.describe_endpoint(ref.endpoint)
                failure = endpoint.failure_reason
        except SmlocalError as exc:
            failure = exc.message
        if failure is None:
            status = sc.ActivityStatus.SUCCESSFUL
            message = (
                f"Successfully set desired {noun} to {capacity}. Change successfully fulfilled by sagemaker."
            )
            if isinstance(ref, sc.VariantRef) and not provisioned:
                self.metrics.set_instances(ref.endpoint, ref.variant, capacity)
        else:
            status = sc.ActivityStatus.FAILED
            message = f"Failed to set desired {noun} to {capacity}. Reason: {failure}"
        self.states.replace(
            dataclasses.replace(activity, status=status, status_message=message, end_time=self._wall())
        )
        now = self._monotonic()
        if direction == "out":
            state.scale_out_at, state.scale_out_cooldown_s = now, cooldown_s
            state.scale_in_at = None  # a scale-out ends the scale-in cooldown
        elif direction == "in":
            state.scale_in_at, state.scale_in_cooldown_s = now, cooldown_s

    async def _scale_component(self, ref: sc.ComponentRef, capacity: int) -> str | None:
        """UpdateInferenceComponentRuntimeConfig, then wait until the component leaves Updating (its
        copies placed and serving, or removed): its failure reason, or None when it is InService.
        Short sleeps: the component's task signals nothing the autoscaler can await."""
        self.service.update_inference_component_runtime_config(ref.component, capacity)
        while True:
            record = self.service.describe_inference_component(ref.component)
            if record.status is ComponentStatus.IN_SERVICE:
                return None
            if record.status is not ComponentStatus.UPDATING:
                return record.failure_reason or f"the inference component is {record.status.value}"
            await asyncio.sleep(COMPONENT_POLL_S)
