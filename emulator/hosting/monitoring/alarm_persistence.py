"""STATE_DIR/alarms.json: the metric alarms' definitions and states, kept across server restarts (their
history is kept in memory only). See docs/cloudwatch.md."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from emulator.hosting.state_files import write_atomically
from emulator.model import alarms as al

log = logging.getLogger(__name__)


def save(path: Path, alarms: Iterable[al.MetricAlarm]) -> None:
    write_atomically(path, json.dumps({"version": 1, "alarms": [_dump(a) for a in alarms]}, indent=1))


def _dump(a: al.MetricAlarm) -> dict[str, Any]:
    s = a.state
    return {
        "spec": dataclasses.asdict(a.spec),
        "arn": a.arn,
        "configured": a.configuration_updated.isoformat(),
        "state": [s.value.value, s.reason, s.reason_data, s.updated.isoformat(), s.transitioned.isoformat()],
    }


def _undump(d: dict[str, Any]) -> al.MetricAlarm:
    spec = dict(d["spec"])
    m = spec.pop("metric")
    dims = tuple((str(k), str(v)) for k, v in m["dimensions"])
    metric = al.Metric(str(m["namespace"]), str(m["name"]), dims)
    treat = spec.pop("treat_missing_data")
    for key in ("ok_actions", "alarm_actions", "insufficient_data_actions"):
        spec[key] = tuple(spec[key])
    comparison = al.Comparison(spec.pop("comparison"))
    parsed = al.AlarmSpec(
        metric=metric,
        comparison=comparison,
        treat_missing_data=None if treat is None else al.TreatMissing(treat),
        **spec,
    )
    value, reason, data, updated, transitioned = d["state"]
    when = datetime.fromisoformat
    state = al.StateRecord(al.AlarmState(value), reason, data, when(updated), when(transitioned))
    return al.MetricAlarm(parsed, str(d["arn"]), datetime.fromisoformat(d["configured"]), state)


def load(path: Path) -> list[al.MetricAlarm]:
    """No file: no alarms; an unreadable or malformed file is logged and ignored."""
    try:
        document = json.loads(path.read_text())
        return [_undump(d) for d in document["alarms"]]
    except FileNotFoundError:
        return []
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return []
