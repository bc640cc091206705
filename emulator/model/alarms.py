"""CloudWatch metric alarms, pure: definitions, states, and the evaluation CloudWatch documents.

`evaluate` decides an alarm's state from the datapoints of its evaluation range (oldest first, one
per alarm Period; None where data is missing), as "Configuring how CloudWatch alarms treat missing
data" describes it: when at least EvaluationPeriods real datapoints exist in the range, the newest
EvaluationPeriods of them decide and TreatMissingData plays no part; otherwise missing datapoints
are filled as few times as possible (breaching / notBreaching), or the state is kept where the real
datapoints cannot decide it (ignore; missing, except CloudWatch's premature-alarm rule), and a range
with no data at all goes to INSUFFICIENT_DATA (missing), ALARM (breaching), OK (notBreaching) or
stays (ignore). Texts follow CloudWatch's StateReason and StateReasonData; docs/cloudwatch.md.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

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


# ---------------------------------------------------------------------- evaluation


def breaches(comparison: Comparison, value: float, threshold: float) -> bool:
    if comparison is Comparison.GE:
        return value >= threshold
    if comparison is Comparison.GT:
        return value > threshold
    if comparison is Comparison.LT:
        return value < threshold
    return value <= threshold


def evaluate(spec: AlarmSpec, windows: Sequence[Window], query_time: datetime) -> Verdict:
    """The state the evaluation range asks for (Verdict.state None: the current state stays)."""
    n, m = spec.evaluation_periods, spec.m
    real = [w for w in windows if w.value is not None]
    newest = real[-1].value if real else None
    if len(real) >= n:
        return _crossed(spec, real[-n:], 0, query_time, newest)
    treat = spec.treat_missing
    if not real:
        if treat is TreatMissing.MISSING:
            text = f"Insufficient Data: {n} datapoint{'s were' if n > 1 else ' was'} unknown."
            return Verdict(AlarmState.INSUFFICIENT_DATA, text, None, None)
        if treat is TreatMissing.IGNORE:
            return Verdict(None, "", None, None)
        breaching = treat is TreatMissing.BREACHING
        label = "Breaching" if breaching else "NonBreaching"
        reason = (
            f"Threshold Crossed: no datapoints were received for {n} period{_s(n)} and {n} missing "
            f"datapoint{'s were' if n > 1 else ' was'} treated as [{label}]."
        )
        state = AlarmState.ALARM if breaching else AlarmState.OK
        return Verdict(state, reason, _reason_data(spec, [], query_time), None)
    unknown = n - len(real)
    if treat is TreatMissing.BREACHING:
        return _crossed(spec, real, unknown, query_time, newest)
    if treat is TreatMissing.NOT_BREACHING:
        return _crossed(spec, real, -unknown, query_time, newest)
    hits = sum(1 for w in real if _breach(spec, w))
    if hits >= m or hits + unknown < m:
        return _crossed(spec, real, 0, query_time, newest)  # decided whatever the missing ones were
    if treat is TreatMissing.MISSING and _premature_alarm(spec, windows):
        return _crossed(spec, real, unknown, query_time, newest)
    return Verdict(None, "", None, newest)


def _breach(spec: AlarmSpec, w: Window) -> bool:
    return w.value is not None and breaches(spec.comparison, w.value, spec.threshold)


def _premature_alarm(spec: AlarmSpec, windows: Sequence[Window]) -> bool:
    """CloudWatch's rule for intermittent data treated as missing: ALARM when the oldest breaching
    datapoint of the range is at least DatapointsToAlarm periods old and every newer datapoint is
    breaching or missing."""
    oldest = next((i for i, w in enumerate(windows) if _breach(spec, w)), None)
    if oldest is None or len(windows) - oldest < spec.m:
        return False
    return all(w.value is None or _breach(spec, w) for w in windows[oldest:])


def _crossed(
    spec: AlarmSpec, real: Sequence[Window], filled: int, query_time: datetime, newest: float | None
) -> Verdict:
    """ALARM or OK from the real datapoints plus |filled| missing ones counted as breaching (filled
    > 0) or not breaching (filled < 0)."""
    n, m = spec.evaluation_periods, spec.m
    hits = [w for w in real if _breach(spec, w)]
    misses = [w for w in real if not _breach(spec, w)]
    alarm = len(hits) + max(filled, 0) >= m
    shown = list(reversed(hits if alarm else misses))  # newest first, as CloudWatch lists them
    count = len(shown) + (max(filled, 0) if alarm else max(-filled, 0))
    listed = ", ".join(f"{java_double(w.value or 0.0)} ({w.start:%d/%m/%y %H:%M:%S})" for w in shown)
    verb = "was" if count == 1 else "were"
    op = spec.comparison.text if alarm else f"not {spec.comparison.text}"
    threshold = java_double(spec.threshold)
    if n == 1 and not filled:
        reason = f"Threshold Crossed: 1 datapoint [{listed}] was {op} the threshold ({threshold})."
    else:
        reason = f"Threshold Crossed: {count} out of the last {n} datapoints [{listed}] {verb} {op} "
        reason += f"the threshold ({threshold})"
        if filled:
            k = abs(filled)
            label = "Breaching" if filled > 0 else "NonBreaching"
            reason += f" ({k} missing datapoint{'s were' if k > 1 else ' was'} treated as [{label}])"
        need, move = (m, "OK -> ALARM") if alarm else (n - m + 1, "ALARM -> OK")
        reason += f" (minimum {need} datapoint{_s(need)} for {move} transition)."
    state = AlarmState.ALARM if alarm else AlarmState.OK
    return Verdict(state, reason, _reason_data(spec, real, query_time), newest)


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _reason_data(spec: AlarmSpec, real: Sequence[Window], query_time: datetime) -> str:
    data: dict[str, Any] = {"version": "1.0", "queryDate": iso_millis(query_time)}
    if real:
        data["startDate"] = iso_millis(real[0].start)
    data.update({"statistic": spec.statistic, "period": spec.period})
    data["recentDatapoints"] = [w.value for w in real]
    data["threshold"] = spec.threshold
    data["evaluatedDatapoints"] = [
        {"timestamp": iso_millis(w.start), "sampleCount": w.sample_count, "value": w.value}
        for w in reversed(real)
    ]
    return json.dumps(data, separators=(",", ":"))


def state_update(name: str, old: StateRecord, new: StateRecord) -> HistoryItem:
    def side(s: StateRecord) -> dict[str, Any]:
        out: dict[str, Any] = {"stateValue": s.value.value, "stateReason": s.reason}
        if s.reason_data is not None:
            out["stateReasonData"] = json.loads(s.reason_data)
        return out

    data = {"version": "1.0", "oldState": side(old), "newState": side(new)}
    summary = f"Alarm updated from {old.value.value} to {new.value.value}"
    return HistoryItem(name, new.updated, HistoryType.STATE, summary, json.dumps(data))


# ---------------------------------------------------------------------- texts


def iso_millis(t: datetime) -> str:
    """CloudWatch's timestamps inside JSON texts: 2020-12-10T14:37:00.000+0000."""
    return f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}+0000"


