"""The cold start of one instance, measured: its phases in order, what dominates, the budget left.

Pure: the hosting fleet and `smlocal check` measure (monotonic clocks around each step) and build a
`ColdStartProfile` from the marks; this module only adds up, compares and words them. The phases are
sequential, and `other` is named explicitly: the wall time not covered by any measured phase, so the
phases always add up to the wall time (from the deploy's start to the first HTTP 200 from /ping).

    image resolution       the image name resolved on the engine (its size with it)
    model data download    bytes fetched, seconds, throughput; "cached" when the digest cache had it
    model data extraction  the archive unpacked (0 for uncompressed model data)
    container start        the engine's create and start
    first TCP accept       start -> the first connect to the published port that got an HTTP answer
                           (docker-proxy accepts TCP with nothing listening: only an answer counts)
    first /ping 200        that first answer -> the first 200
    other                  the rest of the wall time (smlocal's own work between the phases)

The first invocation is recorded later, apart from the sum: seconds from ready to the completion of
the instance's first call.

[U] SageMaker publishes no such profile; the words, the advice and the budget arithmetic are smlocal's.
The health check budget (ContainerStartupHealthCheckTimeoutInSeconds, 8 minutes by default) counts
from the container's start, as SageMaker's "within 8 minutes of startup" and smlocal's wait do; model
data has its own budget (ModelDataDownloadTimeoutInSeconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

IMAGE = "image resolution"
DOWNLOAD = "model data download"
EXTRACTION = "model data extraction"
CONTAINER = "container start"
ACCEPT = "first TCP accept"
PING = "first /ping 200"
OTHER = "other"
ORDER = (IMAGE, DOWNLOAD, EXTRACTION, CONTAINER, ACCEPT, PING, OTHER)
#: the phases the health check budget counts (from the container's start)
HEALTH_PHASES = (ACCEPT, PING)
#: the phases ModelDataDownloadTimeoutInSeconds bounds
MODEL_DATA_PHASES = (DOWNLOAD, EXTRACTION)

#: what to consider when a phase dominates [U]
ADVICE: Mapping[str, str] = {
    IMAGE: "consider a smaller image: SageMaker pulls it onto every new instance",
    DOWNLOAD: "consider uncompressed model data or a smaller artifact",
    EXTRACTION: "consider uncompressed model data (CompressionType None): nothing to extract",
    CONTAINER: "the engine is slow to create the container: check `docker info` and the image's size",
    ACCEPT: "the server takes this long to listen: load the model after it listens, trim imports",
    PING: "/ping says not ready this long: the model loads after the server listens",
    OTHER: "smlocal's own work between the phases",
}
#: the download's advice when nothing was extracted (CompressionType None): compressing is no remedy
UNCOMPRESSED_DOWNLOAD_ADVICE = (
    "the data is already uncompressed: a smaller artifact (fewer or quantized weights) is what shortens it"
)
#: a start quicker than this gets no advice, whatever dominates it [U]
QUICK_START_S = 2.0
QUICK = "a quick start: nothing to act on"


def human_bytes(n: float) -> str:
    """Decimal units, as S3 and network figures are given: 18 GB, 250 MB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"
    return f"{n:.0f} B"


def human_seconds(s: float) -> str:
    if s >= 10:
        return f"{s:.0f} s"
    if s >= 0.1:
        return f"{s:.1f} s"
    return f"{s * 1000:.0f} ms"


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float
    #: bytes the phase moved (the image's size, the download's bytes), when it has any
    bytes: int | None = None
    #: "cached" (the digest cache had the model data), "from the plan" (resolved earlier), ...
    note: str = ""

    @property
    def throughput(self) -> float | None:
        """Bytes per second of a download that moved bytes."""
        if self.name != DOWNLOAD or not self.bytes or self.seconds <= 0:
            return None
        return self.bytes / self.seconds

    def detail(self) -> str:
        """What the phase did, in a few words: `18 GB at 250 MB/s`, `cached`, `1.2 GB image`."""
        parts: list[str] = []
        if self.note:
            parts.append(self.note)
        if self.bytes is not None and self.name == DOWNLOAD and self.bytes:
            rate = self.throughput
            parts.append(human_bytes(self.bytes) + (f" at {human_bytes(rate)}/s" if rate else ""))
        elif self.bytes is not None and self.name == IMAGE:
            parts.append(f"{human_bytes(self.bytes)} image")
        return ", ".join(parts)


