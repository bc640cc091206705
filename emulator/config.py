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
#: InvokeEndpointWithResponseStream's limits: SageMaker publishes none [U] (docs/streaming.md).
STREAM_FIRST_BYTE_TIMEOUT_S = 60.0  # the first byte of the body, as InvokeEndpoint's 60 s answer
STREAM_IDLE_TIMEOUT_S = 60.0  # the longest silence between two parts
STREAM_TIMEOUT_S = 600.0  # the whole answer, first byte to last
#: Serverless (spec §7): model download and the first 200 on /ping within 3 minutes of a cold start.
SERVERLESS_STARTUP_TIMEOUT_S = 180.0
#: [U] How long a serverless endpoint's container may stay idle before it is stopped (policy seconds:
#: scaled by --time-scale). SageMaker does not publish its figure; `smlocal serve --serverless-idle`.
SERVERLESS_IDLE_S = 300.0
#: Serverless (spec §7): the container image may be at most 10 GB (as the contract tester counts it).
SERVERLESS_IMAGE_LIMIT_BYTES = 10 * 1024**3

#: Model data archives (untrusted input, extracted on the host): smlocal's own limits, not SageMaker's.
ARCHIVE_MAX_HEADER_BYTES = 1 << 20  # one PAX extended header or GNU long-name/long-link record
ARCHIVE_MAX_ENTRIES = 100_000  # members (files, directories, links) of one archive
ARCHIVE_MAX_EXTRACTED_BYTES = 100 * 1024**3  # total size of the extracted files
ARCHIVE_MAX_RATIO = 200.0  # decompressed / compressed bytes, checked while streaming
ARCHIVE_RATIO_GRACE_BYTES = 32 << 20  # the ratio is only checked past this many decompressed bytes
ARCHIVE_MAX_TRAILING_BYTES = 1 << 20  # decompressed bytes after the end-of-archive marker
#: ModelDataDownloadTimeoutInSeconds when a variant gives none (SageMaker's default is unpublished;
#: its maximum is used so that no deployment fails here that would not fail there).
MODEL_DATA_DOWNLOAD_TIMEOUT_S = 3600.0

#: [U] The instances of one instance type the account may use for endpoints (SageMaker's quota is per
#: type and per account, often single digits for new accounts; smlocal's bounds the containers one
#: server starts). `smlocal serve --instance-quota` (emulator/commands/quota.py).
DEFAULT_INSTANCE_QUOTA = 20

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
    stream_first_byte_timeout_s: float = STREAM_FIRST_BYTE_TIMEOUT_S
    stream_idle_timeout_s: float = STREAM_IDLE_TIMEOUT_S
    stream_timeout_s: float = STREAM_TIMEOUT_S
    serverless_startup_timeout_s: float = SERVERLESS_STARTUP_TIMEOUT_S

    def replace(self, **changes: object) -> ContractLimits:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ArchiveLimits:
    """Bounds on extracting one model data archive (memory, disk, entries); `smlocal serve` options."""

    max_header_bytes: int = ARCHIVE_MAX_HEADER_BYTES
    max_entries: int = ARCHIVE_MAX_ENTRIES
    max_extracted_bytes: int = ARCHIVE_MAX_EXTRACTED_BYTES
    max_ratio: float = ARCHIVE_MAX_RATIO
    ratio_grace_bytes: int = ARCHIVE_RATIO_GRACE_BYTES
    max_trailing_bytes: int = ARCHIVE_MAX_TRAILING_BYTES

    def replace(self, **changes: object) -> ArchiveLimits:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ServerConfig:
    """Everything `smlocal serve` needs. Built by emulator.commands.server, or by tests."""

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
    #: SNS endpoint for asynchronous inference's notifications (None: boto3's own resolution).
    sns_endpoint_url: str | None = None
    #: Each container of an endpoint runs with its instance type's memory limit, CPU share and GPUs
    #: (hosting/fleet/instance_limits.py); `--no-instance-limits` turns it off (False).
    instance_limits: bool = True
    #: Length of a metrics period in policy time (CloudWatch's is one minute); CPU and memory are
    #: sampled once per period.
    metrics_period_s: float = 60.0
    #: `--time-scale`: policy clocks (metric periods, alarm windows, cooldowns) run this many times
    #: faster than the wall clock. Container contract timeouts are never scaled.
    time_scale: float = 1.0
    #: How often a serving instance's /ping is checked (each attempt has the contract's 2 s timeout);
    #: SageMaker's interval is unpublished. A failed ping or an exit takes the instance out of rotation.
    health_check_interval_s: float = 5.0
    archive_limits: ArchiveLimits = field(default_factory=ArchiveLimits)
    #: Local directories that may be model data (mounted as they are, without a copy); a directory
    #: given as model data must lie inside one of them. None: the working directory the server was
    #: started in and the system temp directory (`--allow-local-model-dir` replaces the default).
    local_model_dirs: tuple[Path, ...] | None = None
    #: Test-only: ModelDataDownloadTimeoutInSeconds (the variant's or the default) is multiplied by
    #: this, so a test can prove the API value is honoured without waiting a minute. Keep 1.0.
    model_data_timeout_scale: float = 1.0
    #: `--iam-policies FILE`: identity-based IAM policies that InvokeEndpoint is authorized against
    #: (read when the app is built; the format is in emulator/model/iam_access.py). None: no checks.
    iam_policies_file: Path | None = None
    #: DiskUtilization's denominator: ML storage volume GB per instance type, over the table
    #: INSTANCE_VOLUME_GB below (e.g. (("ml.m5.large", 1.0),) to see a small write move the metric).
    instance_volume_gb: tuple[tuple[str, float], ...] = ()
    #: A multi-model endpoint's request window: how long an invocation waits for its model to be
    #: downloaded and loaded before it answers 429 ModelNotReadyException (loading goes on, up to
    #: MODEL_LOAD_LIMIT_S). SageMaker's is the 60 s invocation window; `--model-load-window`.
    model_load_window_s: float = 60.0
    #: The multi-model endpoints' artifact cache on the host (GiB, `--multi-model-cache-gb`): beyond it
    #: the least recently used extracted models no load is using are deleted (smlocal's own) [U].
    multi_model_cache_gb: float = 20.0
    #: Memory per instance for multi-model endpoints (GB per instance type) over the instance type
    #: table's (emulator/model/instance_types.py): the budget of loaded models (docs/multi-model.md).
    instance_memory_gb: tuple[tuple[str, float], ...] = ()
    #: `--serverless-idle`: a serverless endpoint's container is stopped after this many policy
    #: seconds without a request (the next one is a cold start); ProvisionedConcurrency keeps it.
    serverless_idle_s: float = SERVERLESS_IDLE_S
    #: A serverless variant's image over this size fails CreateEndpoint (tests lower it).
    serverless_image_limit_bytes: int = SERVERLESS_IMAGE_LIMIT_BYTES
    #: `--instance-quota`: instances per instance type for endpoint usage (emulator/model/quota.py),
    #: and the types with a limit of their own.
    instance_quota: int = DEFAULT_INSTANCE_QUOTA
    instance_quota_by_type: tuple[tuple[str, int], ...] = ()
    #: Which image references CreateModel accepts (emulator/model/image_registry.RegistryRule's values):
    #: "local-warns" (default: SageMaker's rule, a local tag accepted with a warning in the endpoint's
    #: log), "strict" (`--strict-images`: local tags refused too), "any" (`--any-registry`).
    registry_rule: str = "local-warns"

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


