"""The image under test and its containers, started through emulator.runtime exactly as the emulator
starts them: `docker run IMAGE serve`, Environment, /opt/ml/model read-only, port published on 127.0.0.1.
One way to start a container: DockerRuntime.start takes its docker arguments from
emulator.runtime.docker_run.create_options, as contract_tests.containers.SageMakerContainer does; and
one way to ping it: contract_tests/ping.py, as SageMakerContainer's PingWaitStrategy does.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import secrets
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contract_tests import preflight
from contract_tests.check_config import NO_GPU_ENV, NO_GPU_VALUE, CheckConfig
from contract_tests.cold_start import FirstStart
from contract_tests.multi_model import (
    MmeArtifacts,
    MmeDataProblem,
    ModelDataPlan,
    is_multi_model,
    plan_model_data,
    prepare,
)
from contract_tests.result import CheckSkipped
from contract_tests.running import GONE_STATUSES, RunningContainer, Startup
from emulator.errors import EngineError
from emulator.interrupts import deferred
from emulator.model import platform_env
from emulator.model.resources import ModelDataSource
from emulator.model_data.timings import MaterializeTimings
from emulator.process_owner import check_labels, remove_orphaned_checks
from emulator.runtime import labels
from emulator.runtime.base import (
    ContainerRuntime,
    ContainerSpec,
    ImageConfig,
)
from emulator.runtime.docker import DockerRuntime

#: The check that reports model data that cannot be used (the checks needing a container point to it).
MODEL_DATA_CHECK = "model-data.extracts"


@dataclass(frozen=True)
class ModelDataProblem:
    """Why the model data cannot be used, in SageMaker's words (the emulator's texts)."""

    #: "CreateModel" (SageMaker refuses the model) or "endpoint" (the endpoint fails with a FailureReason)
    stage: str
    #: the ValidationException message or the FailureReason
    message: str
    #: exactly what failed (the object or archive member, and why)
    detail: str


#: Called once per run with the shared container right after its first 200 from /ping, before any check
#: uses it: what must be seen at once (invocations' first calls to a model that is healthy but not ready).
AFTER_HEALTHY: list[Callable[[Target, RunningContainer], None]] = []


class Target:
    """Run-wide resources: the image's configuration, its files, the model dir, started containers."""

    def __init__(self, config: CheckConfig, runtime: ContainerRuntime | None = None) -> None:
        self.config = config
        self.runtime: ContainerRuntime = runtime or DockerRuntime()
        #: a runtime of its own is closed with the target (its engine connections); a given one is not
        self._own_runtime = (
            self.runtime if isinstance(self.runtime, DockerRuntime) and runtime is None else None
        )
        self._containers: list[RunningContainer] = []
        self._shared: RunningContainer | None = None
        self._shared_startup: Startup | None = None
        self._run_id = secrets.token_hex(4)
        self._swept = False
        #: names of the containers of ended check runs that the first start() removed
        self.orphans_removed: list[str] = []
        #: the first start's phases (contract_tests/cold_start.py makes its profile)
        self.measured = FirstStart()

    @functools.cached_property
    def image(self) -> ImageConfig:
        began = time.monotonic()
        image = self.runtime.inspect_image(self.config.image)
        self.measured.image_s = time.monotonic() - began
        return image

    @functools.cached_property
    def paths(self) -> list[str]:
        return list(self.runtime.image_paths(self.config.image))

    @functools.cached_property
    def multi_model(self) -> bool:
        """The image carries the multi-models label: --model-data is then a multi-model prefix."""
        return is_multi_model(self.image)

    @functools.cached_property
    def data_plan(self) -> ModelDataPlan:
        """Which model data the single-model and the multi-model containers get."""
        config = self.config
        return plan_model_data(config.model_data, config.multi_model_data, self.multi_model)

    @functools.cached_property
    def mme_artifacts(self) -> MmeArtifacts | MmeDataProblem | None:
        """A multi-model image's artifacts, extracted for /opt/ml/models (None: no multi-model data)."""
        uri = self.data_plan.multi
        if not uri:
            return None
        try:
            root = self.config.cache_dir / f"mme-models-{self._run_id}"  # this run's: removed by close()
            return prepare(uri, root, _s3_client)
        except MmeDataProblem as exc:
            return exc

    @functools.cached_property
    def model_data(self) -> Path | ModelDataProblem:
        began = time.monotonic()
        try:
            return self._model_data()
        finally:
            self.measured.model_data_s = time.monotonic() - began

    def _model_data(self) -> Path | ModelDataProblem:
        """The model data fetched and extracted as the emulator does (CreateModel's existence check,
        then the endpoint's download and extraction), an empty folder when there is none, or why it
        cannot be used. Evaluated once (the model-data check reports it). A multi-model image given a
        prefix only gets the prefix's first artifact, as extracted for /opt/ml/models (data_plan)."""
        plan = self.data_plan
        if plan.single_from_prefix:
            got = self.mme_artifacts
            if isinstance(got, MmeArtifacts):
                return got.models[0].host_dir
            assert got is not None  # single_from_prefix: there is a prefix
            return ModelDataProblem("endpoint", got.message, got.message)
        if not plan.single:
            empty = self.config.cache_dir / "empty-model"
            empty.mkdir(parents=True, exist_ok=True)
            return empty
        from emulator.errors import ValidationFailed
        from emulator.model_data.sources import ModelDataFailure
        from emulator.model_data.store import ArtifactStore

        source = ModelDataSource(uri=plan.single)
        store = ArtifactStore(self.config.cache_dir / "artifacts", _s3_client)
        try:
            store.check_exists(source)
        except ValidationFailed as exc:  # ModelDataNotFound among them
            return ModelDataProblem("CreateModel", exc.message, exc.message)
        self.measured.model_data = MaterializeTimings()
        try:
            return store.materialize(source, timings=self.measured.model_data)
        except ModelDataFailure as exc:
            return ModelDataProblem("endpoint", exc.message, exc.detail)

    @property
    def model_dir(self) -> Path:
        """The host folder mounted at /opt/ml/model; CheckSkipped when the model data cannot be used."""
        got = self.model_data
        if isinstance(got, ModelDataProblem):
            raise CheckSkipped(f"the model data cannot be used ({got.message}); see {MODEL_DATA_CHECK}")
        return got

    def start(
        self,
        environment: Mapping[str, str] | None = None,
        model_dir: Path | None = None,
        *,
        model_dir_writable: bool = False,
        model_dir_overlay: Path | None = None,
        container_port: int | None = None,
        extra_ports: tuple[int, ...] = (),
        models_dir: Path | None = None,
        read_only_root: bool = False,
        tmpfs: Mapping[str, str] | None = None,
        user: str | None = None,
    ) -> RunningContainer:
        """A new container of the image, as SageMaker starts one; removed by close(). Only the
        model-dir.read-only probe mounts a model dir writable (under an overlay whose upper layer is
        `model_dir_overlay`/upper, or its own copy where the engine cannot mount one). `container_port`
        (default: the configured one) is the handle's; `extra_ports` are published too
        (RunningContainer.url_of). `models_dir`: a multi-model container's host folder, mounted
        read-only at /opt/ml/models.
        `read_only_root`, `tmpfs`, `user`: the serverless sandbox (serverless.writes-outside-tmp)."""
        if not self._swept:  # containers of runs killed before they could clean up (a CI timeout)
            self._swept = True
            try:
                self.orphans_removed = remove_orphaned_checks(self.runtime)
            except EngineError as exc:  # never a reason for this run to fail
                logging.getLogger(__name__).warning("removing ended check runs' containers: %s", exc.message)
        n = len(self._containers)
        limits = preflight.container_limits(self.config)
        spec = ContainerSpec(
            image=self.image.id,
            name=f"smlocal-check-{self._run_id}-{n}",
            labels={labels.MANAGED: "true", labels.ROLE: "check", **check_labels()},
            # the platform's variables and hostname, as a single-container endpoint's (a check that
            # starts it as a multi-container one passes those in `environment`)
            environment={
                **self.config.environment,
                **platform_env.single_container_environment(),
                **(environment or {}),
                **self._no_gpu(),
            },
            hostname=platform_env.HOSTNAME,
            model_dir=model_dir or self.model_dir,
            model_dir_writable=model_dir_writable,
            model_dir_overlay=model_dir_overlay,
            container_port=container_port or self.config.container_port,
            extra_ports=extra_ports,
            models_dir=models_dir,
            read_only_root=read_only_root,
            tmpfs=dict(tmpfs or {}),
            user=user,
            memory_limit_bytes=limits.memory_limit_bytes,
            cpus=limits.cpus,
            gpus=limits.gpus,
            gpu_count=limits.gpu_count,
        )
        try:
            # A signal mid-create could let the engine create the container after the cleanup below
            # looked for it: the signal waits until the container is this run's (emulator.interrupts).
            with deferred():
                began = time.monotonic()
                container = RunningContainer(self.runtime, self.runtime.start(spec), self.config)
                container.start_s = container.started_at - began
                self._containers.append(container)
        except BaseException:  # Ctrl-C or SIGTERM mid-start: the engine may have created it already
            if not any(c.handle.name == spec.name for c in self._containers):
                with contextlib.suppress(Exception):  # the original error is the one to report
                    self._remove_named(spec)
            raise
        return container

    def _no_gpu(self) -> dict[str, str]:
        """Under the serverless profile, NVIDIA_VISIBLE_DEVICES=void for every container: serverless has
        no GPU, and an engine whose default runtime is nvidia would otherwise give the image the GPUs
        its own NVIDIA_VISIBLE_DEVICES asks for (the checker never asks for any itself) [U]."""
        return {NO_GPU_ENV: NO_GPU_VALUE} if self.config.profile == "serverless" else {}

    def _remove_named(self, spec: ContainerSpec) -> None:
        for handle in self.runtime.list(spec.labels):
            if handle.name == spec.name:
                self.runtime.remove(handle.id)

    def startup(self) -> Startup:
        """Start the shared container once and record how it started (start.* checks judge this)."""
        if self._shared_startup is None:
            try:
                self._shared = self.start()
            except EngineError as exc:  # e.g. Docker cannot run `serve`: remembered, not retried
                self._shared_startup = Startup(
                    healthy=False,
                    exited=True,
                    exit_code=None,
                    elapsed_s=0.0,
                    first_response_s=None,
                    first_healthy_s=None,
                    attempts=0,
                    last_observation=exc.message,
                    slowest_ping_s=0.0,
                    ping_body=b"",
                    logs="",
                    start_error=exc.message,
                )
            else:
                self._shared_startup = self._shared.wait_startup()
                self.measured.container_start_s = self._shared.start_s
                self.measured.startup = self._shared_startup
                if self._shared_startup.healthy:
                    for hook in AFTER_HEALTHY:
                        hook(self, self._shared)
        return self._shared_startup

    def startup_seen(self) -> Startup | None:
        """The shared container's startup record if startup() has run (None: it has not; nothing starts)."""
        return self._shared_startup

    def healthy(self) -> RunningContainer:
        """The shared container, healthy; CheckSkipped when it never became healthy."""
        startup = self.startup()
        if not startup.healthy or self._shared is None:
            raise CheckSkipped(
                f"the container never became healthy ({startup.last_observation}); see start.healthy"
            )
        return self._shared

    def discard(self, container: RunningContainer) -> None:
        """Remove one container of this run now (it is no longer counted as this run's)."""
        self._containers.remove(container)
        self.runtime.remove(container.handle.id)

    def removed_containers(self) -> list[str]:
        """Names of this run's containers that the engine no longer has although close() has not
        removed them: someone else did (`docker rm`, `smlocal down --all`, another run's cleanup)."""
        gone = []
        for container in self._containers:
            if self.runtime.state(container.handle.id).status in GONE_STATUSES:
                gone.append(container.handle.name)
        return gone

    def close(self) -> None:
        for container in self._containers:
            self.runtime.remove(container.handle.id)
        self._containers.clear()
        prepared = self.__dict__.get("mme_artifacts")  # the cached_property, if it ran
        if isinstance(prepared, MmeArtifacts):
            shutil.rmtree(prepared.root, ignore_errors=True)
        if self._own_runtime is not None:
            self._own_runtime.close()


def _s3_client() -> Any:
    import boto3

    return boto3.session.Session().client("s3")


@dataclass
class CheckContext:
    """What a check function gets: the run-wide target, and where to put warnings and evidence."""

    target: Target
    warnings: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    headline_warnings: list[str] = field(default_factory=list)

    @property
    def config(self) -> CheckConfig:
        return self.target.config

    def warn(self, message: str, headline: bool = False) -> None:
        """A warning on this check's result; `headline` ones also go in the report's summary line
        (what must not be missed, e.g. that the model's serving was never verified)."""
        self.warnings.append(message)
        if headline:
            self.headline_warnings.append(message)
