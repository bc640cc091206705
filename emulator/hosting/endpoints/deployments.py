"""Bringing an endpoint's fleet up and taking it down. CreateEndpoint's deployment (and the
re-launch after a restart, adopting the containers that match) plans each variant (image resolved,
model data materialized) and launches it; DeleteEndpoint's teardown stops it. Changes to a serving
fleet are updates.py's."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from emulator.config import MODEL_DATA_DOWNLOAD_TIMEOUT_S
from emulator.errors import DeploymentFailed, EngineError, ImageNotFound, ModelDataError, first_error
from emulator.hosting.endpoints import image_rules, persistence, rollout
from emulator.hosting.endpoints.base import ServiceBase
from emulator.hosting.fleet.cold_start import PlanSetup
from emulator.hosting.fleet.invoker import FaultContext
from emulator.hosting.fleet.plan import PlannedContainer, VariantPlan
from emulator.hosting.fleet.variants import EndpointFleet, Instance, VariantFleet
from emulator.model import messages, platform_env
from emulator.model.containers import ACCEPT_BIND_TO_PORT_LABEL, MULTI_MODELS_LABEL
from emulator.model.resources import (
    ContainerDefinition,
    Endpoint,
    EndpointConfig,
    EndpointStatus,
    Model,
    ModelDataSource,
    ProductionVariant,
)
from emulator.model_data.timings import MaterializeTimings
from emulator.runtime.base import ContainerHandle, ResolvedImage
from emulator.runtime.images import DEFAULT_BASE_IMAGE, LOCAL_BASE_IMAGE

log = logging.getLogger(__name__)


class Deployments(ServiceBase):
    async def _plan(
        self,
        endpoint_name: str,
        variant: ProductionVariant,
        model: Model | None = None,
        setup: PlanSetup | None = None,
    ) -> VariantPlan:
        """`model`: the variant's model as deployed (a restart), else the one of that name now.
        `setup`: filled with the plan's phases (image resolution, model data) for the cold start."""
        setup = setup or PlanSetup()
        name = variant.model_name
        model = model or (self.models.get(name) if name is not None else None)
        if model is None:
            raise DeploymentFailed(messages.not_found("model", self.account.model_arn(str(name))))
        for warning in image_rules.registry_warnings(model, self.account, self.config):
            self.deployer.platform_log(endpoint_name, f"{variant.variant_name}: warning: {warning}")
        if model.multi_container:
            return await self._plan_containers(endpoint_name, variant, model, setup)
        container = model.primary_container
        image = await self._resolve(container.image, setup)
        await self._check_architecture(variant, container.image, image, setup)
        if model.multi_model:  # models are fetched on demand (hosting/multi_model), not here
            config = await self.executors.engine(self.runtime.inspect_image, image.image_id)
            if config.labels.get(MULTI_MODELS_LABEL) != "true":
                raise DeploymentFailed(messages.missing_multi_models_label(container.image))
            return VariantPlan(endpoint_name, variant, model, image, None)
        if variant.serverless is not None:  # the 10 GB image limit (spec §7), before any download
            size = (await self.executors.engine(self.runtime.inspect_image, image.image_id)).size_bytes
            limit = self.config.serverless_image_limit_bytes
            if size > limit:
                raise DeploymentFailed(messages.serverless_image_too_large(container.image, size, limit))
        deadline = self._download_deadline(variant)
        model_dir = await self._model_dir(endpoint_name, variant, container, deadline, setup)
        channels = await self._channel_dirs(endpoint_name, variant, container, deadline, setup)
        return VariantPlan(endpoint_name, variant, model, image, model_dir, channel_dirs=channels)

    async def _plan_containers(
        self, endpoint_name: str, variant: ProductionVariant, model: Model, setup: PlanSetup
    ) -> VariantPlan:
        """Every container's image (which must accept SAGEMAKER_BIND_TO_PORT: the label) and model
        data, its ports, and the image of the instance's network container."""
        images = [await self._resolve(c.image, setup) for c in model.all_containers]
        unlabelled = []
        for c, image in zip(model.all_containers, images, strict=True):
            began = time.monotonic()
            config = await self.executors.engine(self.runtime.inspect_image, image.image_id)
            setup.add_image(config.size_bytes, time.monotonic() - began)
            image_rules.check_architecture(variant, c.image, config)
            if config.labels.get(ACCEPT_BIND_TO_PORT_LABEL) != "true":
                unlabelled.append(messages.missing_bind_to_port_label(c.image))
        if unlabelled:
            raise DeploymentFailed(" ".join(dict.fromkeys(unlabelled)))
        planned = []
        deadline = self._download_deadline(variant)
        for i, (c, hostname, image) in enumerate(
            zip(model.all_containers, model.hostnames(), images, strict=True)
        ):
            model_dir = await self._model_dir(endpoint_name, variant, c, deadline, setup)
            channels = await self._channel_dirs(endpoint_name, variant, c, deadline, setup)
            ports = platform_env.multi_container_ports(i)
            planned.append(PlannedContainer(hostname, c, image, model_dir, ports, channels))
        network_image = await self._network_image()
        first = planned[0]
        return VariantPlan(
            endpoint_name, variant, model, first.image, first.model_dir, tuple(planned), network_image
        )

    async def _network_image(self) -> str:
        """The plain Python image the instance's network container runs (as isolation's forwarder)."""
        for name in (DEFAULT_BASE_IMAGE, LOCAL_BASE_IMAGE):
            try:
                return (await self.executors.engine(self.runtime.resolve_image, name)).image_id
            except ImageNotFound:
                continue
        raise DeploymentFailed(  # [U] smlocal's own text
            f"A multi-container instance needs a Python base image for its network container "
            f"({DEFAULT_BASE_IMAGE} or {LOCAL_BASE_IMAGE}): run `smlocal setup`."
        )

    async def _check_architecture(
        self, variant: ProductionVariant, name: str, image: ResolvedImage, setup: PlanSetup | None = None
    ) -> None:
        """The image's architecture against the variant's instance type, before anything starts;
        `setup` gets the inspect's seconds and the image's size (the cold-start profile's)."""
        began = time.monotonic()
        config = await self.executors.engine(self.runtime.inspect_image, image.image_id)
        if setup is not None:
            setup.add_image(config.size_bytes, time.monotonic() - began)
        image_rules.check_architecture(variant, name, config)

    async def _resolve(self, image: str, setup: PlanSetup | None = None) -> ResolvedImage:
        """The image on the engine; `setup` gets the seconds (image resolution, for the cold start)."""
        began = time.monotonic()
        try:
            resolved = await self.executors.engine(self.runtime.resolve_image, image)
        except ImageNotFound as exc:
            raise DeploymentFailed(messages.image_not_found(image)) from exc
        if setup is not None:
            setup.add_image(None, time.monotonic() - began)
        return resolved

    def _download_deadline(self, variant: ProductionVariant) -> float:
        """When the variant's ModelDataDownloadTimeoutInSeconds runs out: one budget for all its
        model data, every container's ModelDataSource and AdditionalModelDataSources together [U]."""
        timeout_s = float(variant.model_data_download_timeout_s or MODEL_DATA_DOWNLOAD_TIMEOUT_S)
        return time.monotonic() + timeout_s * self.config.model_data_timeout_scale

    async def _model_dir(
        self,
        endpoint_name: str,
        variant: ProductionVariant,
        container: ContainerDefinition,
        deadline: float,
        setup: PlanSetup | None = None,
    ) -> Path:
        # Without model data the container still gets a read-only /opt/ml/model (empty), as the
        # contract tester runs it, so a server that writes there fails here too.
        if container.model_data is None:
            return self._empty_model_dir()
        return await self._materialize(endpoint_name, variant, container.model_data, deadline, setup)

    async def _channel_dirs(
        self,
        endpoint_name: str,
        variant: ProductionVariant,
        container: ContainerDefinition,
        deadline: float,
        setup: PlanSetup | None = None,
    ) -> tuple[tuple[Path, str], ...]:
        """Each AdditionalModelDataSources channel, materialized through the same cache as the
        model data, and where it is mounted (read-only)."""
        channels = []
        for a in container.additional_model_data:
            host_dir = await self._materialize(endpoint_name, variant, a.source, deadline, setup)
            channels.append((host_dir, a.mount_path))
        return tuple(channels)

    async def _materialize(
        self,
        endpoint_name: str,
        variant: ProductionVariant,
        source: ModelDataSource,
        deadline: float,
        setup: PlanSetup | None = None,
    ) -> Path:
        """One source through the cache, within the variant's deadline; its timings join `setup`'s
        model data phase (every container's data and channels together)."""
        shown_s = float(variant.model_data_download_timeout_s or MODEL_DATA_DOWNLOAD_TIMEOUT_S)
        setup = setup or PlanSetup()
        timings = setup.model_data = setup.model_data or MaterializeTimings()
        setup.model_data_budget_s = shown_s
        try:
            return await self.executors.model_data(
                self.artifacts.materialize,
                source,
                max(0.0, deadline - time.monotonic()),
                shown_s,
                None,
                timings,
            )
        except ModelDataError as exc:
            detail = getattr(exc, "detail", None)
            if detail:
                self.deployer.platform_log(endpoint_name, f"{variant.variant_name}: {detail}")
            raise DeploymentFailed(exc.message) from exc

    def _empty_model_dir(self) -> Path:
        empty = self.config.artifacts_dir / "empty-model"
        empty.mkdir(parents=True, exist_ok=True)
        return empty

    async def _deploy(
        self,
        endpoint: Endpoint,
        endpoint_config: EndpointConfig,
        adopt: Mapping[str, list[ContainerHandle]] | None = None,
        deployed: persistence.Deployed | None = None,
    ) -> None:
        """Launch the endpoint; `adopt` and `deployed` (the models it served) on a restart."""
        adopt = adopt or {}
        fleets: list[VariantFleet] = []
        try:
            fleets = await rollout.launch_all(
                lambda v: self._launch(
                    endpoint.name,
                    v,
                    adopt.get(v.variant_name, []),
                    deployed.model(v.model_name) if deployed is not None and v.model_name else None,
                ),
                self.deployer,
                endpoint_config.production_variants,
            )
        except BaseExceptionGroup as group_exc:
            error = first_error(group_exc)
            if isinstance(error, asyncio.CancelledError):
                raise error from None
            reason = (
                error.message
                if isinstance(error, DeploymentFailed | EngineError)
                else f"Internal error: {error}"
            )
            if not isinstance(error, DeploymentFailed | EngineError):
                log.exception("deployment of %s failed", endpoint.name, exc_info=error)
            self.deployer.platform_log(endpoint.name, f"endpoint Failed: {reason}")
            self._set_status(endpoint.name, EndpointStatus.FAILED, reason)
            return
        fleet = EndpointFleet(fleets)
        self._fleets[endpoint.name] = fleet
        self._fault_contexts[endpoint.name] = FaultContext(self.account, endpoint.name)
        base = deployed.endpoint_config if deployed is not None else endpoint_config
        self._remember_deployed(endpoint.name, base)
        self._set_status(endpoint.name, EndpointStatus.IN_SERVICE)
        self.deployer.platform_log(endpoint.name, "endpoint InService")
        self._watch(endpoint.name)

    def _remember_deployed(self, name: str, endpoint_config: EndpointConfig) -> None:
        """Keep what the endpoint now serves (its config and its fleet's models); persisted by the
        caller's next status change."""
        fleet = self._fleets.get(name)
        if fleet is None:
            return
        models = {v.plan.model.name: v.plan.model for v in fleet.variants.values() if v.plan is not None}
        self._deployed[name.lower()] = persistence.Deployed(endpoint_config, tuple(models.values()))

    async def _launch(
        self,
        endpoint_name: str,
        variant: ProductionVariant,
        adopt: list[ContainerHandle],
        model: Model | None = None,
    ) -> VariantFleet:
        """Start the variant (adopting the matching ones of `adopt`). Every container of `adopt` is
        owned from here on: kept in the fleet, or stopped (not matching, or the launch failed).
        A variant for inference components starts its instances empty (hosting/components/)."""
        if variant.hosts_components:
            await self._stop_handles(adopt)
            return self._host_fleet(endpoint_name, variant)
        setup = PlanSetup()  # the deploy's start: the instances' cold starts begin here
        try:
            plan = await self._plan(endpoint_name, variant, model, setup)
        except BaseException:
            await asyncio.shield(self._stop_handles(adopt))
            raise
        keep = self.deployer.matching_instances(plan, adopt)[: variant.initial_instance_count]
        kept = {h.id for group in keep for h in group}
        await self._stop_handles([h for h in adopt if h.id not in kept])
        return await self.deployer.launch_variant(plan, keep, setup)  # stops `keep` if it fails

    async def _stop_handles(self, handles: Sequence[ContainerHandle]) -> None:
        grace = self.config.limits.stop_grace_s
        results = await asyncio.gather(
            *(self.deployer.stop_container(h.id, grace) for h in handles), return_exceptions=True
        )
        for handle, result in zip(handles, results, strict=True):
            if isinstance(result, Exception):
                log.warning("could not stop container %s: %s", handle.name, result)

    async def _teardown(
        self,
        name: str,
        fleet: EndpointFleet | None,
        extra: list[Instance] | None = None,
        pending: list[asyncio.Task[None]] | None = None,
    ) -> None:
        await asyncio.gather(*(pending or []), return_exceptions=True)
        if fleet is not None:
            await self.deployer.stop_instances(fleet.all_instances() + (extra or []))
        self.endpoints.remove(name)
        self._deployed.pop(name.lower(), None)
        self._persist()
        self.deployer.platform_log(name, "endpoint deleted")
