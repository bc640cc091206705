"""The hosting resources themselves: CreateModel / CreateEndpointConfig / CreateEndpoint, their
Describe and Delete calls, and the endpoint's status changes (each persisted). Creating and deleting
an endpoint hand the work to a task (deployments.py) and answer at once, as SageMaker does."""

from __future__ import annotations

import dataclasses
from typing import Any

from emulator.config import has_instance_storage
from emulator.errors import (
    ImageNotFound,
    ResourceAlreadyExists,
    ResourceInProgress,
    ResourceNotFound,
    ValidationFailed,
)
from emulator.hosting.endpoints import image_rules
from emulator.hosting.endpoints.deployments import Deployments
from emulator.model import component_rules, messages, quota, serverless
from emulator.model import deployment as dp
from emulator.model.deployment import DeploymentConfig
from emulator.model.resources import (
    AsyncInference,
    ContainerDefinition,
    Endpoint,
    EndpointConfig,
    EndpointStatus,
    Model,
    ProductionVariant,
)

ENVIRONMENT_MAX_BYTES = 32 * 1024  # all keys and values of one model together
_BUSY = (
    EndpointStatus.CREATING,
    EndpointStatus.UPDATING,
    EndpointStatus.SYSTEM_UPDATING,
    EndpointStatus.DELETING,
)


