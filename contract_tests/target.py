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
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from contract_tests.http_client import container_client
from contract_tests.multi_model import (
    MmeArtifacts,
    MmeDataProblem,
    ModelDataPlan,
    is_multi_model,
    plan_model_data,
    prepare,
)
from contract_tests.ping import ping_once
from contract_tests.result import CheckSkipped
from emulator.config import ContractLimits
from emulator.errors import EngineError
from emulator.interrupts import deferred
from emulator.model import platform_env
from emulator.model.resources import ModelDataSource
from emulator.process_owner import check_labels, remove_orphaned_checks
from emulator.runtime import labels
from emulator.runtime.base import (
    ContainerHandle,
    ContainerRuntime,
    ContainerSpec,
    ContainerState,
    ImageConfig,
)
from emulator.runtime.docker import DockerRuntime

#: ContainerState.status of a container the engine does not know (any more).
REMOVED_STATUS = "removed"
#: ... and of one it is removing (or failed to remove): never this run's doing before close().
GONE_STATUSES = frozenset({REMOVED_STATUS, "removing", "dead"})
#: SageMaker serverless inference's image size limit: image.size's default limit (FAILED above it under
#: the serverless profile, a warning otherwise).
SERVERLESS_IMAGE_LIMIT_BYTES = 10 * 1024**3
#: Set on every container under the serverless profile (Target._no_gpu): no GPU even from an engine whose
#: default runtime is nvidia ("void": the NVIDIA runtime then behaves as runc).
NO_GPU_ENV = "NVIDIA_VISIBLE_DEVICES"
NO_GPU_VALUE = "void"
#: SageMaker serverless inference's request and response body cap, 4 MB (hosting contract §7; MB as the
#: real-time cap's 6 MB = 6,291,456 bytes): serverless.payload-size.
SERVERLESS_MAX_PAYLOAD_BYTES = 4 * 1024**2
#: Serverless: model download and the first 200 from /ping within 3 minutes (hosting contract §7):
#: serverless.startup-time's default limit.
SERVERLESS_STARTUP_TIMEOUT_S = 180.0
_SIZE = re.compile(r"^(\d+(?:\.\d*)?)\s*(?:([kmgt])(?:i?b)?|b)?$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str) -> int:
    """`10GB`, `500MB`, `1.5GiB`, `2048` (bytes) as bytes. K/M/G/T (alone, with B or with iB) are powers
    of 1024, as the reports print sizes. ValueError for anything else."""
    match = _SIZE.match(text.strip())
    if match is None:
        raise ValueError(f"not a size: {text!r} (e.g. 10GB, 500MB, 2048)")
    size = int(float(match.group(1)) * _SIZE_UNITS[(match.group(2) or "").lower()])
    if size <= 0:
        raise ValueError(f"a size must be positive: {text!r}")
    return size


@dataclass(frozen=True)
class Payload:
    """One request the invocation checks send: a body, its Content-Type and (optionally) an Accept."""

    body: bytes = b"{}"
    content_type: str = "application/json"
    accept: str | None = None
    #: where it came from, for messages (`--payload FILE`), or "the default payload"
    source: str = "the default payload"


#: What the streaming.* checks send without --stream-body [U]: the request the common streaming LLM
#: containers (Hugging Face TGI, DJL LMI) stream an answer to on /invocations. No body fits every image:
#: give the one yours streams to.
DEFAULT_STREAM_BODY = b'{"inputs": "Tell me a story.", "parameters": {"max_new_tokens": 64}, "stream": true}'
#: Payload.source of DEFAULT_STREAM_BODY.
DEFAULT_STREAM_SOURCE = "the default stream body"


@dataclass(frozen=True)
class CheckConfig:
    image: str
    model_data: str | None = None
    #: `--multi-model-data`: the multi-model prefix of an image with the multi-models label, when it is not
    #: --model-data (then --model-data is the single-model data only); see multi_model.plan_model_data.
    multi_model_data: str | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    #: The request body the invocation checks send (the container may answer it with any status).
    payload: bytes = b"{}"
    content_type: str = "application/json"
    #: The Accept header sent with `payload` (None: none).
    accept: str | None = None
    #: More inputs the user gave (`--payload` several times): invocations.serves sends each.
    extra_payloads: tuple[Payload, ...] = ()
    #: True when the user chose the payload(s): then no 2xx to any of them is a failure, not a warning.
    payload_given: bool = False
    #: Where `payload` came from, for messages (`--payload FILE`); None: "the configured/default payload".
    payload_source: str | None = None
    limits: ContractLimits = field(default_factory=ContractLimits)
    cache_dir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / "smlocal-check")
    poll_interval_s: float = 0.05
    #: image.size's limit (`--image-size-limit`): above it FAILED under the serverless profile, else warned.
    image_size_limit_bytes: int = SERVERLESS_IMAGE_LIMIT_BYTES
    #: `--profile`: "realtime" (default) or "serverless" (then the image size limit is a failure and the
    #: serverless.* checks run; under realtime they are SKIPPED).
    profile: str = "realtime"
    #: serverless.startup-time's limit on the first 200 from /ping (SageMaker serverless' 3 minutes).
    serverless_startup_timeout_s: float = SERVERLESS_STARTUP_TIMEOUT_S
    #: Check ids the user named exactly (`--check ID`; a group or the plugin's -k does not count): these
    #: run in full even on a slow model (see invocations.needs_variants).
    named_checks: frozenset[str] = frozenset()
    #: `--streaming`: the request the streaming.* checks send (`--stream-body`, `--stream-content-type`;
    #: DEFAULT_STREAM_BODY when none was given); None: the image was not said to stream, they are SKIPPED.
    stream: Payload | None = None

    @property
    def payloads(self) -> tuple[Payload, ...]:
        """Every input to send: the primary payload (what most checks use) first."""
        source = self.payload_source or (
            "the configured payload" if self.payload_given else "the default payload"
        )
        first = Payload(self.payload, self.content_type, self.accept, source)
        return (first, *self.extra_payloads)

    @property
    def container_port(self) -> int:
        return int(self.environment.get("SAGEMAKER_BIND_TO_PORT") or self.limits.container_port)