def java_double(x: float) -> str:
    """A double as Java's Double.toString writes it (CloudWatch's texts are Java's): 1.0, 0.25, 1.5E7."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = repr(float(x))
        return text if "." in text else f"{text}.0"
    d = Decimal(repr(float(x)))
    sign, digits, _ = d.as_tuple()
    mantissa = "".join(str(i) for i in digits).rstrip("0") or "0"
    mantissa = mantissa[0] + "." + (mantissa[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{d.adjusted()}"


# ---------------------------------------------------------------------- messages ([U]: CloudWatch's unknown)

_SUPPORTED_STATS = "SampleCount, Average, Sum, Minimum or Maximum"
THRESHOLD_OPERATORS = tuple(c.value for c in Comparison)
REASON_DATA_NOT_JSON = "StateReasonData is not valid JSON."
NO_SUCH_POLICY = "No Application Auto Scaling step scaling policy has this ARN"
NO_STATISTICS = "At least one of the parameters Statistics and ExtendedStatistics must be specified."
ALARM_METRIC_MATH = (
    "smlocal does not evaluate metric math: give PutMetricAlarm a MetricName, Namespace, Dimensions, "
    "Statistic and Period instead of Metrics or ThresholdMetricId."
)
ALARM_PROMQL = (
    "smlocal does not evaluate PromQL alarms (EvaluationCriteria, EvaluationInterval): give PutMetricAlarm a "
    "MetricName, Namespace, Dimensions, Statistic and Period."
)
ALARM_EXTENDED_STATISTIC = (
    "smlocal does not keep percentiles: ExtendedStatistic is not supported; use Statistic "
    f"({_SUPPORTED_STATS})."
)
QUERY_EXTENDED_STATISTICS = (
    "smlocal does not keep percentiles: ExtendedStatistics are not supported; use Statistics "
    f"({_SUPPORTED_STATS})."
)


def bad_treat_missing(value: str) -> str:
    return f"TreatMissingData {value} is not one of {', '.join(t.value for t in TreatMissing)}."


def alarm_needs(member: str) -> str:
    return f"{member} is required for an alarm on a single metric (smlocal supports no other kind)."


def anomaly_operator(operator: str) -> str:
    return (
        f"smlocal does not support anomaly detection: ComparisonOperator {operator} is not supported; use "
        f"{', '.join(THRESHOLD_OPERATORS)} with a Threshold."
    )


def query_expression(query_id: str) -> str:
    return (
        f"smlocal does not evaluate metric math: MetricDataQuery {query_id} has an Expression; give it a "
        "MetricStat instead."
    )


def query_stat(query_id: str, stat: str) -> str:
    return (
        f"smlocal does not keep percentiles or other extended statistics: Stat {stat} of MetricDataQuery "
        f"{query_id} is not supported; use {_SUPPORTED_STATS}."
    )


def query_needs(query_id: str) -> str:
    return f"MetricDataQuery {query_id} must have a MetricStat."


def bad_query_period(period: int, base: int) -> str:
    return (
        f"The parameter Period must be a multiple of {base}: smlocal's metrics have {base}-second resolution."
    )


def too_many_datapoints(wanted: int, limit: int) -> str:
    return (
        f"You have requested up to {wanted:,} datapoints, which exceeds the limit of {limit:,}. You may "
        "reduce the datapoints requested by increasing Period, or decreasing the time range."
    )


def not_found(names: Sequence[str]) -> str:
    if len(names) == 1:
        return f"Alarm {names[0]} not found"
    return f"Alarms {', '.join(names)} not found"


def action_summary(arn: str, ran: bool, problem: str) -> str:
    if ran:
        return f"Successfully executed action {arn}"
    return f'Failed to execute action {arn}. Received error: "{problem}"'


def not_executed(arn: str) -> str:
    return f"smlocal does not execute action {arn}: only Application Auto Scaling policy actions run"
