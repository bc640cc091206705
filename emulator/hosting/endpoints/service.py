"""The hosting service: SageMaker's hosting resources and their lifecycles, and InvokeEndpoint.

Owns every clock and task: deployments and deletions run as asyncio tasks while the control plane
answers at once, exactly as SageMaker's asynchronous Create/Delete calls do.

HostingService is the one facade wire/ and app.py use, assembled from its parts: Resources
(resources.py), Deployments (deployments.py), InstanceHealth (health.py), FleetUpdates (updates.py),
Reconciliation (reconcile.py), Invocations (invoke.py), EndpointLogs (logs.py) and InstanceQuotas
(quotas.py), over ServiceBase
(base.py: the state they share). This module builds it and owns its lifecycle: start (load the state
dir, reconcile), close, persistence and the endpoints' tasks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any

import aiohttp

from emulator.config import ServerConfig
from emulator.errors import EngineError
from emulator.hosting.async_inference.host import AsyncInferenceHost
from emulator.hosting.endpoints import persistence
from emulator.hosting.endpoints.base import ServiceBase
from emulator.hosting.endpoints.components import ComponentOperations
from emulator.hosting.endpoints.deployments import Deployments
from emulator.hosting.endpoints.health import InstanceHealth
from emulator.hosting.endpoints.invoke import Invocations
from emulator.hosting.endpoints.logs import EndpointLogs
from emulator.hosting.endpoints.quotas import InstanceQuotas
from emulator.hosting.endpoints.reconcile import Reconciliation
from emulator.hosting.endpoints.resources import Resources
from emulator.hosting.endpoints.restoring import StatusSignals
from emulator.hosting.endpoints.updates import FleetUpdates
from emulator.hosting.executors import Executors
from emulator.hosting.fleet.deployer import Deployer
from emulator.hosting.fleet.invoker import FaultContext, Invoker
from emulator.hosting.fleet.variants import EndpointFleet, Instance
from emulator.hosting.multi_model.host import MultiModelHost
from emulator.hosting.serverless.capacity import ServerlessHost
from emulator.model.arns import Account
from emulator.model.components import InferenceComponent
from emulator.model.resources import Endpoint, EndpointConfig, EndpointStatus, Model
from emulator.model.store import Registry
from emulator.model_data.port import ModelDataStore
from emulator.runtime import labels
from emulator.runtime.base import ContainerHandle, ContainerRuntime

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


class HostingService(
    ComponentOperations,
    Invocations,
    EndpointLogs,
    Reconciliation,
    FleetUpdates,
    InstanceHealth,
    Resources,
    Deployments,
    InstanceQuotas,
    ServiceBase,
):
    def __init__(
        self,
        config: ServerConfig,
        runtime: ContainerRuntime,
        artifacts: ModelDataStore,
        clock: Callable[[], datetime] = _now,
        s3_client_factory: Callable[[], Any] | None = None,
        sns_client_factory: Callable[[], Any] | None = None,
        multi_model_artifacts: ModelDataStore | None = None,
    ) -> None:
        """`multi_model_artifacts`: where multi-model instances' models come from (a store with a
        budget: ArtifactStore.for_multi_model); None: `artifacts`."""
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
        self._status_signals = StatusSignals()
        self.inference_components: Registry[InferenceComponent] = Registry()
        self._live_components = {}
        self._component_hosts: dict[str, dict[str, list[str]]] = {}
        self._component_handles: dict[str, list[ContainerHandle]] = {}
        self.health_check_interval_s = config.health_check_interval_s
        self.invoker = Invoker(config.limits.max_response_bytes, config.limits.invocation_timeout_s)
        self._ping_session: aiohttp.ClientSession | None = None
        # Blocking work runs on the service's own bounded pools, never on the default executor.
        self.executors = Executors()
        self.deployer = Deployer(config, runtime, lambda: self.ping_session, self.executors)
        #: multi-model instances' models (downloaded and loaded on demand)
        self.multi_model = MultiModelHost(
            config, multi_model_artifacts or artifacts, self.executors, lambda: self.invoker.session
        )
        #: serverless variants' capacity on demand (cold starts, MaxConcurrency, idle stop)
        self.serverless = ServerlessHost(config, self.deployer)
        #: asynchronous endpoints' queues and workers (InvokeEndpointAsync)
        self.async_inference = AsyncInferenceHost(
            config, self.account, self.executors, s3_client_factory, sns_client_factory
        )
        #: Called with the endpoint's name when DeleteEndpoint is accepted (autoscaling deregisters).
        self.deletion_listeners: list[Callable[[str], None]] = [self.async_inference.forget]
        #: Called with the component's name when DeleteInferenceComponent is accepted (autoscaling
        #: deregisters its targets, the metrics forget its series).
        self.component_deletion_listeners: list[Callable[[str], None]] = []
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
        await self.async_inference.start()
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
        self._load_components()
        await self._reconcile()

    async def close(self, stop_containers: bool = True) -> None:
        """Stop serving. With `stop_containers` (a graceful stop) deletions under way and containers
        being stopped finish (their containers are removed, not left Exited), every fleet is
        stopped, and any container still carrying this server's owner label is swept: nothing is
        left. Without it (a simulated crash) every task is cancelled and the containers stay.
        Asynchronous requests: none starts once the stop begins; those running when their containers
        stop wait again in the queue's file (a restart runs them), never failed."""
        self.async_inference.stop_dispatching()
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
        await self.serverless.close()  # before the sweep: a cold start stops what it started
        await self._close_components(stop_containers)
        if stop_containers:
            await asyncio.gather(*list(self._stopping), return_exceptions=True)
            instances = [i for fleet in self._fleets.values() for i in fleet.all_instances()]
            instances += [i for name in list(self._suspects) for i in self._suspects.pop(name)]
            self.async_inference.retiring(instances)
            await self.deployer.stop_instances(instances)
            self._fleets.clear()
            await self._sweep()
        await self.multi_model.close()
        # the requests still running are writing their results (or going back to the queue)
        await self.async_inference.close(self.config.limits.stop_grace_s if stop_containers else 0.0)
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

    @property
    def owner(self) -> str:
        """The owner id on this server's containers (`smlocal down` checks it before a shutdown)."""
        return labels.owner_id(self.config.state_dir)