@dataclass(frozen=True)
class Startup:
    """What happened while a container started: the evidence the start.* checks judge."""

    healthy: bool
    exited: bool
    exit_code: int | None
    elapsed_s: float
    #: seconds from start to the first HTTP response of any status on /ping (None: never)
    first_response_s: float | None
    #: seconds from start to the first 200 (None: never)
    first_healthy_s: float | None
    attempts: int
    last_observation: str
    #: the slowest /ping answer seen, in seconds
    slowest_ping_s: float
    ping_body: bytes
    #: the last log lines, for messages
    logs: str
    #: the whole log, for searching
    all_logs: str = ""
    #: why Docker could not start the container at all (then nothing else here was observed)
    start_error: str | None = None


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


class RunningContainer:
    def __init__(self, runtime: ContainerRuntime, handle: ContainerHandle, config: CheckConfig) -> None:
        self.runtime = runtime
        self.handle = handle
        self.config = config
        self.started_at = time.monotonic()

    @property
    def base_url(self) -> str:
        return self.handle.base_url

    def url_of(self, container_port: int) -> str:
        """The loopback URL of a container port published at start (see Target.start's extra_ports)."""
        return f"http://127.0.0.1:{self.handle.published_ports[container_port]}"

    def client(self, timeout_s: float | None = None) -> httpx.Client:
        """A fresh HTTP client (own connections) for this container."""
        return container_client(
            base_url=self.base_url, timeout=timeout_s or self.config.limits.invocation_timeout_s
        )

    def logs(self, tail: int | None = None) -> str:
        return self.runtime.logs(self.handle.id, tail=tail)

    def state(self) -> ContainerState:
        return self.runtime.state(self.handle.id)

    def log_tail(self, lines: int = 15) -> str:
        return self.logs(tail=lines).rstrip()

    def wait_startup(self, deadline_s: float | None = None) -> Startup:
        """Poll GET /ping (2 s per attempt) until HTTP 200, the container exits, or the deadline."""
        limits = self.config.limits
        deadline = self.started_at + (deadline_s if deadline_s is not None else limits.startup_timeout_s)
        attempts, first_response, first_healthy, slowest = 0, None, None, 0.0
        observation, body = "no /ping attempt yet", b""
        exited, exit_code = False, None
        with container_client(timeout=limits.ping_timeout_s) as client:
            while True:
                state = self.state()
                if not state.running:
                    exited, exit_code = True, state.exit_code
                    observation = f"the container exited with code {state.exit_code}"
                    break
                now = time.monotonic()
                if now >= deadline:
                    break
                attempts += 1
                attempt = ping_once(client, f"{self.base_url}/ping", limits.ping_timeout_s)
                answered = time.monotonic() - self.started_at
                observation = attempt.observation
                if attempt.status is not None or attempt.timed_out:
                    slowest = max(slowest, attempt.took_s)
                if attempt.status is not None:
                    if first_response is None:
                        first_response = answered
                    if attempt.status == 200:
                        first_healthy, body = answered, attempt.body
                        break
                time.sleep(self.config.poll_interval_s)
        return Startup(
            healthy=first_healthy is not None,
            exited=exited,
            exit_code=exit_code,
            elapsed_s=time.monotonic() - self.started_at,
            first_response_s=first_response,
            first_healthy_s=first_healthy,
            attempts=attempts,
            last_observation=observation,
            slowest_ping_s=slowest,
            ping_body=body,
            logs=self.log_tail(),
            all_logs=self.logs(),
        )

    def terminate(self, grace_s: float | None = None) -> tuple[int | None, float]:
        """SIGTERM; returns (exit code or None if still running after the grace period, seconds taken)."""
        grace = self.config.limits.stop_grace_s if grace_s is None else grace_s
        sent = time.monotonic()
        self.runtime.signal(self.handle.id, "SIGTERM")
        code = self.runtime.wait_exit(self.handle.id, grace)
        return code, time.monotonic() - sent


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

    @functools.cached_property
    def image(self) -> ImageConfig:
        return self.runtime.inspect_image(self.config.image)

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
        try:
            return store.materialize(source)
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
        )
        try:
            # A signal mid-create could let the engine create the container after the cleanup below
            # looked for it: the signal waits until the container is this run's (emulator.interrupts).
            with deferred():
                container = RunningContainer(self.runtime, self.runtime.start(spec), self.config)
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
