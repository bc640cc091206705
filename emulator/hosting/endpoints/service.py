"""The hosting service: SageMaker's hosting resources and their lifecycles, and InvokeEndpoint.

Owns every clock and task: deployments and deletions run as asyncio tasks while the control plane
answers at once, exactly as SageMaker's asynchronous Create/Delete calls do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from multidict import CIMultiDict

from emulator.config import MODEL_DATA_DOWNLOAD_TIMEOUT_S, ServerConfig
from emulator.errors import (
    DeploymentFailed,
    EndpointNotFound,
    EngineError,
    ImageNotFound,
    ModelDataError,
    ModelFault,
    ModelUnreachable,
    ResourceAlreadyExists,
    ResourceInProgress,
    ResourceNotFound,
    ValidationFailed,
    first_error,
)
from emulator.hosting.endpoints import persistence, rollout
from emulator.hosting.endpoints.base import ServiceBase
from emulator.hosting.endpoints.health import InstanceHealth
from emulator.hosting.endpoints.updates import FleetUpdates
from emulator.hosting.executors import Executors
from emulator.hosting.fleet.deployer import Deployer, group_by_variant
from emulator.hosting.fleet.invoker import ContainerReply, FaultContext, Invoker
from emulator.hosting.fleet.log_follow import LogFollow, selector
from emulator.hosting.fleet.plan import VariantPlan
from emulator.hosting.fleet.variants import EndpointFleet, Instance, VariantFleet
from emulator.model import deployment as dp
from emulator.model import messages
from emulator.model.arns import Account
from emulator.model.deployment import DeploymentConfig
from emulator.model.resources import (
    ContainerDefinition,
    Endpoint,
    EndpointConfig,
    EndpointStatus,
    Model,
    ModelDataSource,
    ProductionVariant,
)
from emulator.model.store import Registry
from emulator.runtime import labels
from emulator.runtime.base import ContainerHandle, ContainerRuntime

log = logging.getLogger(__name__)

ENVIRONMENT_MAX_BYTES = 32 * 1024  # all keys and values of one model together
_BUSY = (
    EndpointStatus.CREATING,
    EndpointStatus.UPDATING,
    EndpointStatus.SYSTEM_UPDATING,
    EndpointStatus.DELETING,
)


class ModelDataStore(Protocol):
    def check_exists(self, source: ModelDataSource) -> None: ...

    def materialize(
        self, source: ModelDataSource, timeout_s: float | None = None, shown_timeout_s: float | None = None
    ) -> Path: ...


@dataclass(frozen=True)
class Invocation:
    reply: ContainerReply
    variant_name: str


def _now() -> datetime:
    return datetime.now(UTC)


class HostingService(FleetUpdates, InstanceHealth, ServiceBase):
    def __init__(
        self,
        config: ServerConfig,
        runtime: ContainerRuntime,
        artifacts: ModelDataStore,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.config = config
        self.account = Account(config.region, config.account_id)
        self.runtime = runtime
        self.artifacts = artifacts
        self.models: Registry[Model] = Registry()
        self.endpoint_configs: Registry[EndpointConfig] = Registry()
        self.endpoints: Registry[Endpoint] = Registry()
        self._clock = clock
        self._fleets: dict[str, EndpointFleet] = {}  # exact endpoint name -> serving fleet
        self._fault_contexts: dict[str, FaultContext] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # Instance health while InService: one watching task per endpoint, plus its replacements.
        self._monitors: dict[str, asyncio.Task[None]] = {}
        self._replacements: dict[str, set[asyncio.Task[None]]] = {}
        self._suspects: dict[str, list[Instance]] = {}  # out of rotation, awaiting a verdict
        self._stopping: set[asyncio.Task[None]] = set()  # dead instances being stopped
        #: lower-cased endpoint name -> the config and models it serves (persisted for restarts)
        self._deployed: dict[str, persistence.Deployed] = {}
        self.health_check_interval_s = config.health_check_interval_s
        self.invoker = Invoker(config.limits.max_response_bytes, config.limits.invocation_timeout_s)
        self._ping_session: aiohttp.ClientSession | None = None
        # Blocking work runs on the service's own bounded pools, never on the default executor.
        self.executors = Executors()
        self.deployer = Deployer(config, runtime, lambda: self.ping_session, self.executors)
        #: Called with the endpoint's name when DeleteEndpoint is accepted (autoscaling deregisters).
        self.deletion_listeners: list[Callable[[str], None]] = []
        #: The names among the given CloudWatch alarms that are in ALARM (set when alarms are served);
        #: deployments with AutoRollbackConfiguration read it while they wait.
        self.alarm_states: Callable[[Sequence[str]], Sequence[str]] | None = None
        #: Called with (endpoint, current config, new config) before UpdateEndpoint is accepted; a
        #: guard raises ValidationFailed to refuse it (autoscaling: registered variants).
        self.update_guards: list[Callable[[str, EndpointConfig | None, EndpointConfig], None]] = []

    # ------------------------------------------------------------------ lifecycle

    @property
    def ping_session(self) -> aiohttp.ClientSession:
        assert self._ping_session is not None
        return self._ping_session

    async def start(self) -> None:
        """Load the state dir, then adopt or replace the containers this server owns."""
        await self.invoker.start()
        # One connection per ping: a keep-alive socket must not hide a container that stopped listening.
        self._ping_session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True, limit=0))
        snapshot = persistence.load(self.config.state_file)
        for model in snapshot.models:
            self.models.put(model)
        for endpoint_config in snapshot.endpoint_configs:
            self.endpoint_configs.put(endpoint_config)
        for endpoint in snapshot.endpoints:
            self.endpoints.put(endpoint)
        self._deployed = {name.lower(): d for name, d in snapshot.deployed.items()}
        await self._reconcile()

    async def close(self, stop_containers: bool = True) -> None:
        """Stop serving. With `stop_containers` (a graceful stop) deletions under way and containers
        being stopped finish (their containers are removed, not left Exited), every fleet is
        stopped, and any container still carrying this server's owner label is swept: nothing is
        left. Without it (a simulated crash) every task is cancelled and the containers stay."""
        names = set(self._monitors) | set(self._replacements) | set(self._suspects)
        tasks = [t for name in names for t in self._quiesce(name, cancel_replacements=True)]
        finishing: list[asyncio.Task[None]] = []
        for key, task in list(self._tasks.items()):
            endpoint = self.endpoints.get(key)
            deleting = endpoint is not None and endpoint.status is EndpointStatus.DELETING
            (finishing if stop_containers and deleting else tasks).append(task)
        (finishing if stop_containers else tasks).extend(self._stopping)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, *finishing, return_exceptions=True)
        if stop_containers:
            await asyncio.gather(*list(self._stopping), return_exceptions=True)
            instances = [i for fleet in self._fleets.values() for i in fleet.all_instances()]
            instances += [i for name in list(self._suspects) for i in self._suspects.pop(name)]
            await self.deployer.stop_instances(instances)
            self._fleets.clear()
            await self._sweep()
        await self.invoker.close()
        if self._ping_session is not None:
            await self._ping_session.close()
        self.executors.shutdown()

    async def _sweep(self) -> None:
        """Stop and remove every container this server owns that is still there (a task cancelled
        mid-stop, a container started by a cancelled deployment)."""
        try:
            left = await self.executors.engine(self.deployer.owned_containers)
        except EngineError as exc:
            log.warning("could not list this server's containers at shutdown: %s", exc)
            return
        if left:
            log.info("removing %d container(s) left at shutdown", len(left))
        await self._stop_handles(left)

    async def settled(self, name: str) -> None:
        """Wait until the endpoint's running change (deployment, update, deletion) has finished."""
        while (task := self._tasks.get(name.lower())) is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def wait_idle(self) -> None:
        """Wait for every running deployment/deletion (tests and `smlocal down`)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    def _persist(self) -> None:
        deployed = {
            e.name: d for e in self.endpoints if (d := self._deployed.get(e.name.lower())) is not None
        }
        snapshot = persistence.Snapshot(
            list(self.models), list(self.endpoint_configs), list(self.endpoints), deployed
        )
        persistence.save(self.config.state_file, snapshot)

    def _spawn(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks[name.lower()] = task
        task.add_done_callback(
            lambda t: self._tasks.pop(name.lower(), None) if self._tasks.get(name.lower()) is t else None
        )

    # ------------------------------------------------------------------ models

    async def create_model(
        self,
        name: str,
        container: ContainerDefinition,
        execution_role_arn: str | None = None,
        enable_network_isolation: bool = False,
        tags: tuple[tuple[str, str], ...] = (),
    ) -> Model:
        arn = self.account.model_arn(name)
        if name in self.models:
            raise ResourceAlreadyExists(messages.already_exists("model", arn))
        env_bytes = sum(len(k.encode()) + len(v.encode()) for k, v in container.environment.items())
        if env_bytes > ENVIRONMENT_MAX_BYTES:
            raise ValidationFailed(  # [U] text
                f"The total size of the environment variables of model {name} is {env_bytes} bytes, "
                f"over the limit of {ENVIRONMENT_MAX_BYTES} bytes."
            )
        try:
            await self.executors.engine(self.runtime.resolve_image, container.image)
        except ImageNotFound as exc:
            raise ValidationFailed(messages.image_not_found(container.image)) from exc
        if container.model_data is not None:
            await self.executors.engine(self.artifacts.check_exists, container.model_data)
        if name in self.models:  # created meanwhile
            raise ResourceAlreadyExists(messages.already_exists("model", arn))
        model = Model(
            name=name,
            arn=arn,
            primary_container=container,
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
    ) -> EndpointConfig:
        arn = self.account.endpoint_config_arn(name)
        if name in self.endpoint_configs:
            raise ResourceAlreadyExists(messages.already_exists("endpoint-config", arn))
        seen: set[str] = set()
        for variant in variants:
            if variant.variant_name.lower() in seen:  # [U] text
                raise ValidationFailed(f"Variant name {variant.variant_name} is used more than once.")
            seen.add(variant.variant_name.lower())
            if variant.model_name not in self.models:
                raise ResourceNotFound(
                    messages.not_found("model", self.account.model_arn(variant.model_name))
                )
        endpoint_config = EndpointConfig(name, arn, variants, self._clock(), kms_key_id, tags)
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
        return endpoint

    def delete_endpoint(self, name: str) -> None:
        endpoint = self.describe_endpoint(name)
        if endpoint.status in _BUSY:
            raise ResourceInProgress(messages.in_progress(endpoint.arn))
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
        return updated

    async def _plan(
        self, endpoint_name: str, variant: ProductionVariant, model: Model | None = None
    ) -> VariantPlan:
        """`model`: the variant's model as deployed (a restart), else the one of that name now."""
        model = model or self.models.get(variant.model_name)
        if model is None:
            raise DeploymentFailed(messages.not_found("model", self.account.model_arn(variant.model_name)))
        container = model.primary_container
        try:
            image = await self.executors.engine(self.runtime.resolve_image, container.image)
        except ImageNotFound as exc:
            raise DeploymentFailed(messages.image_not_found(container.image)) from exc
        # Without model data the container still gets a read-only /opt/ml/model (empty), as the
        # contract tester runs it, so a server that writes there fails here too.
        model_dir = self._empty_model_dir()
        if container.model_data is not None:
            try:
                timeout_s = float(variant.model_data_download_timeout_s or MODEL_DATA_DOWNLOAD_TIMEOUT_S)
                model_dir = await self.executors.model_data(
                    self.artifacts.materialize,
                    container.model_data,
                    timeout_s * self.config.model_data_timeout_scale,
                    timeout_s,
                )
            except ModelDataError as exc:
                detail = getattr(exc, "detail", None)
                if detail:
                    self.deployer.platform_log(endpoint_name, f"{variant.variant_name}: {detail}")
                raise DeploymentFailed(exc.message) from exc
        return VariantPlan(endpoint_name, variant, model, image, model_dir)

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
                    deployed.model(v.model_name) if deployed is not None else None,
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
        owned from here on: kept in the fleet, or stopped (not matching, or the launch failed)."""
        try:
            plan = await self._plan(endpoint_name, variant, model)
        except BaseException:
            await asyncio.shield(self._stop_handles(adopt))
            raise
        keep = self.deployer.matching(plan, adopt)[: variant.initial_instance_count]
        await self._stop_handles([h for h in adopt if h not in keep])
        return await self.deployer.launch_variant(plan, adopt=keep)  # stops `keep` if it fails

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

    async def _reconcile(self) -> None:
        # Isolation networks a crash left without containers (before any deployment starts here).
        await self.executors.engine(self.runtime.remove_leftovers, {labels.OWNER: self.deployer.owner})
        owned = await self.executors.engine(self.deployer.owned_containers)
        states = await asyncio.gather(*(self.executors.engine(self.runtime.state, h.id) for h in owned))
        running = [h for h, st in zip(owned, states, strict=True) if st.running]
        claimed: set[str] = set()
        for endpoint in list(self.endpoints):
            mine = [h for h in running if h.labels.get(labels.ENDPOINT) == endpoint.name]
            if endpoint.status is EndpointStatus.DELETING:
                self._spawn(endpoint.name, self._teardown(endpoint.name, None))
                continue
            if endpoint.status not in (
                EndpointStatus.IN_SERVICE,
                EndpointStatus.CREATING,
                EndpointStatus.UPDATING,
                EndpointStatus.SYSTEM_UPDATING,
            ):
                continue
            # What it served, kept with the endpoint; state files written before that was kept
            # name only the config (and its models must still exist).
            deployed = self._deployed.get(endpoint.name.lower())
            endpoint_config = (
                deployed.endpoint_config
                if deployed is not None
                else self.endpoint_configs.get(endpoint.endpoint_config_name)
            )
            if endpoint_config is None:
                reason = messages.not_found(
                    "endpoint-config", self.account.endpoint_config_arn(endpoint.endpoint_config_name)
                )
                self._set_status(endpoint.name, EndpointStatus.FAILED, reason)
                continue
            # Containers of variants the config no longer has (e.g. a blue/green update interrupted by a
            # restart: its new fleet) are not claimed, so they are removed below as orphans.
            names = {v.variant_name for v in endpoint_config.production_variants}
            mine = [h for h in mine if h.labels.get(labels.VARIANT) in names]
            claimed.update(h.id for h in mine)
            # [U] an endpoint that was serving shows SystemUpdating (SageMaker's maintenance status)
            # while its containers are adopted or re-launched; one that was being created, Creating
            relaunch = (
                EndpointStatus.CREATING
                if endpoint.status is EndpointStatus.CREATING
                else EndpointStatus.SYSTEM_UPDATING
            )
            updated = self._set_status(endpoint.name, relaunch)
            # weights and counts changed since the config was deployed (autoscaling, too) come back
            effective = endpoint.effective_config(endpoint_config)
            self._spawn(
                endpoint.name,
                self._deploy(updated, effective, group_by_variant(mine, endpoint.name), deployed),
            )
        orphans = [h for h in owned if h.id not in claimed]
        if orphans:
            log.info("removing %d container(s) no endpoint owns", len(orphans))
        await asyncio.gather(
            *(self.deployer.stop_container(h.id, self.config.limits.stop_grace_s) for h in orphans)
        )

    # ------------------------------------------------------------------ runtime

    async def invoke(
        self, endpoint_name: str, body: bytes, headers: CIMultiDict[str], target_variant: str | None
    ) -> Invocation:
        fleet = self._fleets.get(endpoint_name)
        if fleet is None:
            raise EndpointNotFound(
                messages.runtime_endpoint_not_found(endpoint_name, self.account.account_id)
            )
        variant = fleet.choose(target_variant)
        if variant is None:
            raise ValidationFailed(messages.unknown_variant(str(target_variant), endpoint_name))
        try:
            reply = await self._call(endpoint_name, variant, body, headers)
        except ModelFault as fault:
            fault.variant_name = variant.variant.variant_name
            raise
        return Invocation(reply, variant.variant.variant_name)

    async def _call(
        self, endpoint_name: str, variant: VariantFleet, body: bytes, headers: CIMultiDict[str]
    ) -> ContainerReply:
        """One container call on the variant's chosen instance (a refused connection: once more)."""
        context = self._fault_contexts[endpoint_name]
        for attempt in range(2):
            if not variant.instances:  # [U] every instance of the variant is being replaced
                raise context.fault(
                    ModelUnreachable, 0, messages.container_unreachable("no healthy instance is in rotation")
                )
            instance = variant.picker.pick(variant.instances)
            instance.outstanding += 1
            try:
                reply = await self.invoker.invoke(instance.invocations_url, body, headers, context)
            except ModelUnreachable as exc:
                # Refused, or a new connection dropped unanswered (exc.suspect; the invoker already
                # retried a stale pooled one): the instance looks gone. Take it out of rotation now,
                # before its exit event arrives (a ping puts it back if it was a one-off). Only a
                # connection that was never made is safe to send elsewhere,
                # once; a request the container may have received is the client's 424.
                if exc.suspect:
                    self._suspect(endpoint_name, variant, instance)
                if attempt or not isinstance(exc.__cause__, aiohttp.ClientConnectorError):
                    raise
                continue
            finally:
                instance.outstanding -= 1
            return reply
        raise AssertionError("unreachable")  # the loop returns or raises

    async def endpoint_logs(self, endpoint_name: str) -> dict[str, str]:
        """Every log stream of an endpoint, by CloudWatch-style stream name (`variant/instance-id`):
        live containers from the engine, stopped ones from their archives, plus `_smlocal`."""
        root = self.config.logs_dir / endpoint_name
        streams: dict[str, str] = {}
        if root.exists():
            for path in sorted(root.rglob("*.log")):
                streams[str(path.relative_to(root).with_suffix(""))] = path.read_text(errors="replace")
        fleet = self._fleets.get(endpoint_name)
        live = fleet.all_instances() if fleet is not None else []
        texts = await asyncio.gather(*(self.executors.engine(self.runtime.logs, i.handle.id) for i in live))
        for instance, text in zip(live, texts, strict=True):
            streams[f"{instance.variant_name}/{instance.instance_id}"] = text
        return dict(sorted(streams.items()))

    async def follow_logs(
        self, endpoint_name: str, variant: str | None, instance: str | None
    ) -> LogFollow | None:
        """The live containers' logs of an endpoint, followed; None when none is running."""
        return await LogFollow.open(self.runtime, selector(self.owner, endpoint_name, variant, instance))

    @property
    def owner(self) -> str:
        """The owner id on this server's containers (`smlocal down` checks it before a shutdown)."""
        return labels.owner_id(self.config.state_dir)
