"""What one `smlocal check` run is told (the image, its model data, payloads, limits, the profile): the
frozen configuration every check reads, built once at the edge (cli.py, plugin.py)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from emulator.config import ContractLimits

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
    #: `--instance-type`: the containers get its memory limit, CPU share and GPUs, and image.architecture
    #: judges the image against it (preflight.py); None: no limits, image.architecture SKIPPED.
    instance_type: str | None = None
    #: `--deploy-as`: the image reference CreateModel will be given; image.registry judges it (None: SKIPPED).
    deploy_as: str | None = None
    #: `--region`: the endpoint's region for image.registry (None: an ECR reference's own region).
    region: str | None = None
    #: `--repository-access-mode`: the container's ImageConfig RepositoryAccessMode (None: Platform).
    repository_access_mode: str | None = None

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