#: The ML storage volume of a hosting instance, GB (counted as 2**30 bytes), by instance type:
#: DiskUtilization's denominator (docs/metrics.md). Types with NVMe instance storage use it instead of
#: an EBS volume (their instance store, per the EC2 specifications); every other type gets
#: DEFAULT_INSTANCE_VOLUME_GB ([U]: SageMaker's default for hosting is unpublished; VolumeSizeInGB,
#: 1-512, overrides it there). ServerConfig.instance_volume_gb overrides both.
DEFAULT_INSTANCE_VOLUME_GB = 30.0
_INSTANCE_STORE_GB = """
ml.g4dn  xlarge=125 2xlarge=225 4xlarge=225 8xlarge=900 12xlarge=900 16xlarge=900
ml.g5    xlarge=250 2xlarge=450 4xlarge=600 8xlarge=900 12xlarge=3800 16xlarge=1900 24xlarge=3800
ml.g5    48xlarge=7600
ml.p3dn  24xlarge=1800
ml.p4d   24xlarge=8000
ml.p5    48xlarge=30720
ml.m5d   large=75 xlarge=150 2xlarge=300 4xlarge=600 12xlarge=1800 24xlarge=3600
ml.r5d   large=75 xlarge=150 2xlarge=300 4xlarge=600 12xlarge=1800 24xlarge=3600
ml.c5d   large=50 xlarge=100 2xlarge=200 4xlarge=400 9xlarge=900 18xlarge=1800
"""
INSTANCE_VOLUME_GB: dict[str, float] = {
    f"{family}.{size}": float(gb)
    for family, *sizes in (line.split() for line in _INSTANCE_STORE_GB.strip().splitlines())
    for size, gb in (entry.split("=") for entry in sizes)
}


def has_instance_storage(instance_type: str | None) -> bool:
    """Whether instances of this type come with NVMe instance storage, which SageMaker uses instead of
    an EBS volume (so a variant's VolumeSizeInGB is refused): the types of INSTANCE_VOLUME_GB, and any
    family with a "d" (c5d, g4dn, p4d, ...) or of the g5, g6, p5 and trn lines."""
    if not instance_type:
        return False
    if instance_type in INSTANCE_VOLUME_GB:
        return True
    parts = instance_type.split(".")
    family = parts[1] if len(parts) == 3 and parts[0] == "ml" else ""
    return "d" in family or family.startswith(("g5", "g6", "p5", "trn"))


#: How long a multi-model endpoint goes on downloading and loading a model after the request that
#: asked for it gave up (spec §5: "up to 360 s").
MODEL_LOAD_LIMIT_S = 360.0


def instance_volume_bytes(
    config: ServerConfig, instance_type: str | None, volume_size_gb: int | None = None
) -> float:
    """The storage volume of one instance of `instance_type`, bytes (DiskUtilization's denominator):
    the variant's VolumeSizeInGB when it has one, else ServerConfig.instance_volume_gb's, else the
    type's instance store or the default."""
    if volume_size_gb is not None:
        return float(volume_size_gb) * 2**30
    gb = dict(config.instance_volume_gb).get(instance_type or "")
    if gb is None:
        gb = INSTANCE_VOLUME_GB.get(instance_type or "", DEFAULT_INSTANCE_VOLUME_GB)
    return float(gb) * 2**30
