"""emulator.hosting.scaling.store: autoscaling.json round trips and what a bad file loads as."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from emulator.hosting.scaling import store as scaling_store
from emulator.hosting.scaling.store import FORMAT_VERSION, Snapshot, load, save
from emulator.model import scaling as sc

T0 = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
KEY = sc.TargetKey(sc.SERVICE_NAMESPACE, "endpoint/ep/variant/AllTraffic", sc.VARIANT_DIMENSION)
KEY2 = sc.TargetKey(sc.SERVICE_NAMESPACE, "endpoint/other/variant/v2", sc.VARIANT_DIMENSION)
ARNS = sc.ScalingArns("us-east-1", "123456789012")


def targets() -> list[sc.ScalableTarget]:
    return [
        sc.ScalableTarget(
            key=KEY,
            arn=ARNS.scalable_target("t1"),
            min_capacity=1,
            max_capacity=4,
            role_arn=ARNS.service_linked_role(),
            creation_time=T0,
            suspended=sc.Suspended(scale_in=True, scale_out=False, scheduled=True),
            tags=(("team", "ml"), ("env", "")),
        ),
        sc.ScalableTarget(KEY2, ARNS.scalable_target("t2"), 0, 10, "arn:role", T0 + timedelta(seconds=1)),
    ]


def policies() -> list[sc.ScalingPolicy]:
    high, low = sc.alarm_names(KEY.resource_id, "abc")
    predefined = sc.ScalingPolicy(
        name="predefined",
        arn=ARNS.policy("p1", KEY, "predefined"),
        key=KEY,
        policy_type=sc.PolicyType.TARGET_TRACKING,
        creation_time=T0,
        target_tracking=sc.TargetTracking(
            target_value=70.0,
            predefined_metric=sc.INVOCATIONS_PER_INSTANCE,
            resource_label="label",
            scale_out_cooldown=60,
            scale_in_cooldown=0,
            disable_scale_in=True,
        ),
        alarms=(sc.Alarm(high, ARNS.alarm(high)), sc.Alarm(low, ARNS.alarm(low))),
    )
    custom = sc.ScalingPolicy(
        name="custom",
        arn=ARNS.policy("p2", KEY, "custom"),
        key=KEY,
        policy_type=sc.PolicyType.TARGET_TRACKING,
        creation_time=T0 + timedelta(minutes=1),
        target_tracking=sc.TargetTracking(
            target_value=2.5,
            customized_metric=sc.CustomizedMetric(
                metric_name="ModelLatency",
                namespace="AWS/SageMaker",
                dimensions=(("EndpointName", "ep"), ("VariantName", "AllTraffic")),
                statistic="Average",
                unit="Microseconds",
            ),
        ),
    )
    custom_no_unit = sc.ScalingPolicy(
        name="custom-no-unit",
        arn=ARNS.policy("p3", KEY2, "custom-no-unit"),
        key=KEY2,
        policy_type=sc.PolicyType.TARGET_TRACKING,
        creation_time=T0,
        target_tracking=sc.TargetTracking(
            target_value=5.0,
            customized_metric=sc.CustomizedMetric(
                "Invocations", "AWS/SageMaker", (("EndpointName", "other"), ("VariantName", "v2")), "Sum"
            ),
            disable_scale_in=False,
        ),
    )
    step = sc.ScalingPolicy(
        name="step",
        arn=ARNS.policy("p4", KEY2, "step"),
        key=KEY2,
        policy_type=sc.PolicyType.STEP,
        creation_time=T0,
        step_scaling=sc.StepScaling(
            adjustment_type="PercentChangeInCapacity",
            step_adjustments=(
                sc.StepAdjustment(None, 0.0, -1),
                sc.StepAdjustment(0.0, 10.5, 1),
                sc.StepAdjustment(10.5, None, 3),
            ),
            min_adjustment_magnitude=2,
            cooldown=120,
            metric_aggregation_type="Maximum",
        ),
    )
    bare_step = sc.ScalingPolicy(
        "bare-step",
        ARNS.policy("p5", KEY2, "bare-step"),
        KEY2,
        sc.PolicyType.STEP,
        T0,
        None,
        sc.StepScaling(),
    )
    return [predefined, custom, custom_no_unit, step, bare_step]


def activities() -> list[sc.ScalingActivity]:
    return [
        sc.ScalingActivity(
            activity_id="a1",
            key=KEY,
            description="Setting desired instance count to 2.",
            cause="monitor alarm high in state ALARM triggered policy predefined",
            start_time=T0,
            status=sc.ActivityStatus.SUCCESSFUL,
            status_message="Successfully set desired instance count to 2. Change successfully fulfilled by sagemaker.",
            end_time=T0 + timedelta(seconds=90),
            details="{}",
        ),
        sc.ScalingActivity(
            activity_id="a2",
            key=KEY,
            description="Setting desired instance count to 5.",
            cause="monitor alarm high in state ALARM triggered policy predefined",
            start_time=T0 + timedelta(minutes=5),
            status=sc.ActivityStatus.FAILED,
            status_message="Failed to set desired instance count to 5.",
            end_time=T0 + timedelta(minutes=6),
            not_scaled_reasons=(
                sc.NotScaledReason("AlreadyAtMaxCapacity", max_capacity=4, current_capacity=4),
                sc.NotScaledReason("AlreadyAtMinCapacity", min_capacity=1, current_capacity=1),
            ),
        ),
    ]


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "autoscaling.json"
    snapshot = Snapshot(targets(), policies(), activities())
    save(path, snapshot)
    assert json.loads(path.read_text())["version"] == FORMAT_VERSION == 1
    assert load(path) == snapshot
    assert [p.name for p in tmp_path.iterdir()] == ["autoscaling.json"]  # no temporary file left


def test_empty_round_trip_and_creates_the_directory(tmp_path: Path) -> None:
    path = tmp_path / "state" / "autoscaling.json"
    save(path, Snapshot())
    assert load(path) == Snapshot()


def test_in_progress_and_pending_activities_load_as_failed(tmp_path: Path) -> None:
    path = tmp_path / "autoscaling.json"
    running = [
        sc.ScalingActivity(
            activity_id=f"run-{status.value}",
            key=KEY,
            description="Setting desired instance count to 3.",
            cause="cause",
            start_time=T0,
            status=status,
            status_message="Waiting for change to be fulfilled by sagemaker.",
            details="d",
        )
        for status in (sc.ActivityStatus.IN_PROGRESS, sc.ActivityStatus.PENDING)
    ]
    save(path, Snapshot(activities=running))
    loaded = load(path).activities
    assert [a.activity_id for a in loaded] == ["run-InProgress", "run-Pending"]
    for a in loaded:
        assert a.status is sc.ActivityStatus.FAILED
        assert a.status_message == "smlocal stopped before the activity ended"
        assert a.end_time == T0
        assert (a.description, a.cause, a.details, a.start_time) == (
            "Setting desired instance count to 3.",
            "cause",
            "d",
            T0,
        )


def test_missing_file_is_an_empty_snapshot(tmp_path: Path) -> None:
    assert load(tmp_path / "nope.json") == Snapshot()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{not json",
        '{"targets": [{"key": ["a", "b", "c"]}]}',  # fields missing
        '{"targets": 5}',
        '{"policies": [{"name": "p", "arn": "a", "key": ["a", "b", "c"], "type": "Bogus", '
        '"created": "2024-01-01T00:00:00+00:00", "target_tracking": null, "step_scaling": null, '
        '"alarms": []}]}',
        '{"activities": [{"id": "a", "key": ["a", "b", "c"], "description": "d", "cause": "c", '
        '"start": "yesterday", "status": "Successful", "not_scaled": []}]}',
    ],
)
def test_malformed_file_is_an_empty_snapshot(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "autoscaling.json"
    path.write_text(text)
    with caplog.at_level(logging.WARNING, logger=scaling_store.__name__):
        assert load(path) == Snapshot()
    assert "ignoring" in caplog.text


def test_unreadable_file_is_an_empty_snapshot(tmp_path: Path) -> None:
    (tmp_path / "undecodable.json").write_bytes(b"\xff\xfe{]")
    assert load(tmp_path / "undecodable.json") == Snapshot()
    (tmp_path / "a-directory.json").mkdir()
    assert load(tmp_path / "a-directory.json") == Snapshot()


@pytest.mark.parametrize("text", ["[]", "null", "42", '"text"'])
def test_non_object_document_is_an_empty_snapshot(tmp_path: Path, text: str) -> None:
    path = tmp_path / "autoscaling.json"
    path.write_text(text)
    assert load(path) == Snapshot()


def test_null_timestamp_is_an_empty_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "autoscaling.json"
    save(path, Snapshot(targets=targets()))
    document = json.loads(path.read_text())
    document["targets"][0]["created"] = None
    path.write_text(json.dumps(document))
    assert load(path) == Snapshot()
