"""CloudWatch metric alarms, pure: definitions, states and CloudWatch's consistency rules for them.

The evaluation CloudWatch documents is emulator.model.alarm_evaluation's; the texts clients see are
emulator.model.alarm_messages'. docs/cloudwatch.md.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

from emulator.errors import ValidationFailed

STATISTICS = ("SampleCount", "Average", "Sum", "Minimum", "Maximum")
#: CloudWatch's longest evaluation window (EvaluationPeriods x Period), one day.
MAX_WINDOW_S = 86_400
#: The evaluation range reads this many alarm periods beyond EvaluationPeriods [U].
EXTRA_RANGE = 2
UNCHECKED = "Unchecked: Initial alarm creation"


class AlarmState(enum.StrEnum):
    OK = "OK"
    ALARM = "ALARM"
    INSUFFICIENT_DATA = "INSUFFICIENT_DATA"


class Comparison(enum.StrEnum):
    GE = "GreaterThanOrEqualToThreshold"
    GT = "GreaterThanThreshold"
    LT = "LessThanThreshold"
    LE = "LessThanOrEqualToThreshold"

    @property
    def text(self) -> str:
        return _COMPARISON_TEXT[self]


_COMPARISON_TEXT = {
    Comparison.GE: "greater than or equal to",
    Comparison.GT: "greater than",
    Comparison.LT: "less than",
    Comparison.LE: "less than or equal to",
}


class TreatMissing(enum.StrEnum):
    MISSING = "missing"
    NOT_BREACHING = "notBreaching"
    BREACHING = "breaching"
    IGNORE = "ignore"


class HistoryType(enum.StrEnum):
    CONFIGURATION = "ConfigurationUpdate"
    STATE = "StateUpdate"
    ACTION = "Action"


@dataclass(frozen=True)
class Metric:
    namespace: str
    name: str
    dimensions: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class AlarmSpec:
    """What PutMetricAlarm says (a metric alarm on one metric and a static threshold)."""

    name: str
    metric: Metric
    statistic: str
    period: int  # policy seconds
    evaluation_periods: int
    threshold: float
    comparison: Comparison
    datapoints_to_alarm: int | None = None
    treat_missing_data: TreatMissing | None = None  # None: CloudWatch's default, missing
    unit: str | None = None
    description: str | None = None
    actions_enabled: bool = True
    ok_actions: tuple[str, ...] = ()
    alarm_actions: tuple[str, ...] = ()
    insufficient_data_actions: tuple[str, ...] = ()

    @property
    def m(self) -> int:
        return self.evaluation_periods if self.datapoints_to_alarm is None else self.datapoints_to_alarm

    @property
    def treat_missing(self) -> TreatMissing:
        return self.treat_missing_data or TreatMissing.MISSING

    def actions(self, state: AlarmState) -> tuple[str, ...]:
        if state is AlarmState.ALARM:
            return self.alarm_actions
        if state is AlarmState.OK:
            return self.ok_actions
        return self.insufficient_data_actions


@dataclass(frozen=True)
class StateRecord:
    value: AlarmState
    reason: str
    reason_data: str | None
    updated: datetime  # StateUpdatedTimestamp
    transitioned: datetime  # StateTransitionedTimestamp


@dataclass(frozen=True)
class MetricAlarm:
    spec: AlarmSpec
    arn: str
    configuration_updated: datetime
    state: StateRecord


@dataclass(frozen=True)
class HistoryItem:
    alarm_name: str
    timestamp: datetime
    item_type: HistoryType
    summary: str
    data: str


@dataclass(frozen=True)
class Window:
    """One datapoint of the evaluation range: the wall-clock start of its period, its value (None:
    missing) and sample count."""

    start: datetime
    value: float | None
    sample_count: float = 0.0


@dataclass(frozen=True)
class Verdict:
    state: AlarmState | None  # None: keep the current state
    reason: str
    reason_data: str | None
    newest: float | None  # the newest real datapoint evaluated (what scaling actions are given)


def alarm_arn(region: str, account_id: str, name: str) -> str:
    return f"arn:aws:cloudwatch:{region}:{account_id}:alarm:{name}"


def is_scaling_policy(arn: str) -> bool:
    """An Application Auto Scaling (or EC2 Auto Scaling) policy: the only actions smlocal runs."""
    parts = arn.split(":")
    return len(parts) > 5 and parts[2] == "autoscaling" and parts[5] == "scalingPolicy"


def initial_state(now: datetime) -> StateRecord:
    return StateRecord(AlarmState.INSUFFICIENT_DATA, UNCHECKED, None, now, now)


def check_spec(spec: AlarmSpec, base_period_s: float, kept_periods: int) -> None:
    """CloudWatch's consistency rules, and smlocal's resolution and retention."""
    if spec.statistic not in STATISTICS:
        raise ValidationFailed(f"Statistic {spec.statistic} is not one of {', '.join(STATISTICS)}.")
    base = int(base_period_s)
    if spec.period <= 0 or spec.period % base:
        raise ValidationFailed(
            f"Period ({spec.period}) must be a multiple of {base}: smlocal's metrics have {base}-second "
            "resolution (high-resolution periods of 10, 20 and 30 seconds are not supported)."
        )
    if spec.evaluation_periods * spec.period > MAX_WINDOW_S:
        raise ValidationFailed(
            "Metrics cannot be checked across more than a day (EvaluationPeriods * Period must be <= 86400)."
        )
    if spec.evaluation_periods * spec.period > kept_periods * base:
        raise ValidationFailed(
            f"smlocal keeps the last {kept_periods} metric periods: EvaluationPeriods * Period must be at "
            f"most {kept_periods * base} seconds."
        )
    if spec.m > spec.evaluation_periods:
        raise ValidationFailed("DatapointsToAlarm must be less than or equal to EvaluationPeriods.")
