"""The six inference-component operations of the control plane: their checks and the component
records; the copies themselves are component_copies.py's (one converging task per component).

Create, UpdateRuntimeConfig and Update answer at once, as SageMaker's do, and the component's task
does the work (Creating or Updating -> InService, or Failed). Delete takes the copies out of rotation
at once and the record goes when they have stopped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil

from emulator.errors import (
    ResourceAlreadyExists,
    ResourceInProgress,
    ResourceNotFound,
    ValidationFailed,
)
from emulator.hosting.endpoints.component_adapters import ComponentAdapters
from emulator.hosting.endpoints.component_live import LiveComponent
from emulator.model import messages
from emulator.model.components import (
    ComponentDeploymentConfig,
    ComponentSpec,
    ComponentStatus,
    InferenceComponent,
)
from emulator.model.placement import Capacity, Need, never_fits
from emulator.model.resources import EndpointStatus

#: The statuses in which a component may not be changed (SageMaker answers "in progress").
_BUSY = (ComponentStatus.CREATING, ComponentStatus.UPDATING, ComponentStatus.DELETING)


class ComponentOperations(ComponentAdapters):
    def create_inference_component(
        self,
        name: str,
        endpoint_name: str,
        variant_name: str,
        spec: ComponentSpec,
        copies: int,
        tags: tuple[tuple[str, str], ...] = (),
    ) -> InferenceComponent:
        arn = self.account.inference_component_arn(name)
        if name in self.inference_components:
            raise ResourceAlreadyExists(messages.already_exists("inference-component", arn))
        endpoint = self.describe_endpoint(endpoint_name)
        if spec.base_component_name is not None:  # no variant or copies of its own: its base's
            return self._create_adapter(name, endpoint.name, spec, tags)
        fleet = self._fleets.get(endpoint.name)
        if endpoint.status is not EndpointStatus.IN_SERVICE or fleet is None:
            if endpoint.status in (EndpointStatus.CREATING, EndpointStatus.UPDATING):
                raise ResourceInProgress(messages.in_progress(endpoint.arn))
            raise ValidationFailed(messages.endpoint_not_in_service_for_component(endpoint.name))
        variant = fleet.variants.get(variant_name)
        if variant is None:
            raise ValidationFailed(messages.component_unknown_variant(variant_name, endpoint.name))
        if variant.hosts is None:
            raise ValidationFailed(messages.components_not_supported())
        if copies < 1:
            raise ValidationFailed(messages.component_copy_count_at_create())
        self._check_spec(name, spec, variant.variant.instance_type)
        now = self._clock()
        record = InferenceComponent(
            name=name,
            arn=arn,
            endpoint_name=endpoint.name,
            variant_name=variant.variant.variant_name,
            spec=spec,
            desired_copies=copies,
            creation_time=now,
            last_modified_time=now,
            tags=tags,
        )
        self.inference_components.put(record)
        self._persist_components()
        self.deployer.platform_log(endpoint.name, f"{name}: creating {copies} copies")
        self._start_component(record)
        return record

    def _check_spec(self, name: str, spec: ComponentSpec, instance_type: str | None) -> None:
        """What is refused at once (an adapter's specification is component_adapters.py's): a model
        that does not exist or cannot be a component, a copy bigger than a whole instance."""
        if spec.base_component_name is not None:  # an update cannot make a component an adapter
            raise ValidationFailed(messages.component_update_to_adapter(name))
        if spec.model_name is not None:
            model = self.models.get(spec.model_name)
            if model is None:
                raise ResourceNotFound(messages.not_found("model", self.account.model_arn(spec.model_name)))
            if model.multi_container or model.multi_model:
                raise ValidationFailed(messages.component_model_not_supported(model.name))
        if spec.compute is None:
            raise ValidationFailed(messages.component_needs_compute(name))
        capacity = Capacity.of_type(instance_type) if instance_type else None
        if capacity is not None:
            why = never_fits(capacity, Need.of(spec.compute))
            if why is not None:
                raise ValidationFailed(messages.component_copy_never_fits(name, why))

    def describe_inference_component(self, name: str) -> InferenceComponent:
        record = self.inference_components.get(name)
        if record is None:
            raise ValidationFailed(messages.component_not_found(self.account.inference_component_arn(name)))
        return record

    def inference_components_list(self) -> list[InferenceComponent]:
        return list(self.inference_components)

    def inference_components_of(self, endpoint_name: str) -> list[InferenceComponent]:
        return [c for c in self.inference_components if c.endpoint_name == endpoint_name]

    def _changeable(self, name: str) -> InferenceComponent:
        record = self.describe_inference_component(name)
        if record.status in _BUSY:
            raise ResourceInProgress(messages.component_in_progress(record.arn, record.status.value))
        if record.status is ComponentStatus.FAILED or record.name.lower() not in self._live_components:
            raise ValidationFailed(messages.component_not_serving(record.name, record.status.value))
        return record

    def update_inference_component_runtime_config(self, name: str, copies: int) -> InferenceComponent:
        """DesiredCopyCount: copies added (placed, started) or removed (drained, stopped) by the
        component's task; 0 allowed (no copy serves: scale to zero)."""
        record = self._changeable(name)
        if copies < 0:
            raise ValidationFailed(messages.component_copy_count_negative())
        updated = dataclasses.replace(
            record,
            desired_copies=copies,
            status=ComponentStatus.UPDATING,
            failure_reason=None,
            last_modified_time=self._clock(),
        )
        self.inference_components.put(updated)
        self._persist_components()
        self._wake_component(record.name)
        return updated

    def update_inference_component(
        self,
        name: str,
        spec: ComponentSpec | None = None,
        copies: int | None = None,
        deployment: ComponentDeploymentConfig | None = None,
    ) -> InferenceComponent:
        """A new specification rolled out copy batch by copy batch (component_copies._roll_out),
        and/or a new copy count."""
        record = self._changeable(name)
        if spec is not None:
            variant = self._fleets[record.endpoint_name].variants[record.variant_name]
            self._check_spec(record.name, spec, variant.variant.instance_type)
        if copies is not None and copies < 1:
            raise ValidationFailed(messages.component_copy_count_at_create())
        updated = dataclasses.replace(
            record,
            spec=spec or record.spec,
            desired_copies=record.desired_copies if copies is None else copies,
            status=ComponentStatus.UPDATING,
            failure_reason=None,
            last_modified_time=self._clock(),
            last_deployment_config=deployment or record.last_deployment_config,
        )
        self.inference_components.put(updated)
        self._persist_components()
        self._wake_component(record.name)
        return updated

    def delete_inference_component(self, name: str) -> None:
        record = self.describe_inference_component(name)
        if record.status is ComponentStatus.DELETING:
            raise ResourceInProgress(messages.component_in_progress(record.arn, record.status.value))
        if record.spec.adapter:
            self._delete_adapter(record)
            return
        adapters = self._adapters_of(record.name)
        if adapters:
            names = ", ".join(a.name for a in adapters)
            raise ValidationFailed(messages.component_has_adapters(record.name, names))
        self.inference_components.put(
            dataclasses.replace(record, status=ComponentStatus.DELETING, last_modified_time=self._clock())
        )
        self._persist_components()
        for listener in self.component_deletion_listeners:
            listener(record.name)
        live = self._live_components.pop(record.name.lower(), None)
        task = asyncio.ensure_future(self._delete_component(record.name, live))
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def _delete_component(self, name: str, live: LiveComponent | None) -> None:
        if live is not None:
            live.fleet.instances = []  # out of rotation at once
            if live.task is not None:
                live.task.cancel()
                await asyncio.gather(live.task, return_exceptions=True)
            copies = list(live.copies)
            for copy in copies:
                self._forget_copy(live, copy)
            await self._retire(copies)
            self._wake_endpoint_components(live.endpoint_name)
            variant = self._host_variant(live)
            if variant is not None:
                self._shrink_idle(live.endpoint_name, variant)
        record = self.inference_components.remove(name)
        self._persist_components()
        if record is not None:  # its (empty) adapter folder goes too: nothing left in the state dir
            folder = self._adapters_dir(record.endpoint_name, record.name)
            await self.executors.model_data(shutil.rmtree, folder, True)
            self.deployer.platform_log(record.endpoint_name, f"{name}: deleted")
