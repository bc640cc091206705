"""CloudWatch's metric alarm evaluation, pure.

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

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from emulator.model.alarm_messages import iso_millis, java_double
from emulator.model.alarms import (
    AlarmSpec,
    AlarmState,
    Comparison,
    HistoryItem,
    HistoryType,
    StateRecord,
    TreatMissing,
    Verdict,
    Window,
)


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
