"""CloudWatch alarms: the pure evaluation (M of N, TreatMissingData, operators, texts), the statistic
sets and k-period aggregation over Metrics, and the AlarmService's transitions, actions, SetAlarmState
and persistence on a fake clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from emulator.config import ServerConfig
from emulator.errors import AlarmNotFound, InvalidFormat, ValidationFailed
from emulator.hosting.monitoring import store as m
from emulator.hosting.monitoring.alarms import AlarmService
from emulator.hosting.monitoring.catalogue import METRICS, SeriesKey, locate
from emulator.hosting.monitoring.statistics import ZERO_SET, StatisticSet, merge_sets
from emulator.hosting.monitoring.store import Metrics
from emulator.hosting.scaling.autoscaler import AutoScaler
from emulator.model import alarms as al
from emulator.model.alarm_evaluation import breaches, evaluate
from emulator.model.alarm_messages import java_double
from emulator.model.alarms import AlarmSpec, AlarmState, Comparison, TreatMissing, Window

T0 = 1_800_000_000.0  # a period boundary: 30_000_000 x 60
INDEX = 30_000_000
START = datetime(2027, 1, 15, 8, 0, tzinfo=UTC)
DIMS = (("EndpointName", "ep"), ("VariantName", "AllTraffic"))
INVOCATIONS = al.Metric("AWS/SageMaker", "Invocations", DIMS)
POLICY = (
    "arn:aws:autoscaling:us-east-1:123456789012:scalingPolicy:0f3c:resource/sagemaker/endpoint/ep/variant/"
    "AllTraffic:policyName/out"
)
SNS = "arn:aws:sns:us-east-1:123456789012:ops"


def spec(n: int = 3, m_: int | None = None, **changes: Any) -> AlarmSpec:
    base: dict[str, Any] = dict(
        name="a",
        metric=INVOCATIONS,
        statistic="Sum",
        period=60,
        evaluation_periods=n,
        datapoints_to_alarm=m_,
        threshold=1.0,
        comparison=Comparison.GT,
    )
    base.update(changes)
    return AlarmSpec(**base)


def windows(pattern: str, start: datetime = START) -> list[Window]:
    """'0' not breaching (0.0), 'X' breaching (5.0), '-' missing; oldest first, one minute apart."""
    values = {"0": 0.0, "X": 5.0, "-": None}
    return [
        Window(start + timedelta(minutes=i), values[c], 0.0 if c == "-" else 1.0)
        for i, c in enumerate(pattern)
    ]


def state_of(s: AlarmSpec, pattern: str) -> AlarmState | None:
    return evaluate(s, windows(pattern), START).state


# ---------------------------------------------------------------------- evaluation


OK, ALARM, INSUFFICIENT = AlarmState.OK, AlarmState.ALARM, AlarmState.INSUFFICIENT_DATA


# CloudWatch's own table ("Configuring how CloudWatch alarms treat missing data"): 3 out of 3, an
# evaluation range of 5. None: the alarm keeps its current state.
@pytest.mark.parametrize(
    "pattern, missing, ignore, breaching, not_breaching",
    [
        ("0-X-X", OK, OK, OK, OK),
        ("----0", OK, OK, OK, OK),
        ("-----", INSUFFICIENT, None, ALARM, OK),
        ("0XX-X", ALARM, ALARM, ALARM, ALARM),
        ("--X--", ALARM, None, ALARM, OK),
    ],
)
def test_cloudwatch_missing_data_table(
    pattern: str,
    missing: AlarmState | None,
    ignore: AlarmState | None,
    breaching: AlarmState | None,
    not_breaching: AlarmState | None,
) -> None:
    got = [state_of(spec(treat_missing_data=t), pattern) for t in TreatMissing]
    assert got == [missing, not_breaching, breaching, ignore]  # TreatMissing's order


def test_missing_data_defaults_to_missing() -> None:
    assert spec().treat_missing is TreatMissing.MISSING
    assert state_of(spec(), "-----") is INSUFFICIENT


@pytest.mark.parametrize(
    "pattern, expected",
    [
        ("00X0X", ALARM),  # newest 3: X 0 X -> 2 of 3
        ("XX00X", OK),  # newest 3: 0 0 X -> 1 of 3
        ("XXX00", OK),
        ("0XX0X", ALARM),
        ("X-X-0", ALARM),  # 3 real datapoints, newest three: X X 0
        ("0000X", OK),
    ],
)
def test_m_out_of_n(pattern: str, expected: AlarmState) -> None:
    assert state_of(spec(3, 2), pattern) is expected


def test_fewer_real_datapoints_than_n_decide_when_they_can() -> None:
    two_of_three = spec(3, 2, treat_missing_data=TreatMissing.IGNORE)
    assert state_of(two_of_three, "---XX") is ALARM  # 2 breaching already: ALARM whatever is missing
    assert state_of(two_of_three, "---00") is OK  # 2 not breaching: 2 of 3 can no longer be reached
    assert state_of(two_of_three, "----X") is None  # undecided: the state stays


def test_premature_alarm_rule_for_missing_data() -> None:
    # the oldest breaching datapoint is at least M periods old and only missing data came since
    assert state_of(spec(3, 2), "---X-") is ALARM
    assert state_of(spec(3, 2), "----X") is None  # only one period old: wait
    assert state_of(spec(3, 2), "--X0-") is None  # a newer datapoint does not breach
    assert state_of(spec(3, 2, treat_missing_data=TreatMissing.IGNORE), "---X-") is None


def test_breaching_and_not_breaching_fill_as_few_datapoints_as_needed() -> None:
    assert state_of(spec(3, 3, treat_missing_data=TreatMissing.BREACHING), "---X0") is OK
    assert state_of(spec(3, 3, treat_missing_data=TreatMissing.BREACHING), "---XX") is ALARM
    assert state_of(spec(3, 1, treat_missing_data=TreatMissing.NOT_BREACHING), "----X") is ALARM
    assert state_of(spec(3, 2, treat_missing_data=TreatMissing.NOT_BREACHING), "----X") is OK


@pytest.mark.parametrize(
    "comparison, value, breach",
    [
        (Comparison.GE, 1.0, True),
        (Comparison.GE, 0.99, False),
        (Comparison.GT, 1.0, False),
        (Comparison.GT, 1.01, True),
        (Comparison.LT, 1.0, False),
        (Comparison.LT, 0.99, True),
        (Comparison.LE, 1.0, True),
        (Comparison.LE, 1.01, False),
    ],
)
def test_comparison_operators(comparison: Comparison, value: float, breach: bool) -> None:
    assert breaches(comparison, value, 1.0) is breach
    one = spec(1, comparison=comparison)
    assert evaluate(one, [Window(START, value, 1.0)], START).state is (ALARM if breach else OK)


def test_alarm_reason_lists_the_breaching_datapoints_newest_first() -> None:
    verdict = evaluate(spec(3), windows("0XXX", START), START + timedelta(minutes=5))
    assert verdict.state is ALARM
    assert verdict.reason == (
        "Threshold Crossed: 3 out of the last 3 datapoints [5.0 (15/01/27 08:03:00), 5.0 (15/01/27 08:02:00), "
        "5.0 (15/01/27 08:01:00)] were greater than the threshold (1.0) (minimum 3 datapoints for "
        "OK -> ALARM transition)."
    )
    assert verdict.newest == 5.0
    assert verdict.reason_data is not None
    data = json.loads(verdict.reason_data)
    assert data == {
        "version": "1.0",
        "queryDate": "2027-01-15T08:05:00.000+0000",
        "startDate": "2027-01-15T08:01:00.000+0000",
        "statistic": "Sum",
        "period": 60,
        "recentDatapoints": [5.0, 5.0, 5.0],
        "threshold": 1.0,
        "evaluatedDatapoints": [
            {"timestamp": f"2027-01-15T08:0{i}:00.000+0000", "sampleCount": 1.0, "value": 5.0}
            for i in (3, 2, 1)
        ],
    }


def test_ok_reason_lists_the_datapoints_within_the_threshold() -> None:
    verdict = evaluate(spec(3, 2, comparison=Comparison.LT, threshold=3.0), windows("XX0X"), START)
    assert verdict.state is OK
    assert verdict.reason == (
        "Threshold Crossed: 2 out of the last 3 datapoints [5.0 (15/01/27 08:03:00), 5.0 (15/01/27 08:01:00)] "
        "were not less than the threshold (3.0) (minimum 2 datapoints for ALARM -> OK transition)."
    )


def test_single_datapoint_and_missing_data_reasons() -> None:
    one = evaluate(spec(1, threshold=2.5), [Window(START, 4.0, 1.0)], START)
    assert (
        one.reason
        == "Threshold Crossed: 1 datapoint [4.0 (15/01/27 08:00:00)] was greater than the threshold (2.5)."
    )
    assert (
        evaluate(spec(3), windows("-----"), START).reason == "Insufficient Data: 3 datapoints were unknown."
    )
    filled = evaluate(spec(2, treat_missing_data=TreatMissing.NOT_BREACHING), windows("----"), START)
    assert (filled.state, filled.reason) == (
        OK,
        "Threshold Crossed: no datapoints were received for 2 periods and 2 missing datapoints were "
        "treated as [NonBreaching].",
    )
    partly = evaluate(spec(3, treat_missing_data=TreatMissing.BREACHING), windows("---XX"), START)
    assert partly.reason == (
        "Threshold Crossed: 3 out of the last 3 datapoints [5.0 (15/01/27 08:04:00), 5.0 (15/01/27 08:03:00)] "
        "were greater than the threshold (1.0) (1 missing datapoint was treated as [Breaching]) "
        "(minimum 3 datapoints for OK -> ALARM transition)."
    )


@pytest.mark.parametrize(
    "value, text",
    [
        (1.0, "1.0"),
        (0.25, "0.25"),
        (100.0, "100.0"),
        (-2.5, "-2.5"),
        (0.0, "0.0"),
        (1e7, "1.0E7"),
        (12345678.0, "1.2345678E7"),
        (0.0001, "1.0E-4"),
        (9999999.0, "9999999.0"),
    ],
)
def test_java_double(value: float, text: str) -> None:
    assert java_double(value) == text


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"period": 45},
            "Period (45) must be a multiple of 60: smlocal's metrics have 60-second resolution "
            "(high-resolution periods of 10, 20 and 30 seconds are not supported).",
        ),
        ({"datapoints_to_alarm": 4}, "DatapointsToAlarm must be less than or equal to EvaluationPeriods."),
        (
            {"evaluation_periods": 61},
            "smlocal keeps the last 60 metric periods: EvaluationPeriods * Period must be at most 3600 seconds.",
        ),
        (
            {"period": 3600, "evaluation_periods": 25},
            "Metrics cannot be checked across more than a day (EvaluationPeriods * Period must be <= 86400).",
        ),
        ({"statistic": "p99"}, "Statistic p99 is not one of SampleCount, Average, Sum, Minimum, Maximum."),
    ],
)
def test_check_spec(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationFailed) as exc:
        al.check_spec(spec(3, **changes), 60.0, 60)
    assert exc.value.message == message
    al.check_spec(spec(3), 60.0, 60)


def test_scaling_policy_arns() -> None:
    assert al.is_scaling_policy(POLICY)
    assert al.is_scaling_policy(
        "arn:aws:autoscaling:us-east-1:123456789012:scalingPolicy:1:autoScalingGroupName/g"
    )
    assert not al.is_scaling_policy(SNS)
    assert not al.is_scaling_policy("arn:aws:automate:us-east-1:ec2:stop")


# ---------------------------------------------------------------------- statistic sets and aggregation


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_count_metrics_are_zero_not_missing_from_the_first_period_seen() -> None:
    clock = Clock(T0 + 1)
    metrics = Metrics(clock=clock)
    for _ in range(3):
        metrics.record("ep", "AllTraffic", m.OK, 0.002, 0.003)
    clock.now = T0 + 3 * 60 + 1
    sets = metrics.statistic_sets("ep", "AllTraffic", "Invocations")
    assert sorted(sets) == [INDEX, INDEX + 1, INDEX + 2, INDEX + 3]  # nothing before the series began
    assert sets[INDEX] == StatisticSet(3.0, 3.0, 1.0, 1.0)
    assert sets[INDEX + 1] == ZERO_SET
    latency = metrics.statistic_sets("ep", "AllTraffic", "ModelLatency")
    assert list(latency) == [INDEX]  # latency without requests is missing
    assert latency[INDEX].sample_count == 3.0 and latency[INDEX].sum == pytest.approx(6000.0)
    assert metrics.statistic_sets("other", "AllTraffic", "Invocations") == {}
    assert metrics.statistic_sets("ep", "AllTraffic", "GPUUtilization") == {}


def test_statistic_sets_cover_the_kept_periods_only() -> None:
    clock = Clock(T0 + 1)
    metrics = Metrics(clock=clock, keep=5)
    metrics.record("ep", "v", m.OK, 0.001, 0.001)
    clock.now = T0 + 10 * 60 + 1
    assert sorted(metrics.statistic_sets("ep", "v", "Invocations")) == list(range(INDEX + 6, INDEX + 11))


def test_statistic_sets_agree_with_datapoint() -> None:
    clock = Clock(T0 + 1)
    metrics = Metrics(clock=clock)
    metrics.set_instances("ep", "v", 2)
    metrics.record("ep", "v", m.OK, 0.001, 0.002)
    metrics.record("ep", "v", m.CLIENT_ERROR, 0.004, 0.005)
    metrics.record("ep", "v", m.SERVER_ERROR, 0.002, 0.004)
    metrics.record_utilization("ep", "v", 40.0, 10.0)
    metrics.record_utilization("ep", "v", 60.0, 30.0)
    clock.now = T0 + 61  # the period without requests follows
    compared = 0
    for info in METRICS:
        sets = metrics.statistic_sets("ep", "v", info.name)
        for index in (INDEX, INDEX + 1):
            for statistic in al.STATISTICS:
                expected = metrics.datapoint("ep", "v", info.name, statistic, index)
                if expected is None:
                    continue
                assert sets[index].value(statistic) == pytest.approx(expected), (info.name, statistic, index)
                compared += 1
    assert compared > 40
    errors = metrics.statistic_sets("ep", "v", "Invocation5XXErrors")[INDEX]
    assert (errors.minimum, errors.maximum, errors.sum) == (0.0, 1.0, 1.0)
    cpu = metrics.statistic_sets("ep", "v", "CPUUtilization")[INDEX]
    assert (cpu.minimum, cpu.maximum, cpu.value("Average")) == (40.0, 60.0, 50.0)


def test_merge_sets() -> None:
    a = StatisticSet(2.0, 10.0, 4.0, 6.0)
    b = StatisticSet(3.0, 3.0, 1.0, 1.0)
    merged = merge_sets([a, ZERO_SET, b])
    assert merged == StatisticSet(5.0, 13.0, 1.0, 6.0)  # a period without samples adds nothing
    assert merged is not None and merged.value("Average") == pytest.approx(2.6)
    assert merge_sets([ZERO_SET, ZERO_SET]) == ZERO_SET
    assert merge_sets([]) is None
    assert ZERO_SET.value("Average") == 0.0 and ZERO_SET.value("p99") is None


def test_buckets_aggregate_k_periods_from_the_first_index() -> None:
    clock = Clock(T0 + 1)
    metrics = Metrics(clock=clock)
    for minute, requests in enumerate([1, 2, 0, 4, 5]):
        clock.now = T0 + minute * 60 + 1
        for _ in range(requests):
            metrics.record("ep", "v", m.OK, 0.001, 0.001)
    got = metrics.buckets("ep", "v", "Invocations", INDEX - 1, INDEX + 5, 2)
    assert [(i - INDEX, s.sum) for i, s in got] == [(-1, 1.0), (1, 2.0), (3, 9.0)]
    got = metrics.buckets("ep", "v", "Invocations", INDEX, INDEX + 3, 2)  # end is exclusive
    assert [(i - INDEX, s.sum) for i, s in got] == [(0, 3.0), (2, 4.0)]
    latency = metrics.buckets("ep", "v", "ModelLatency", INDEX, INDEX + 5, 1)
    assert [i - INDEX for i, _ in latency] == [0, 1, 3, 4]  # the period without requests has no datapoint
    with pytest.raises(ValueError):
        metrics.buckets("ep", "v", "Invocations", INDEX, INDEX + 1, 0)


def test_locate() -> None:
    assert locate("AWS/SageMaker", "Invocations", DIMS) == SeriesKey("ep", "AllTraffic")
    assert locate("AWS/SageMaker", "Invocations", reversed(DIMS)) == SeriesKey("ep", "AllTraffic")
    assert locate("/aws/sagemaker/Endpoints", "CPUUtilization", DIMS) == SeriesKey("ep", "AllTraffic")
    assert locate("AWS/SageMaker", "CPUUtilization", DIMS) is None
    assert locate("AWS/SageMaker", "Invocations", DIMS[:1]) is None
    assert locate("AWS/SageMaker", "Invocations", (*DIMS, ("Other", "x"))) is None
    assert locate("AWS/EC2", "Invocations", DIMS) is None


# ---------------------------------------------------------------------- the alarm service


class FakeScaler:
    def __init__(self, known: tuple[str, ...] = (POLICY,)) -> None:
        self.known = known
        self.calls: list[tuple[str, str, float, float]] = []
        self.states: list[str] = []

    def alarm_fired(
        self, policy_arn: str, alarm_name: str, metric: float, threshold: float, alarm_state: str = "ALARM"
    ) -> bool:
        self.calls.append((policy_arn, alarm_name, metric, threshold))
        self.states.append(alarm_state)
        return policy_arn in self.known


class Rig:
    """An AlarmService on a fake clock: `minute(requests)` records a period's requests and closes it."""

    def __init__(self, state_dir: Path, scaler: FakeScaler | None = None) -> None:
        self.clock = Clock(T0 + 1)
        self.metrics = Metrics(clock=self.clock)
        self.metrics.set_instances("ep", "AllTraffic", 1)  # the series begins at INDEX
        self.scaler = scaler or FakeScaler()
        config = ServerConfig(state_dir=state_dir)
        self.svc = AlarmService(
            config,
            self.metrics,
            cast(AutoScaler, self.scaler),
            lambda: datetime.fromtimestamp(self.clock.now, UTC),
        )

    def minute(self, requests: int) -> None:
        for _ in range(requests):
            self.metrics.record("ep", "AllTraffic", m.OK, 0.001, 0.002)
        self.clock.now = (int(self.clock.now // 60) + 1) * 60 + 0.05  # just after the period closes
        self.svc.evaluate()

    def state(self, name: str = "a") -> AlarmState:
        return self.svc.describe_alarms([name])[0].state.value


def high(**changes: Any) -> AlarmSpec:
    return spec(2, threshold=10.0, alarm_actions=(POLICY, SNS), **changes)


def test_alarm_goes_to_alarm_and_runs_its_scaling_action_at_every_evaluation(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    created = rig.svc.put_metric_alarm(high())
    assert created.arn == "arn:aws:cloudwatch:us-east-1:123456789012:alarm:a"
    assert created.state.value is INSUFFICIENT and created.state.reason == al.UNCHECKED
    rig.minute(20)  # one breaching datapoint of two, the one before is missing: undecided
    assert rig.state() is INSUFFICIENT and rig.scaler.calls == []
    rig.minute(30)
    alarm = rig.svc.describe_alarms()[0]
    assert alarm.state.value is ALARM
    assert alarm.state.reason.startswith("Threshold Crossed: 2 out of the last 2 datapoints [30.0 (")
    assert rig.scaler.calls == [(POLICY, "a", 30.0, 10.0)]  # the newest datapoint, the threshold
    transitioned = alarm.state.transitioned
    rig.minute(40)
    assert rig.scaler.calls[-1] == (POLICY, "a", 40.0, 10.0)  # again while it stays in ALARM
    assert rig.scaler.states == ["ALARM", "ALARM"]  # the state named in the activity's Cause
    assert rig.svc.describe_alarms()[0].state.transitioned == transitioned
    rig.minute(0)  # 40, 0: one of two breaching
    assert rig.state() is OK and len(rig.scaler.calls) == 2
    rig.minute(0)
    assert len(rig.scaler.calls) == 2  # no OK actions
    history = rig.svc.history("a", None, None, None, oldest_first=True)
    assert [(h.item_type.value, h.summary) for h in history] == [
        ("ConfigurationUpdate", 'Alarm "a" created'),
        ("StateUpdate", "Alarm updated from INSUFFICIENT_DATA to ALARM"),
        ("Action", f"Successfully executed action {POLICY}"),
        (
            "Action",
            f"smlocal does not execute action {SNS}: only Application Auto Scaling policy actions run",
        ),
        ("StateUpdate", "Alarm updated from ALARM to OK"),
    ]
    update = json.loads(history[1].data)
    assert update["oldState"] == {"stateValue": "INSUFFICIENT_DATA", "stateReason": al.UNCHECKED}
    assert update["newState"]["stateValue"] == "ALARM"
    assert update["newState"]["stateReasonData"]["recentDatapoints"] == [20.0, 30.0]


def test_a_period_of_two_minutes_sums_two_metric_periods(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.svc.put_metric_alarm(spec(1, period=120, threshold=10.0))
    rig.minute(6)
    rig.minute(6)
    windows = rig.svc.windows(rig.svc.describe_alarms()[0].spec, rig.metrics.period_index() - 1)
    assert [w.value for w in windows] == [None, None, 12.0]  # EvaluationPeriods + 2 windows, oldest first
    assert rig.state() is ALARM


def test_disabled_actions_and_unknown_policies(tmp_path: Path) -> None:
    rig = Rig(tmp_path, FakeScaler(known=()))
    rig.svc.put_metric_alarm(high(name="off", actions_enabled=False))
    rig.svc.put_metric_alarm(high(name="unknown"))
    rig.minute(20)
    rig.minute(20)
    assert rig.state("off") is ALARM and rig.state("unknown") is ALARM
    assert [c[1] for c in rig.scaler.calls] == ["unknown"]
    actions = [h.summary for h in rig.svc.history(None, "Action", None, None, oldest_first=True)]
    assert actions[0] == (
        f'Failed to execute action {POLICY}. Received error: "No Application Auto Scaling step scaling policy '
        'has this ARN"'
    )
    rig.svc.set_actions_enabled(["unknown"], False)
    rig.minute(20)
    assert len(rig.scaler.calls) == 1


def test_set_alarm_state_holds_until_the_next_evaluation(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.svc.put_metric_alarm(high())
    rig.minute(0)
    rig.minute(0)
    assert rig.state() is OK
    rig.svc.set_alarm_state("a", "ALARM", "testing the policy", '{"by": "test"}')
    alarm = rig.svc.describe_alarms()[0]
    assert (alarm.state.value, alarm.state.reason, alarm.state.reason_data) == (
        ALARM,
        "testing the policy",
        '{"by": "test"}',
    )
    assert rig.scaler.calls == [(POLICY, "a", 10.0, 10.0)]  # no datapoint: the threshold
    rig.minute(0)
    assert rig.state() is OK
    with pytest.raises(AlarmNotFound) as missing:
        rig.svc.set_alarm_state("b", "OK", "r", None)
    assert missing.value.message == "Alarm b not found"
    with pytest.raises(InvalidFormat):
        rig.svc.set_alarm_state("a", "OK", "r", "{not json")


def test_delete_is_all_or_nothing(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.svc.put_metric_alarm(spec(name="a"))
    rig.svc.put_metric_alarm(spec(name="b"))
    with pytest.raises(AlarmNotFound) as exc:
        rig.svc.delete_alarms(["a", "x", "y"])
    assert exc.value.message == "Alarms x, y not found"
    assert [a.spec.name for a in rig.svc.describe_alarms()] == ["a", "b"]
    rig.svc.delete_alarms(["a"])
    assert [a.spec.name for a in rig.svc.describe_alarms()] == ["b"]
    assert rig.svc.history("a", None, None, None, oldest_first=False)[0].summary == 'Alarm "a" deleted'


def test_describe_filters(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.svc.put_metric_alarm(high(name="high-1"))
    rig.svc.put_metric_alarm(spec(2, name="low-1", comparison=Comparison.LT, threshold=5.0))
    rig.minute(0)
    rig.minute(0)
    names = [a.spec.name for a in rig.svc.describe_alarms()]
    assert names == ["high-1", "low-1"]
    assert [a.spec.name for a in rig.svc.describe_alarms(prefix="low")] == ["low-1"]
    assert [a.spec.name for a in rig.svc.describe_alarms(state="ALARM")] == ["low-1"]
    assert [a.spec.name for a in rig.svc.describe_alarms(action_prefix="arn:aws:sns")] == ["high-1"]


async def test_alarms_persist_across_restarts(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.svc.start()
    rig.svc.put_metric_alarm(
        high(description="d", unit="None", treat_missing_data=TreatMissing.IGNORE, ok_actions=(SNS,))
    )
    rig.minute(20)
    rig.minute(20)
    before = rig.svc.describe_alarms()
    await rig.svc.close()
    document = json.loads((tmp_path / "alarms.json").read_text())
    assert [a["spec"]["name"] for a in document["alarms"]] == ["a"]
    again = Rig(tmp_path)
    again.svc.start()
    try:
        assert again.svc.describe_alarms() == before
        assert before[0].state.value is ALARM
    finally:
        await again.svc.close()
    (tmp_path / "alarms.json").write_text("{not json")
    broken = Rig(tmp_path)
    broken.svc.start()
    await broken.svc.close()
    assert broken.svc.describe_alarms() == []