@dataclass(frozen=True)
class ColdStartProfile:
    """One instance's start. `phases` hold every measured phase in ORDER, then OTHER (the rest)."""

    endpoint: str
    variant: str
    instance_id: str
    #: when the deploy's start was (epoch seconds, for the reader)
    started_at: float
    wall_s: float
    phases: tuple[Phase, ...]
    #: ContainerStartupHealthCheckTimeoutInSeconds (or the server's default)
    health_budget_s: float
    #: ModelDataDownloadTimeoutInSeconds (or the default); None: no model data budget applies
    model_data_budget_s: float | None = None
    #: seconds from ready to the completion of the first invocation (None: none yet)
    first_invocation_s: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        endpoint: str,
        variant: str,
        instance_id: str,
        started_at: float,
        wall_s: float,
        measured: list[Phase],
        health_budget_s: float,
        model_data_budget_s: float | None = None,
    ) -> ColdStartProfile:
        """The measured phases in ORDER, with OTHER the wall time they leave (never below 0)."""
        rank = {name: i for i, name in enumerate(ORDER)}
        ordered = sorted((p for p in measured if p.name != OTHER), key=lambda p: rank.get(p.name, 99))
        rest = max(0.0, wall_s - sum(p.seconds for p in ordered))
        phases = (*ordered, Phase(OTHER, rest))
        return cls(
            endpoint, variant, instance_id, started_at, wall_s, phases, health_budget_s, model_data_budget_s
        )

    def phase(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)

    @property
    def total_s(self) -> float:
        """The phases added up (equal to wall_s unless a clock went backwards)."""
        return sum(p.seconds for p in self.phases)

    def share(self, phase: Phase) -> float:
        return phase.seconds / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def dominant(self) -> Phase:
        return max(self.phases, key=lambda p: p.seconds)

    @property
    def model_data_cached(self) -> bool:
        download = self.phase(DOWNLOAD)
        return download is not None and download.note == "cached"

    def dominance_text(self) -> str:
        """`model data download 71 % of 94 s: 18 GB at 250 MB/s; consider uncompressed model data or
        a smaller artifact`."""
        top = self.dominant
        text = f"{top.name} {self.share(top) * 100:.0f} % of {human_seconds(self.wall_s)}"
        detail = top.detail()
        if detail:
            text += f": {detail}"
        if self.wall_s < QUICK_START_S:
            return f"{text}; {QUICK}"
        if top.name == DOWNLOAD and top.bytes and not self._seconds_of(EXTRACTION):
            return f"{text}; {UNCOMPRESSED_DOWNLOAD_ADVICE}"
        return f"{text}; {ADVICE[top.name]}" if top.name in ADVICE else text

    def _seconds_of(self, name: str) -> float:
        return sum(p.seconds for p in self.phases if p.name == name)

    @property
    def health_used_s(self) -> float:
        return sum(p.seconds for p in self.phases if p.name in HEALTH_PHASES)

    def budget_text(self) -> str:
        """How much of the health check budget (and the model data budget) the start used."""
        used, budget = self.health_used_s, self.health_budget_s
        text = (
            f"health check budget: {human_seconds(used)} of {_budget_name(budget)} used, "
            f"{human_seconds(max(0.0, budget - used))} left"
        )
        if self.model_data_budget_s is not None:
            data = sum(p.seconds for p in self.phases if p.name in MODEL_DATA_PHASES)
            text += (
                f"; model data budget: {human_seconds(data)} of {_budget_name(self.model_data_budget_s)} used"
            )
        return text

    def log_lines(self) -> list[str]:
        """One line per phase, then the summary (the instance's cold-start log stream)."""
        lines = []
        for p in self.phases:
            detail = p.detail()
            lines.append(
                f"cold start: {p.name} {p.seconds:.3f} s ({self.share(p) * 100:.1f} %)"
                + (f" {detail}" if detail else "")
            )
        lines.append(
            f"cold start: ready after {self.wall_s:.3f} s; {self.dominance_text()}; {self.budget_text()}"
        )
        return lines

    def phases_text(self) -> str:
        """Every phase on one line: `image resolution 0.01 s, model data download 2.1 s (24 MB at
        11 MB/s), ...` (the phases that took no time and say nothing left out)."""
        parts = []
        for p in self.phases:
            detail = p.detail()
            if p.seconds < 0.0005 and not detail:
                continue
            parts.append(f"{p.name} {human_seconds(p.seconds)}" + (f" ({detail})" if detail else ""))
        return f"ready after {human_seconds(self.wall_s)}: " + ", ".join(parts)

    def rows(self) -> list[tuple[str, str, str, str]]:
        """The profile as a table's rows: phase, seconds, share of the wall time, detail; then the
        total (the wall time) and the first invocation when there was one."""
        rows = [(p.name, f"{p.seconds:.3f}", f"{self.share(p) * 100:.1f} %", p.detail()) for p in self.phases]
        rows.append(("ready (wall time)", f"{self.wall_s:.3f}", "100 %", ""))
        if self.first_invocation_s is not None:
            rows.append(
                ("first invocation", f"{self.first_invocation_s:.3f}", "", "after ready, not in the sum")
            )
        return rows

    def with_first_invocation(self, seconds: float) -> ColdStartProfile:
        return replace(self, first_invocation_s=seconds)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ColdStartProfile:
        """A profile back from to_json (`smlocal profile` reads the admin route's)."""
        phases = tuple(
            Phase(p["Name"], float(p["Seconds"]), p.get("Bytes"), p.get("Note", "")) for p in data["Phases"]
        )
        return cls(
            data["EndpointName"],
            data["VariantName"],
            data["InstanceId"],
            float(data["StartedAt"]),
            float(data["WallSeconds"]),
            phases,
            float(data["HealthCheckBudgetSeconds"]),
            data.get("ModelDataBudgetSeconds"),
            data.get("FirstInvocationSeconds"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "EndpointName": self.endpoint,
            "VariantName": self.variant,
            "InstanceId": self.instance_id,
            "StartedAt": self.started_at,
            "WallSeconds": round(self.wall_s, 6),
            "Phases": [
                {
                    "Name": p.name,
                    "Seconds": round(p.seconds, 6),
                    "Share": round(self.share(p), 4),
                    **({"Bytes": p.bytes} if p.bytes is not None else {}),
                    **({"BytesPerSecond": round(t)} if (t := p.throughput) else {}),
                    **({"Note": p.note} if p.note else {}),
                }
                for p in self.phases
            ],
            "Dominant": self.dominant.name,
            "Summary": self.dominance_text(),
            "Budget": self.budget_text(),
            "HealthCheckBudgetSeconds": self.health_budget_s,
            "HealthCheckSecondsLeft": round(max(0.0, self.health_budget_s - self.health_used_s), 6),
            "ModelDataBudgetSeconds": self.model_data_budget_s,
            "ModelDataCached": self.model_data_cached,
            "FirstInvocationSeconds": self.first_invocation_s,
            **dict(self.extra),
        }


def _budget_name(seconds: float) -> str:
    minutes = seconds / 60
    if seconds >= 60 and minutes == int(minutes):
        return f"{seconds:g} s ({minutes:g} min)"
    return f"{seconds:g} s"
