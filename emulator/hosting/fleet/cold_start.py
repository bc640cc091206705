"""The cold start of every instance, measured (the profile itself is emulator/model/cold_start.py's).

`PlanSetup` holds a variant's plan phases as Deployments._plan measures them (the deploy's start,
image resolution and its size, the model data's `MaterializeTimings`); every instance started by
that launch shares them. An instance started later from the same plan (a scale-out, a replacement,
a serverless cold start) gets `PlanSetup.later()`: its clock starts at its own start, the image was
resolved before and the model data is cached. `InstanceClock` adds the container's start, the first
HTTP answer on its port and the first 200 from /ping; `ColdStarts` keeps the profiles (in memory: a
restart adopts its containers without one) and writes each as lines of the instance's own log
stream, `{variant}/{instance-id}/_cold-start` [U] (modelled on SageMaker's `data-log` platform stream;
the underscore, as in the platform's `_smlocal`, marks smlocal's own streams and cannot clash with a
ContainerHostname, which names a multi-container instance's streams there).

The first invocation costs the invoke path one attribute check (`Instance.first_call`), then this
callable runs once.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from emulator.hosting.fleet.plan import VariantPlan
from emulator.model import cold_start
from emulator.model.cold_start import ColdStartProfile, Phase
from emulator.model_data.timings import MaterializeTimings

log = logging.getLogger(__name__)

#: profiles kept per endpoint, and endpoints kept (the oldest go first)
MAX_PER_ENDPOINT = 50
MAX_ENDPOINTS = 200
COLD_START_STREAM = "_cold-start"


@dataclass
class PlanSetup:
    """A variant's plan phases (monotonic seconds), filled while Deployments plans it."""

    started: float = field(default_factory=time.monotonic)
    started_at: float = field(default_factory=time.time)
    image_s: float | None = None
    image_bytes: int | None = None
    #: None: the variant has no model data (or fetches its models on demand: multi-model)
    model_data: MaterializeTimings | None = None
    model_data_budget_s: float | None = None
    #: an instance started from a plan made earlier (its phases are not this instance's)
    later: bool = False

    @classmethod
    def for_later(cls, plan: VariantPlan) -> PlanSetup:
        """An instance started from a plan made before: its own start is its cold start's beginning."""
        has_data = not plan.model.multi_model and any(
            c.model_data is not None for c in plan.model.all_containers
        )
        return cls(later=True, model_data=MaterializeTimings(cached=True) if has_data else None)

    def add_image(self, size_bytes: int | None, seconds: float) -> None:
        """An image resolved or inspected for the plan (a multi-container plan has several)."""
        self.image_s = (self.image_s or 0.0) + seconds
        if size_bytes is not None:
            self.image_bytes = (self.image_bytes or 0) + size_bytes

    def phases(self) -> list[Phase]:
        if self.later:
            phases = [Phase(cold_start.IMAGE, 0.0, note="resolved at the deploy")]
        else:
            phases = [Phase(cold_start.IMAGE, self.image_s or 0.0, self.image_bytes)]
        if self.model_data is not None:
            phases.extend(self.model_data.phases())
        return phases


@dataclass(eq=False)
class InstanceClock:
    """One instance's start: its plan's phases and the engine's start (monotonic seconds)."""

    setup: PlanSetup
    container_began: float
    container_started: float

    def profile(
        self,
        endpoint: str,
        variant: str,
        instance_id: str,
        first_answer: float | None,
        healthy: float,
        health_budget_s: float,
    ) -> ColdStartProfile:
        """`first_answer`, `healthy`: monotonic times of the first HTTP answer and the first 200."""
        answered = first_answer if first_answer is not None else healthy
        phases = [
            *self.setup.phases(),
            Phase(cold_start.CONTAINER, self.container_started - self.container_began),
            Phase(cold_start.ACCEPT, max(0.0, answered - self.container_started)),
            Phase(cold_start.PING, max(0.0, healthy - answered)),
        ]
        budget = None if self.setup.model_data is None else self.setup.model_data_budget_s
        return ColdStartProfile.build(
            endpoint,
            variant,
            instance_id,
            self.setup.started_at,
            healthy - self.setup.started,
            phases,
            health_budget_s,
            budget,
        )


class ColdStarts:
    """The profiles of the instances started since the server started, per endpoint."""

    def __init__(self, logs_dir: Path) -> None:
        self._logs_dir = logs_dir
        self._by_endpoint: OrderedDict[str, OrderedDict[str, ColdStartProfile]] = OrderedDict()

    def record(self, profile: ColdStartProfile) -> None:
        kept = self._by_endpoint.setdefault(profile.endpoint, OrderedDict())
        self._by_endpoint.move_to_end(profile.endpoint)
        kept[profile.instance_id] = profile
        while len(kept) > MAX_PER_ENDPOINT:
            kept.popitem(last=False)
        while len(self._by_endpoint) > MAX_ENDPOINTS:
            self._by_endpoint.popitem(last=False)
        self._write(profile, profile.log_lines())
        log.info("%s/%s: %s", profile.endpoint, profile.instance_id, profile.dominance_text())

    def first_invocation(self, endpoint: str, instance_id: str, seconds: float) -> None:
        kept = self._by_endpoint.get(endpoint)
        if kept is not None and instance_id in kept:
            kept[instance_id] = kept[instance_id].with_first_invocation(seconds)

    def profiles(self, endpoint: str) -> list[ColdStartProfile]:
        """Oldest first."""
        return list(self._by_endpoint.get(endpoint, {}).values())

    def stream_path(self, endpoint: str, variant: str, instance_id: str) -> Path:
        return self._logs_dir / endpoint / variant / instance_id / f"{COLD_START_STREAM}.log"

    def _write(self, profile: ColdStartProfile, lines: list[str]) -> None:
        path = self.stream_path(profile.endpoint, profile.variant, profile.instance_id)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            with path.open("a", encoding="utf-8") as fh:
                fh.writelines(f"{stamp} {line}\n" for line in lines)
        except OSError as exc:  # a profile that cannot be logged is still kept
            log.warning("could not write %s: %s", path, exc)
