"""CloudWatch's alarm texts as clients see them ([U]: CloudWatch's own text is unknown), and the Java
formatting of numbers and timestamps inside them (CloudWatch's texts are Java's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from emulator.model.alarms import Comparison, TreatMissing


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


def metric_needs(member: str) -> str:  # [U]: CloudWatch's text for a Metric without it is unknown
    return f"A metric needs its {member}: smlocal finds metrics by namespace, name and dimensions."


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
