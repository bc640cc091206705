"""Frozen configuration, built once at the edge (the CLI or a test) and passed down.

The numbers of SageMaker's hosting contract are named defaults here, in one place.
Nothing in this module reads the environment.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

#: SageMaker's limits, named as the contract names them (shared/spec/hosting-contract.md §1, §3).
STARTUP_HEALTH_CHECK_TIMEOUT_S = 480.0  # first 200 on /ping within 8 minutes
PING_TIMEOUT_S = 2.0  # each /ping attempt
ACCEPT_TIMEOUT_S = 0.25  # accept a socket connection within 250 ms
INVOCATION_TIMEOUT_S = 60.0  # answer /invocations within 60 s
STOP_GRACE_S = 30.0  # SIGTERM, then SIGKILL 30 s later
CONTAINER_PORT = 8080
MAX_PAYLOAD_BYTES = 6_291_456  # request and response body cap for InvokeEndpoint

DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT_ID = "123456789012"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8090


@dataclass(frozen=True)
class ContractLimits:
    """The hosting contract's timings and sizes. Tests lower them; users normally keep them."""

    startup_timeout_s: float = STARTUP_HEALTH_CHECK_TIMEOUT_S
    ping_timeout_s: float = PING_TIMEOUT_S
    accept_timeout_s: float = ACCEPT_TIMEOUT_S
    invocation_timeout_s: float = INVOCATION_TIMEOUT_S
    stop_grace_s: float = STOP_GRACE_S
    container_port: int = CONTAINER_PORT
    max_request_bytes: int = MAX_PAYLOAD_BYTES
    max_response_bytes: int = MAX_PAYLOAD_BYTES

    def replace(self, **changes: object) -> ContractLimits:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ServerConfig:
    """Everything `smlocal serve` needs. Built by emulator.cli, or by tests."""

    state_dir: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    region: str = DEFAULT_REGION
    account_id: str = DEFAULT_ACCOUNT_ID
    limits: ContractLimits = field(default_factory=ContractLimits)
    #: How often readiness polls /ping while a container starts. SageMaker's is unpublished;
    #: ours is short so that InService follows the first 200 closely.
    ping_interval_s: float = 0.05
    #: S3 endpoint for s3:// model data (None: boto3's own resolution, incl. AWS_ENDPOINT_URL_S3).
    s3_endpoint_url: str | None = None
    #: Ask the engine for GPUs for ml.g*/ml.p* instance types (falls back with a warning).
    gpu_instance_prefixes: tuple[str, ...] = ("ml.g", "ml.p", "local_gpu")
    #: Length of a metrics period in policy time (CloudWatch's is one minute); CPU and memory are
    #: sampled once per period.
    metrics_period_s: float = 60.0
    #: `--time-scale`: policy clocks (metric periods, alarm windows, cooldowns) run this many times
    #: faster than the wall clock. Container contract timeouts are never scaled.
    time_scale: float = 1.0
    #: How often a serving instance's /ping is checked (each attempt has the contract's 2 s timeout);
    #: SageMaker's interval is unpublished. A failed ping or an exit takes the instance out of rotation.
    health_check_interval_s: float = 5.0

    def __post_init__(self) -> None:
        if not self.time_scale > 0:
            raise ValueError("time_scale must be positive")

    def real_seconds(self, policy_seconds: float) -> float:
        """Wall-clock seconds of a span of policy time (metric periods, cooldowns)."""
        return policy_seconds / self.time_scale

    @property
    def metrics_period_real_s(self) -> float:
        return self.real_seconds(self.metrics_period_s)

    @property
    def artifacts_dir(self) -> Path:
        return self.state_dir / "artifacts"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"
