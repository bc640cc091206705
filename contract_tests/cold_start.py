"""The cold start of the check run's first container, profiled as the emulator profiles an instance's
(emulator/model/cold_start.py): the image's inspection (its size), the model data's preparation
(download and extraction through the emulator's own ArtifactStore, or `cached`), the container's
start, the first connect to its port that got an HTTP answer, and the first 200 from /ping; what
dominates, and how much of the startup budget (8 minutes, or --startup-timeout) is left.

Each phase is measured where it happens (Target, RunningContainer); the run's other checks between
them (the image checks run after the model data's) are not part of the start and not counted. The
profile is a function of the Target alone, so any report (the console, --json, a preflight verdict)
can print it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from rich.text import Text

from contract_tests.preflight import Judgement
from emulator.config import MODEL_DATA_DOWNLOAD_TIMEOUT_S
from emulator.model import cold_start
from emulator.model.cold_start import ColdStartProfile, Phase
from emulator.model_data.timings import MaterializeTimings

if TYPE_CHECKING:
    from contract_tests.check_config import CheckConfig
    from contract_tests.running import Startup
    from emulator.runtime.base import ImageConfig


@dataclass
class FirstStart:
    """What the Target measured of its first (shared) container's start, seconds."""

    image_s: float | None = None
    #: the model data property's whole evaluation (the existence check included)
    model_data_s: float | None = None
    #: None: no model data given (an empty /opt/ml/model), or it came from a multi-model prefix
    model_data: MaterializeTimings | None = None
    container_start_s: float | None = None
    startup: Startup | None = None


class Target(Protocol):
    """What the profile needs of contract_tests.target.Target (which imports this module)."""

    measured: FirstStart
    config: CheckConfig

    @property
    def image(self) -> ImageConfig: ...


def profile(target: Target) -> ColdStartProfile | None:
    """The run's cold start; None when the shared container never answered 200 (or never started)."""
    measured = target.measured
    startup = measured.startup
    if startup is None or startup.first_healthy_s is None or measured.container_start_s is None:
        return None
    image_s = measured.image_s or 0.0
    data_s = measured.model_data_s or 0.0
    answered = startup.first_response_s if startup.first_response_s is not None else startup.first_healthy_s
    phases = [Phase(cold_start.IMAGE, image_s, target.image.size_bytes)]
    if measured.model_data is not None:
        phases.extend(measured.model_data.phases(data_s))
    phases += [
        Phase(cold_start.CONTAINER, measured.container_start_s),
        Phase(cold_start.ACCEPT, answered),
        Phase(cold_start.PING, startup.first_healthy_s - answered),
    ]
    wall = image_s + data_s + measured.container_start_s + startup.first_healthy_s
    return ColdStartProfile.build(
        "smlocal check",
        target.config.image,
        "first container",
        0.0,
        wall,
        phases,
        target.config.limits.startup_timeout_s,
        MODEL_DATA_DOWNLOAD_TIMEOUT_S if measured.model_data is not None else None,
    )


def profile_json(target: Target) -> dict[str, Any] | None:
    """The profile as the --json report's `cold_start` member (the admin route's shape)."""
    found = profile(target)
    if found is None:
        return None
    data = found.to_json()
    for key in ("EndpointName", "VariantName", "InstanceId", "StartedAt"):
        data.pop(key, None)
    return data


def judgement(target: Target) -> Judgement | None:
    """The preflight verdict's view of the start: accepted while it fits SageMaker's budgets (the
    health check's from the container's start; the model data's for download and extraction)."""
    found = profile(target)
    if found is None:
        return None  # start.healthy says why
    model_data_s = sum(p.seconds for p in found.phases if p.name in cold_start.MODEL_DATA_PHASES)
    over = []
    if found.health_used_s > found.health_budget_s:
        over.append(f"the first 200 came {found.health_used_s:.0f} s after the start")
    if found.model_data_budget_s is not None and model_data_s > found.model_data_budget_s:
        over.append(f"model data took {model_data_s:.0f} s of {found.model_data_budget_s:g} s")
    return Judgement("cold start", not over, "; ".join(over))


def profile_texts(target: Target) -> list[Text]:
    """Three lines (the console report stays one screen): the phases, what dominates, the budget
    left; or why there is no profile. --json has the whole profile."""
    found = profile(target)
    if found is None:
        if target.measured.startup is None:
            return []
        return [Text("cold start: no profile (the container never answered 200 on /ping)")]
    return [
        Text(f"cold start: {found.phases_text()}"),
        Text(f"cold start: {found.dominance_text()}", style="bold"),
        Text(f"cold start: {found.budget_text()}"),
    ]
