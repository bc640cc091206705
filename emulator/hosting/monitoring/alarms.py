"""CloudWatch's metric alarms on smlocal's own metrics, which run Application Auto Scaling policies (the
metric queries, GetMetricStatistics, GetMetricData and ListMetrics, are the base class: queries.py).

A background task wakes just after each metric period closes (as AutoScaler's does) and evaluates
every alarm on the periods closed so far (emulator.model.alarm_evaluation decides). An action ARN of a scaling
policy runs through `AutoScaler.alarm_fired` on the transition into the state and again at every
evaluation while the alarm stays there, as CloudWatch does for Auto Scaling actions; other actions
(SNS, EC2...) are recorded in the alarm's history as not executed. Definitions and states persist
in STATE_DIR/alarms.json (alarm_persistence.py); history is kept in memory. Alarm Periods are policy
seconds: at `--time-scale N` a Period of 60 lasts 60/N wall seconds; timestamps shown are wall-clock.
See docs/cloudwatch.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from emulator.config import ServerConfig
from emulator.errors import AlarmNotFound, InvalidFormat
from emulator.hosting.monitoring import alarm_persistence
from emulator.hosting.monitoring.queries import MetricQueries
from emulator.hosting.monitoring.statistics import merge_sets
from emulator.hosting.monitoring.store import Metrics
from emulator.model import alarm_evaluation, alarm_messages
from emulator.model import alarms as al

log = logging.getLogger(__name__)

HISTORY_KEPT = 100  # items per alarm name, in memory [U]


class AlarmActions(Protocol):
    """Where an alarm's actions go: Application Auto Scaling's step scaling policies (the autoscaler,
    hosting.scaling, which sits above this room: the alarms call out through this, never import it)."""

    def alarm_fired(
        self, policy_arn: str, alarm_name: str, metric: float, threshold: float, alarm_state: str = "ALARM"
    ) -> bool: ...


def _now() -> datetime:
    return datetime.now(UTC)


class AlarmService(MetricQueries):
    def __init__(
        self,
        config: ServerConfig,
        metrics: Metrics,
        scaler: AlarmActions,
        wall: Callable[[], datetime] = _now,
    ) -> None:
        super().__init__(config, metrics)
        self.scaler = scaler
        self._wall = wall
        self._alarms: dict[str, al.MetricAlarm] = {}
        self._history: dict[str, deque[al.HistoryItem]] = {}
        self._path = config.state_dir / "alarms.json"
        self._task: asyncio.Task[None] | None = None
        #: Application Auto Scaling's target tracking alarms as (spec, ARN), from the autoscaler:
        #: shown by DescribeAlarms and read by deployment rollback; DeleteAlarms and SetAlarmState
        #: do not know them (delete the scaling policy instead) [U].
        self.managed: Callable[[], list[tuple[al.AlarmSpec, str]]] | None = None
        self._managed: dict[str, al.MetricAlarm] = {}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        for alarm in alarm_persistence.load(self._path):
            self._alarms[alarm.spec.name] = alarm
        self._task = asyncio.get_running_loop().create_task(self._run(), name="alarms")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        await self.metrics.after_each_period(self.evaluate, "alarm evaluation")

    def _persist(self) -> None:
        alarm_persistence.save(self._path, self._alarms.values())

    # ------------------------------------------------------------------ alarms

    def in_alarm(self, names: Sequence[str]) -> list[str]:
        """Those of `names` whose alarm is in ALARM now (deployment rollback reads this)."""
        every = {**self._managed_alarms(), **self._alarms}
        return [n for n in names if (a := every.get(n)) is not None and a.state.value == "ALARM"]

    def _managed_alarms(self) -> dict[str, al.MetricAlarm]:
        """Application Auto Scaling's managed (target tracking) alarms, with their last evaluated
        state (a new one: INSUFFICIENT_DATA)."""
        if self.managed is None:
            return {}
        now = self._wall()
        current: dict[str, al.MetricAlarm] = {}
        for spec, arn in self.managed():
            old = self._managed.get(spec.name)
            if old is not None and old.spec == spec:
                current[spec.name] = old
            else:
                state = old.state if old is not None else al.initial_state(now)
                current[spec.name] = al.MetricAlarm(spec, arn, now, state)
        self._managed = current
        return current

    def _evaluate_managed(self, last: int) -> None:
        """States only: the autoscaler acts on its own evaluation of the same datapoints."""
        for name, alarm in self._managed_alarms().items():
            now = self._wall()
            verdict = alarm_evaluation.evaluate(alarm.spec, self.windows(alarm.spec, last), now)
            if verdict.state is not None and verdict.state is not alarm.state.value:
                record = al.StateRecord(verdict.state, verdict.reason, verdict.reason_data, now, now)
                self._managed[name] = dataclasses.replace(alarm, state=record)

    def targeting(self, action_arn: str) -> list[tuple[str, str]]:
        """(name, ARN) of the alarms with `action_arn` among their actions (a step policy's Alarms)."""
        return [
            (a.spec.name, a.arn)
            for a in sorted(self._alarms.values(), key=lambda a: a.spec.name)
            if action_arn in (*a.spec.alarm_actions, *a.spec.ok_actions, *a.spec.insufficient_data_actions)
        ]

    def put_metric_alarm(self, spec: al.AlarmSpec) -> al.MetricAlarm:
        """Create, or overwrite the configuration of, an alarm (an update leaves its state as it is);
        then evaluate it at once, as CloudWatch does."""
        al.check_spec(spec, self.config.metrics_period_s, self.metrics.keep)
        now = self._wall()
        old = self._alarms.get(spec.name)
        state = al.initial_state(now) if old is None else old.state
        arn = al.alarm_arn(self.config.region, self.config.account_id, spec.name)
        alarm = self._alarms[spec.name] = al.MetricAlarm(spec, arn, now, state)
        verb = "created" if old is None else "updated"
        self._record(spec.name, now, al.HistoryType.CONFIGURATION, f'Alarm "{spec.name}" {verb}', {})
        self._persist()
        self._evaluate(alarm, self.metrics.period_index() - 1)
        return self._alarms[spec.name]

    def describe_alarms(
        self,
        names: Sequence[str] | None = None,
        prefix: str | None = None,
        state: str | None = None,
        action_prefix: str | None = None,
    ) -> list[al.MetricAlarm]:
        found = [
            a
            for name, a in sorted({**self._managed_alarms(), **self._alarms}.items())
            if (not names or name in names)
            and (prefix is None or name.startswith(prefix))
            and (state is None or a.state.value == state)
            and (
                action_prefix is None
                or any(
                    x.startswith(action_prefix)
                    for x in (*a.spec.ok_actions, *a.spec.alarm_actions, *a.spec.insufficient_data_actions)
                )
            )
        ]
        return found

    def delete_alarms(self, names: Sequence[str]) -> None:
        """All or nothing, as DeleteAlarms documents ('In the event of an error, no alarms are deleted')."""
        missing = [n for n in names if n not in self._alarms]
        if missing:
            raise AlarmNotFound(alarm_messages.not_found(missing))
        now = self._wall()
        for name in names:
            self._alarms.pop(name, None)
            self._record(name, now, al.HistoryType.CONFIGURATION, f'Alarm "{name}" deleted', {})
        self._persist()

    def set_actions_enabled(self, names: Sequence[str], enabled: bool) -> None:
        for name in names:
            alarm = self._alarms.get(name)
            if alarm is not None:
                spec = dataclasses.replace(alarm.spec, actions_enabled=enabled)
                self._alarms[name] = dataclasses.replace(alarm, spec=spec)
        self._persist()

    def set_alarm_state(self, name: str, value: str, reason: str, reason_data: str | None) -> None:
        """Until the next evaluation; the new state's actions run when the state changes."""
        alarm = self._alarms.get(name)
        if alarm is None:
            raise AlarmNotFound(alarm_messages.not_found([name]))
        if reason_data is not None:
            try:
                json.loads(reason_data)
            except ValueError as exc:
                raise InvalidFormat(alarm_messages.REASON_DATA_NOT_JSON) from exc
        now = self._wall()
        state = al.AlarmState(value)
        changed = state is not alarm.state.value
        record = al.StateRecord(state, reason, reason_data, now, now if changed else alarm.state.transitioned)
        self._set_state(alarm, record)
        if changed:
            self._act(self._alarms[name], None, transition=True)

    def history(
        self,
        name: str | None,
        item_type: str | None,
        start: datetime | None,
        end: datetime | None,
        oldest_first: bool,
    ) -> list[al.HistoryItem]:
        items = [
            h
            for alarm_name, kept in self._history.items()
            if name is None or alarm_name == name
            for h in kept
            if (item_type is None or h.item_type.value == item_type)
            and (start is None or h.timestamp >= start)
            and (end is None or h.timestamp <= end)
        ]
        items.sort(key=lambda h: h.timestamp)  # stable: items of one instant stay in the order they happened
        return items if oldest_first else items[::-1]

    # ------------------------------------------------------------------ evaluation

    def evaluate(self) -> None:
        """Every alarm, on the periods closed so far (once per metric period)."""
        last = self.metrics.period_index() - 1
        for alarm in list(self._alarms.values()):
            try:
                self._evaluate(alarm, last)
            except Exception:  # noqa: BLE001 - one alarm's failure must not stop the others
                log.exception("evaluation of alarm %s failed", alarm.spec.name)
        try:
            self._evaluate_managed(last)
        except Exception:  # noqa: BLE001 - as above
            log.exception("evaluation of the target tracking alarms failed")

    def _evaluate(self, alarm: al.MetricAlarm, last: int) -> None:
        windows = self.windows(alarm.spec, last)
        verdict = alarm_evaluation.evaluate(alarm.spec, windows, self._wall())
        if verdict.state is not None and verdict.state is not alarm.state.value:
            now = self._wall()
            record = al.StateRecord(verdict.state, verdict.reason, verdict.reason_data, now, now)
            self._set_state(alarm, record)
            self._act(self._alarms[alarm.spec.name], verdict.newest, transition=True)
        else:
            self._act(alarm, verdict.newest, transition=False)

    def windows(self, spec: al.AlarmSpec, last: int) -> list[al.Window]:
        """The alarm's evaluation range ending with period `last`: one datapoint per alarm Period
        (oldest first), EvaluationPeriods + 2 of them as far as the periods kept reach."""
        k = int(spec.period // self.config.metrics_period_s)
        count = min(spec.evaluation_periods + al.EXTRA_RANGE, self.metrics.keep // k)
        sets = self._sets(spec.metric, spec.unit)
        out: list[al.Window] = []
        for j in range(count):
            first = last - (count - j) * k + 1
            merged = merge_sets(sets[i] for i in range(first, first + k) if i in sets)
            value = None if merged is None else merged.value(spec.statistic)
            out.append(al.Window(self._stamp(first), value, 0.0 if merged is None else merged.sample_count))
        return out

    def _set_state(self, alarm: al.MetricAlarm, record: al.StateRecord) -> None:
        self._alarms[alarm.spec.name] = dataclasses.replace(alarm, state=record)
        self._remember(alarm_evaluation.state_update(alarm.spec.name, alarm.state, record))
        self._persist()

    def _act(self, alarm: al.MetricAlarm, newest: float | None, transition: bool) -> None:
        """Run the current state's actions: scaling policies at every evaluation, the rest (not
        executed) noted on transitions."""
        spec = alarm.spec
        if not spec.actions_enabled:
            return
        for arn in spec.actions(alarm.state.value):
            if al.is_scaling_policy(arn):
                metric = spec.threshold if newest is None else newest
                try:
                    ran = self.scaler.alarm_fired(arn, spec.name, metric, spec.threshold, alarm.state.value)
                except Exception as exc:  # noqa: BLE001 - a failing action must not stop evaluation
                    log.exception("alarm action %s failed", arn)
                    ran, problem = False, f"{type(exc).__name__}: {exc}"
                else:
                    problem = alarm_messages.NO_SUCH_POLICY
                if transition:
                    summary = alarm_messages.action_summary(arn, ran, problem)
                    self._record(spec.name, self._wall(), al.HistoryType.ACTION, summary, {"actionArn": arn})
            elif transition:
                summary = alarm_messages.not_executed(arn)
                self._record(spec.name, self._wall(), al.HistoryType.ACTION, summary, {"actionArn": arn})

    def _record(
        self, name: str, when: datetime, kind: al.HistoryType, summary: str, data: dict[str, Any]
    ) -> None:
        self._remember(al.HistoryItem(name, when, kind, summary, json.dumps({"version": "1.0", **data})))

    def _remember(self, item: al.HistoryItem) -> None:
        kept = self._history.get(item.alarm_name)
        if kept is None:
            kept = self._history[item.alarm_name] = deque(maxlen=HISTORY_KEPT)
        kept.append(item)