class Resources(Deployments):
    # ------------------------------------------------------------------ models

    async def create_model(
        self,
        name: str,
        container: ContainerDefinition,
        execution_role_arn: str | None = None,
        enable_network_isolation: bool = False,
        tags: tuple[tuple[str, str], ...] = (),
        containers: tuple[ContainerDefinition, ...] = (),
        inference_mode: str | None = None,
    ) -> Model:
        """`container`: the PrimaryContainer, or the first of `containers` (CreateModel's Containers)."""
        arn = self.account.model_arn(name)
        if name in self.models:
            raise ResourceAlreadyExists(messages.already_exists("model", arn))
        every = containers or (container,)
        # the limit holds for all keys and values of one model, across its containers (§3.1)
        env_bytes = sum(len(k.encode()) + len(v.encode()) for c in every for k, v in c.environment.items())
        if env_bytes > ENVIRONMENT_MAX_BYTES:
            raise ValidationFailed(  # [U] text
                f"The total size of the environment variables of model {name} is {env_bytes} bytes, "
                f"over the limit of {ENVIRONMENT_MAX_BYTES} bytes."
            )
        image_rules.check_registry(every, self.account, self.config)
        for c in every:
            try:
                await self.executors.engine(self.runtime.resolve_image, c.image)
            except ImageNotFound as exc:
                raise ValidationFailed(messages.image_not_found(c.image)) from exc
            if not c.multi_model:  # its model data, then each AdditionalModelDataSources channel
                for data in c.all_model_data:
                    await self.executors.engine(self.artifacts.check_exists, data)
        if name in self.models:  # created meanwhile
            raise ResourceAlreadyExists(messages.already_exists("model", arn))
        model = Model(
            name=name,
            arn=arn,
            primary_container=container,
            containers=containers,
            inference_mode=inference_mode,
            creation_time=self._clock(),
            execution_role_arn=execution_role_arn,
            enable_network_isolation=enable_network_isolation,
            tags=tags,
        )
        self.models.put(model)
        self._persist()
        return model

    def describe_model(self, name: str) -> Model:
        model = self.models.get(name)
        if model is None:
            raise ResourceNotFound(messages.not_found("model", self.account.model_arn(name)))
        return model

    def delete_model(self, name: str) -> None:
        self.describe_model(name)
        self.models.remove(name)
        self._persist()

    # ------------------------------------------------------------------ endpoint configs

    def create_endpoint_config(
        self,
        name: str,
        variants: tuple[ProductionVariant, ...],
        kms_key_id: str | None = None,
        tags: tuple[tuple[str, str], ...] = (),
        async_inference: AsyncInference | None = None,
        execution_role_arn: str | None = None,
    ) -> EndpointConfig:
        arn = self.account.endpoint_config_arn(name)
        if name in self.endpoint_configs:
            raise ResourceAlreadyExists(messages.already_exists("endpoint-config", arn))
        seen: set[str] = set()
        for variant in variants:
            if variant.variant_name.lower() in seen:  # [U] text
                raise ValidationFailed(f"Variant name {variant.variant_name} is used more than once.")
            seen.add(variant.variant_name.lower())
            if variant.model_name is None:  # an endpoint for inference components
                continue
            if variant.model_name not in self.models:
                raise ResourceNotFound(
                    messages.not_found("model", self.account.model_arn(variant.model_name))
                )
            if variant.volume_size_gb is not None and has_instance_storage(variant.instance_type):
                raise ValidationFailed(messages.volume_size_not_supported(str(variant.instance_type)))
            model = self.models.get(variant.model_name)
            if (
                async_inference is not None
                and model is not None
                and (model.multi_model or model.multi_container)
            ):
                raise ValidationFailed(messages.async_model_not_supported(variant.model_name))
        component_rules.check_endpoint_config(variants, execution_role_arn, async_inference)
        serverless.check_endpoint_config(variants, self.models.get, async_inference)
        endpoint_config = EndpointConfig(
            name, arn, variants, self._clock(), kms_key_id, tags, async_inference, execution_role_arn
        )
        self.endpoint_configs.put(endpoint_config)
        self._persist()
        return endpoint_config

    def describe_endpoint_config(self, name: str) -> EndpointConfig:
        endpoint_config = self.endpoint_configs.get(name)
        if endpoint_config is None:
            arn = self.account.endpoint_config_arn(name)
            raise ResourceNotFound(messages.not_found("endpoint-config", arn))
        return endpoint_config

    def delete_endpoint_config(self, name: str) -> None:
        self.describe_endpoint_config(name)
        self.endpoint_configs.remove(name)
        self._persist()

    # ------------------------------------------------------------------ endpoints

    def create_endpoint(
        self,
        name: str,
        config_name: str,
        tags: tuple[tuple[str, str], ...] = (),
        deployment: DeploymentConfig | None = None,
    ) -> Endpoint:
        arn = self.account.endpoint_arn(name)
        if name in self.endpoints:
            raise ResourceAlreadyExists(messages.already_exists("endpoint", arn))
        endpoint_config = self.describe_endpoint_config(config_name)
        self._check_instance_quota(None, quota.instances(endpoint_config.production_variants))
        now = self._clock()
        endpoint = Endpoint(
            name=name,
            arn=arn,
            endpoint_config_name=endpoint_config.name,
            status=EndpointStatus.CREATING,
            creation_time=now,
            last_modified_time=now,
            tags=tags,
            last_deployment_config=deployment,
        )
        if deployment is not None:
            dp.validate(deployment)
        self.endpoints.put(endpoint)
        self._persist()
        self._spawn(name, self._deploy(endpoint, endpoint_config))
        return endpoint

    def describe_endpoint(self, name: str) -> Endpoint:
        endpoint = self.endpoints.get(name)
        if endpoint is None:
            raise ResourceNotFound(messages.not_found("endpoint", self.account.endpoint_arn(name)))
        fleet = self._fleets.get(endpoint.name)
        if fleet is not None:
            summaries = tuple(v.summary() for v in fleet.variants.values())
            endpoint = dataclasses.replace(endpoint, production_variants=summaries)
        # the deployed config's (the one named at CreateEndpoint until the first deployment ends)
        deployed = self._deployed.get(endpoint.name.lower())
        config = (
            deployed.endpoint_config
            if deployed is not None
            else self.endpoint_configs.get(endpoint.endpoint_config_name)
        )
        if config is not None and config.async_inference is not None:
            endpoint = dataclasses.replace(endpoint, async_inference=config.async_inference)
        return endpoint

    def delete_endpoint(self, name: str) -> None:
        endpoint = self.describe_endpoint(name)
        if endpoint.status in _BUSY:
            raise ResourceInProgress(messages.in_progress(endpoint.arn))
        components = self.inference_components_of(endpoint.name)
        if components:  # [U] SageMaker wants them deleted first
            names = ", ".join(c.name for c in components)
            raise ValidationFailed(messages.endpoint_has_components(endpoint.arn, names))
        pending = self._quiesce(endpoint.name)
        self._set_status(endpoint.name, EndpointStatus.DELETING)
        fleet = self._fleets.pop(endpoint.name, None)
        self._fault_contexts.pop(endpoint.name, None)
        suspects = self._suspects.pop(endpoint.name, [])
        self._spawn(endpoint.name, self._teardown(endpoint.name, fleet, suspects, pending))
        for listener in self.deletion_listeners:
            listener(endpoint.name)

    def _set_status(
        self, name: str, status: EndpointStatus, failure_reason: str | None = None, **changes: Any
    ) -> Endpoint:
        current = self.endpoints.get(name)
        assert current is not None
        updated = dataclasses.replace(
            current, status=status, failure_reason=failure_reason, last_modified_time=self._clock(), **changes
        )
        self.endpoints.put(updated)
        self._persist()
        self._status_signals.notify(name)
        if status is EndpointStatus.IN_SERVICE:
            self._serve_async(name)
            self._components_serving(name)
        return updated

    def _serve_async(self, name: str) -> None:
        """An endpoint InService: asynchronous or not as the config it deployed says (never the
        config of that name now, which may have been deleted or re-created). An async one's worker
        takes its queue (loaded from the state dir after a restart) to its instances."""
        deployed = self._deployed.get(name.lower())
        if deployed is None:
            return
        self.async_inference.serve(
            name,
            deployed.endpoint_config.async_inference,
            lambda: self._fleets.get(name),
            lambda line: self.deployer.platform_log(name, line),
        )
