"""SageMakerContainer: a testcontainers container run the way SageMaker runs a model container.

    with SageMakerContainer("my-model:latest", model_data="model.tar.gz") as model:
        answer = model.invoke(b'{"inputs": [1, 2]}')
        assert answer.status == 200

What SageMaker does (hosting contract §3), and so what this does:
- `docker run IMAGE serve`: the `serve` argument replaces the image's CMD (`with_command` overrides);
- the model data (a local model.tar.gz, a local folder, `file://` or `s3://`, fetched and extracted
  by emulator.model_data as the emulator does) bind-mounted read-only at /opt/ml/model;
- port 8080 published on 127.0.0.1 only, on a port the engine chooses (`.url`);
- the environment you give (`environment=`, `with_env`) and what SageMaker sets in a single-container
  endpoint's container: SAGEMAKER_SAFE_PORT_RANGE=21000-21999 (SAGEMAKER_MULTI_MODEL=true too for a
  multi-model one, whose `models_dir` is mounted read-only at /opt/ml/models); the hostname
  model.aws.local (both emulator.model.platform_env's, as the emulator's);
- ready when GET /ping answers HTTP 200, 2 s per ping, within the startup limit (PingWaitStrategy);
- `stop()`: SIGTERM, then SIGKILL after the grace period (30 s), then the container is removed.

The docker run arguments come from emulator.runtime.docker_run.create_options, the code the emulator
and `smlocal check` start containers with; stopping and removing go through emulator.runtime's
DockerRuntime. Every container carries the labels smlocal.managed=true, smlocal.role=testcontainer and
this process as its owner (smlocal.owner=check-<pid>, with its host and start time), besides
testcontainers' own (org.testcontainers.session-id): clean up by those, never by image.
Testcontainers' reaper (Ryuk) is started as for any DockerContainer unless
TESTCONTAINERS_RYUK_DISABLED=true (needed where no registry can be reached: its image cannot be pulled,
and start() then raises ReaperUnavailable, which says so).

testcontainers is not a dependency of smlocal itself: `pip install 'smlocal[testcontainers]'`.
Importing this module without it raises ModuleNotFoundError with exactly that line.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

#: What importing this module without testcontainers says (smlocal installs it only with the extra).
MISSING_TESTCONTAINERS = (
    "contract_tests.containers (SageMakerContainer) needs the testcontainers package, which "
    "smlocal installs only with its `testcontainers` extra: pip install 'smlocal[testcontainers]'"
)

try:
    import testcontainers  # noqa: F401 - the one check, before anything imports from it
except ImportError:
    raise ModuleNotFoundError(MISSING_TESTCONTAINERS, name="testcontainers") from None

import httpx
from testcontainers.core.container import DockerContainer
from testcontainers.core.exceptions import ContainerStartException
from testcontainers.core.waiting_utils import WaitStrategy

from contract_tests.container_wait import PingWaitStrategy, published_port
from contract_tests.http_client import container_client
from contract_tests.reaper import ReaperUnavailable, start_reaper
from emulator.config import ContractLimits
from emulator.errors import EngineError
from emulator.model import platform_env
from emulator.model.resources import ModelDataSource
from emulator.process_owner import check_labels
from emulator.runtime import labels as smlocal_labels
from emulator.runtime.base import ContainerSpec, ContainerState
from emulator.runtime.docker import DockerRuntime
from emulator.runtime.docker_images import DockerImages
from emulator.runtime.docker_run import create_options

__all__ = [
    "DEFAULT_CACHE_DIR",
    "FINAL_LOG_LINES",
    "MISSING_TESTCONTAINERS",
    "ROLE",
    "ContainerResponse",
    "ReaperUnavailable",
    "SageMakerContainer",
]

#: smlocal.role of a SageMakerContainer.
ROLE = smlocal_labels.ROLE_TESTCONTAINER
#: How many of its last log lines stop() keeps (final_logs) before it removes the container.
FINAL_LOG_LINES = 1000
#: Where model data is fetched and extracted (a content-addressed cache, shared by every container).
DEFAULT_CACHE_DIR = Path(tempfile.gettempdir()) / "smlocal-containers"


@dataclass(frozen=True)
class ContainerResponse:
    """One HTTP answer of the container (an invocation's or a ping's)."""

    status: int
    headers: httpx.Headers
    body: bytes

    @property
    def content_type(self) -> str | None:
        value: str | None = self.headers.get("content-type")
        return value

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


class SageMakerContainer(DockerContainer):
    """A model container started as SageMaker starts one, with testcontainers' API."""

    def __init__(
        self,
        image: str,
        model_data: str | os.PathLike[str] | ModelDataSource | None = None,
        *,
        environment: Mapping[str, str] | None = None,
        limits: ContractLimits | None = None,
        startup_timeout_s: float | None = None,
        invocation_timeout_s: float | None = None,
        stop_grace_s: float | None = None,
        memory_limit_bytes: int | None = None,
        cpus: float | None = None,
        models_dir: str | os.PathLike[str] | None = None,
        labels: Mapping[str, str] | None = None,
        name: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        s3_client_factory: Callable[[], Any] | None = None,
        docker_client_kw: dict[str, Any] | None = None,
    ) -> None:
        """`limits`: the contract's timings (default SageMaker's); `startup_timeout_s` (the first 200
        from /ping), `invocation_timeout_s` (60 s) and `stop_grace_s` (30 s) override one each.
        `memory_limit_bytes`, `cpus`: the container's limits (none by default). `models_dir`: a
        multi-model container's folder of models. `labels`: more labels (smlocal's are always set).
        `s3_client_factory`: makes the boto3 S3 client for s3:// model data (default: boto3's, which
        honours AWS_ENDPOINT_URL_S3)."""
        super().__init__(image, docker_client_kw=docker_client_kw, env=dict(environment or {}), name=name)
        base = limits or ContractLimits()
        changes = {
            "startup_timeout_s": startup_timeout_s,
            "invocation_timeout_s": invocation_timeout_s,
            "stop_grace_s": stop_grace_s,
        }
        self.limits = base.replace(**{k: v for k, v in changes.items() if v is not None})
        self.model_data = model_data
        self.memory_limit_bytes = memory_limit_bytes
        self.cpus = cpus
        self.models_dir = Path(models_dir) if models_dir is not None else None
        self.extra_labels = dict(labels or {})
        self.cache_dir = Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE_DIR
        self.s3_client_factory = s3_client_factory or _s3_client
        self.container_port = self.limits.container_port
        self.host_ip = "127.0.0.1"
        self._wait_strategy = PingWaitStrategy(self.container_port, self.limits)
        #: The host folder mounted at /opt/ml/model (None until started, or without model data).
        self.model_dir: Path | None = None
        #: The host port 8080 is published on (0 until started).
        self.host_port = 0
        #: How the container ended, once stop() has stopped it (exit code, OOM kill).
        self.final_state: ContainerState | None = None
        #: Its last log lines (FINAL_LOG_LINES), read by stop() before the container was removed.
        self.final_logs = ""
        self._http: httpx.Client | None = None

    # -- starting ------------------------------------------------------------------------------------

    def spec(self, image_id: str) -> ContainerSpec:
        """The ContainerSpec this container starts from (model data already fetched into model_dir)."""
        env = {**self.env, **platform_env.single_container_environment()}
        if self.models_dir is not None:
            env["SAGEMAKER_MULTI_MODEL"] = "true"  # the platform's value wins, as the emulator's
        args: tuple[str, ...] = ("serve",)
        if self._command is not None:  # with_command()
            args = tuple(shlex.split(self._command) if isinstance(self._command, str) else self._command)
        return ContainerSpec(
            image=image_id,
            name=self._name or f"smlocal-tc-{secrets.token_hex(4)}",
            labels={
                **self.extra_labels,
                smlocal_labels.MANAGED: "true",
                smlocal_labels.ROLE: ROLE,
                **check_labels(),
            },
            args=args,
            environment=env,
            model_dir=self.model_dir,
            models_dir=self.models_dir,
            container_port=self.container_port,
            host_ip=self.host_ip,
            hostname=platform_env.HOSTNAME,
            extra_ports=tuple(p for p in self._exposed_ports() if p != self.container_port),
            tmpfs=dict(self.tmpfs),
            memory_limit_bytes=self.memory_limit_bytes,
            cpus=self.cpus,
        )

    def _exposed_ports(self) -> list[int]:
        """Ports given to with_exposed_ports/with_bind_ports (published on 127.0.0.1 too; TCP only)."""
        return [int(port.split("/")[0]) for port in self.ports if not port.endswith("/udp")]

    def _fetch_model_data(self) -> Path | None:
        """The model data fetched and extracted as the emulator does (CreateModel's existence check,
        then the download and safe extraction): ValidationFailed or ModelDataError if it cannot be."""
        if self.model_data is None:
            return None
        from emulator.model_data.store import ArtifactStore

        source = self.model_data
        if not isinstance(source, ModelDataSource):
            source = ModelDataSource(uri=os.fspath(source))
        store = ArtifactStore(self.cache_dir / "artifacts", self.s3_client_factory)
        try:
            store.check_exists(source)
            return store.materialize(source)
        finally:
            store.close()

    def start(self) -> Self:
        """Create and start the container, then wait until it is healthy. On a failed start the
        container is removed at once (SIGKILL, no grace) and the error says why (logs included).
        ReaperUnavailable when testcontainers' Ryuk cannot start (TESTCONTAINERS_RYUK_DISABLED=true)."""
        start_reaper()  # testcontainers' Ryuk, as DockerContainer.start (or ReaperUnavailable)
        client = self.get_docker_client()
        image = DockerImages(lambda: client.client).resolve_image(self.image)  # ImageNotFound
        self.model_dir = self._fetch_model_data()
        spec = self.spec(image.image_id)
        options = create_options(spec)
        if self.volumes:  # with_volume_mapping(): besides the model data
            options["volumes"] = {host: dict(mount) for host, mount in self.volumes.items()}
        if self._network is not None:  # with_network(): besides its ports on 127.0.0.1
            options["network"] = self._network.name
        options.update(self._kwargs)  # with_kwargs() has the last word
        self._container = client.create(spec.image, **options)
        try:
            for transfer in self._transferable_specs:
                self._transfer_into_container(*transfer)
            client.start(self._container)
            self._container.reload()
            self.host_port = published_port(self._container.attrs, self.container_port) or 0
            if self._wait_strategy is not None:
                self._wait_strategy.wait_until_ready(self)
        except BaseException:
            with contextlib.suppress(EngineError):  # the original error is the one to report
                self._runtime().remove(self._container.id)
            self._container = None
            raise
        return self

    def waiting_for(self, strategy: WaitStrategy) -> Self:
        """Replace the wait strategy (PingWaitStrategy by default)."""
        self._wait_strategy = strategy
        return self

    # -- talking to it -------------------------------------------------------------------------------

    def get_container_host_ip(self) -> str:
        """127.0.0.1: the only address its ports are published on."""
        return self.host_ip

    @property
    def url(self) -> str:
        """The container's base URL on the loopback interface (its port 8080)."""
        if self._container is None or not self.host_port:
            raise ContainerStartException("Container is not started")
        return f"http://{self.host_ip}:{self.host_port}"

    def ping(self, timeout_s: float | None = None) -> ContainerResponse:
        """GET /ping (2 s timeout: SageMaker's)."""
        return self._call("GET", "/ping", timeout_s or self.limits.ping_timeout_s)

    def invoke(
        self,
        body: bytes | str,
        content_type: str = "application/json",
        accept: str | None = None,
        *,
        custom_attributes: str | None = None,
        timeout_s: float | None = None,
    ) -> ContainerResponse:
        """POST /invocations as SageMaker forwards InvokeEndpoint (Content-Type, Accept, custom
        attributes); the contract's 60 s timeout unless told. A new connection per call (no idle one
        kept that the container may close meanwhile) from one client, closed by stop(). httpx's
        errors are raised as they are."""
        headers = {"Content-Type": content_type}
        if accept is not None:
            headers["Accept"] = accept
        if custom_attributes is not None:
            headers["X-Amzn-SageMaker-Custom-Attributes"] = custom_attributes
        data = body.encode() if isinstance(body, str) else body
        timeout = timeout_s or self.limits.invocation_timeout_s
        return self._call("POST", "/invocations", timeout, content=data, headers=headers)

    def _call(self, method: str, path: str, timeout_s: float, **kwargs: Any) -> ContainerResponse:
        if self._http is None:  # one client (making one costs tens of ms), no idle connections kept
            self._http = container_client(limits=httpx.Limits(max_keepalive_connections=0))
        response = self._http.request(method, f"{self.url}{path}", timeout=timeout_s, **kwargs)
        return ContainerResponse(response.status_code, response.headers, response.content)

    def logs(self, tail: int | None = None) -> str:
        """stdout and stderr as written (interleaved), all or the last `tail` lines."""
        return self._runtime().logs(self.get_container_id(), tail=tail)

    # -- stopping ------------------------------------------------------------------------------------

    def stop(self, force: bool = True, delete_volume: bool = True, *, grace_s: float | None = None) -> None:
        """SIGTERM, then SIGKILL once the grace period (`grace_s`, default stop_grace_s: 30 s) has
        passed, then remove the container (with its anonymous volumes); final_state and final_logs
        keep how it ended. `force` and `delete_volume`
        are testcontainers' parameters, kept for compatibility: the container is always removed."""
        if self._container is not None:
            runtime = self._runtime()
            container_id = self._container.id
            grace = self.limits.stop_grace_s if grace_s is None else grace_s
            self.final_state = runtime.stop(container_id, grace)
            self.final_logs = runtime.logs(container_id, tail=FINAL_LOG_LINES)
            runtime.remove(container_id)
            self._container = None
        if self._http is not None:
            self._http.close()
            self._http = None
        self.get_docker_client().client.close()

    def _runtime(self) -> DockerRuntime:
        """emulator.runtime's adapter over this container's docker client (engine errors translated)."""
        return DockerRuntime(self.get_docker_client().client)


def _s3_client() -> Any:
    import boto3

    return boto3.session.Session().client("s3")
