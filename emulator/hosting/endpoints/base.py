"""What the parts of the hosting service share: its state, and the operations one part offers the
others. HostingService (service.py: construction and lifecycle) is assembled from Resources
(resources.py), Deployments (deployments.py), InstanceHealth (health.py), FleetUpdates (updates.py),
Reconciliation (reconcile.py), Invocations (invoke.py), EndpointLogs (logs.py) and this base.
Resources and Reconciliation start and end deployments: they build on Deployments itself."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from emulator.config import ServerConfig
from emulator.errors import DeploymentFailed, EngineError
from emulator.hosting.async_inference.host import AsyncInferenceHost
from emulator.hosting.endpoints import persistence
from emulator.hosting.endpoints.restoring import StatusSignals
from emulator.hosting.executors import Executors
from emulator.hosting.fleet.deployer import Deployer
from emulator.hosting.fleet.invoker import FaultContext, Invoker
from emulator.hosting.fleet.plan import VariantPlan
from emulator.hosting.fleet.variants import EndpointFleet, Instance, VariantFleet
from emulator.hosting.multi_model.host import MultiModelHost
from emulator.hosting.serverless.capacity import ServerlessHost
from emulator.model.arns import Account
from emulator.model.components import InferenceComponent
from emulator.model.resources import (
    Endpoint,
    EndpointConfig,
    EndpointStatus,
    Model,
    ModelDataSource,
    ProductionVariant,
)
from emulator.model.store import Registry
from emulator.model_data.port import ModelDataStore
from emulator.runtime.base import ContainerHandle, ContainerRuntime

if TYPE_CHECKING:
    from emulator.hosting.endpoints.component_live import LiveComponent

log = logging.getLogger(__name__)


class ServiceBase:
    config: ServerConfig
    account: Account
    runtime: ContainerRuntime
    artifacts: ModelDataStore
    models: Registry[Model]
    endpoint_configs: Registry[EndpointConfig]
    endpoints: Registry[Endpoint]
    deployer: Deployer
    executors: Executors
    invoker: Invoker
    multi_model: MultiModelHost
    async_inference: AsyncInferenceHost
    serverless: ServerlessHost
    health_check_interval_s: float
    #: Called with the endpoint's name when DeleteEndpoint is accepted (autoscaling deregisters).
    deletion_listeners: list[Callable[[str], None]]
    #: Called with the component's name when DeleteInferenceComponent is accepted.
    component_deletion_listeners: list[Callable[[str], None]]
    #: The names among the given CloudWatch alarms that are in ALARM (set when alarms are served);
    #: deployments with AutoRollbackConfiguration read it while they wait.
    alarm_states: Callable[[Sequence[str]], Sequence[str]] | None
    #: Called with (endpoint, current config, new config) before UpdateEndpoint is accepted; a
    #: guard raises ValidationFailed to refuse it (autoscaling: registered variants).
    update_guards: list[Callable[[str, EndpointConfig | None, EndpointConfig], None]]
    _clock: Callable[[], datetime]
    _fleets: dict[str, EndpointFleet]  # exact endpoint name -> serving fleet
    _fault_contexts: dict[str, FaultContext]
    _tasks: dict[str, asyncio.Task[None]]  # lower-cased endpoint name -> its running change
    # Instance health while InService: one watching task per endpoint, plus its replacements.
    _monitors: dict[str, asyncio.Task[None]]
    _replacements: dict[str, set[asyncio.Task[None]]]
    _suspects: dict[str, list[Instance]]  # out of rotation, awaiting a verdict
    _stopping: set[asyncio.Task[None]]  # dead instances being stopped
    #: lower-cased endpoint name -> the config and models it serves (persisted for restarts)
    _deployed: dict[str, persistence.Deployed]
    #: wakes invocations waiting for an endpoint being restored after a restart (restoring.py)
    _status_signals: StatusSignals
    #: inference components as the control plane knows them (persisted: components.json)
    inference_components: Registry[InferenceComponent]
    #: lower-cased component name -> its copies and converging task (component_copies.py)
    _live_components: dict[str, LiveComponent]
    #: endpoint name -> variant name -> the ids of its instances for components, in launch order
    _component_hosts: dict[str, dict[str, list[str]]]
    #: endpoint name -> the running copies found at a restart, adopted when the endpoint serves
    _component_handles: dict[str, list[ContainerHandle]]

    # ------------------------------------------------------------------ offered by service.py

    @property
    def ping_session(self) -> aiohttp.ClientSession:
        raise NotImplementedError

    @property
    def owner(self) -> str:
        raise NotImplementedError

    def _persist(self) -> None:
        raise NotImplementedError

    def _spawn(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ offered by resources.py

    def describe_endpoint(self, name: str) -> Endpoint:
        raise NotImplementedError

    def describe_endpoint_config(self, name: str) -> EndpointConfig:
        raise NotImplementedError

    def _set_status(
        self, name: str, status: EndpointStatus, failure_reason: str | None = None, **changes: Any
    ) -> Endpoint:
        raise NotImplementedError

    # ------------------------------------------------------------------ offered by deployments.py

    async def _plan(
        self, endpoint_name: str, variant: ProductionVariant, model: Model | None = None
    ) -> VariantPlan:
        raise NotImplementedError

    async def _launch(
        self,
        endpoint_name: str,
        variant: ProductionVariant,
        adopt: list[ContainerHandle],
        model: Model | None = None,
    ) -> VariantFleet:
        raise NotImplementedError

    def _remember_deployed(self, name: str, endpoint_config: EndpointConfig) -> None:
        raise NotImplementedError

    async def _materialize(
        self, endpoint_name: str, variant: ProductionVariant, source: ModelDataSource, deadline: float
    ) -> Path:
        raise NotImplementedError

    # ------------------------------------------------------------------ offered by updates.py

    async def _retire(self, instances: list[Instance]) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ offered by component_copies.py

    def _host_fleet(self, endpoint_name: str, variant: ProductionVariant) -> VariantFleet:
        raise NotImplementedError

    async def _set_hosts(self, endpoint_name: str, variant: VariantFleet, count: int) -> None:
        raise NotImplementedError

    def _components_serving(self, endpoint_name: str) -> None:
        raise NotImplementedError

    def inference_components_of(self, endpoint_name: str) -> list[InferenceComponent]:
        raise NotImplementedError

    # ------------------------------------------------------------------ offered by quotas.py

    def _check_instance_quota(self, name: str | None, after: Mapping[str, int]) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ offered by health.py

    def _watch(self, name: str) -> None:
        raise NotImplementedError

    def _quiesce(self, name: str, cancel_replacements: bool = False) -> list[asyncio.Task[None]]:
        raise NotImplementedError

    def _suspect(self, name: str, variant: VariantFleet, instance: Instance) -> None:
        raise NotImplementedError


def failure_reason(endpoint_name: str, error: BaseException) -> str:
    """The FailureReason of a failed deployment or update."""
    if isinstance(error, DeploymentFailed | EngineError):
        return error.message
    log.exception("update of %s failed", endpoint_name, exc_info=error)
    return f"Internal error: {error}"
