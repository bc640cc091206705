"""SageMaker's endpoint metrics and `smlocal logs --follow` against real echo containers."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.fixtures.signals import default_sigint
from tests.fixtures.smlocal_server import Smlocal, start_smlocal

pytestmark = pytest.mark.docker

PERIOD_S = 0.5  # metrics period and sampling interval of this module's server
OK, E4XX, E5XX = 6, 2, 3


@pytest.fixture(scope="module")
def smlocal(
    tmp_path_factory: pytest.TempPathFactory, echo_image: str, s3_server: str, aws_credentials: None
) -> Iterator[Smlocal]:
    """This module's own server: short metric periods (the shared fixture keeps the default)."""
    env = start_smlocal(
        tmp_path_factory.mktemp("smlocal"), echo_image, s3_endpoint_url=s3_server, metrics_period_s=PERIOD_S
    )
    try:
        yield env
    finally:
        env.server.stop()


@pytest.fixture(scope="module")
def measured(smlocal: Smlocal) -> Iterator[str]:
    described = smlocal.deploy("Measured", count=2)
    assert described["EndpointStatus"] == "InService", described
    for _ in range(OK):
        smlocal.rt.invoke_endpoint(EndpointName="Measured", Body=b"hi", ContentType="text/plain")
    for status, times in (("404", E4XX), ("500", E5XX)):
        for _ in range(times):
            with pytest.raises(ClientError) as exc:
                smlocal.rt.invoke_endpoint(
                    EndpointName="Measured", Body=b"x", CustomAttributes=f"status={status}"
                )
            assert exc.value.response["Error"]["Code"] == "ModelError"
    yield "Measured"
    smlocal.cleanup("Measured")


def _totals(report: dict[str, Any], metric: str, stat: str = "Sum") -> float:
    return sum(p["Metrics"].get(metric, {}).get(stat, 0) for p in report["Periods"])


def _report(smlocal: Smlocal, name: str) -> dict[str, Any]:
    resp = httpx.get(f"{smlocal.server.url}/_smlocal/endpoints/{name}/metrics", timeout=10)
    assert resp.status_code == 200, resp.text
    report: dict[str, Any] = resp.json()
    return report


def test_json_report_counts_what_was_sent(smlocal: Smlocal, measured: str) -> None:
    report = _report(smlocal, measured)
    assert report["EndpointName"] == measured
    assert report["PeriodSeconds"] == PERIOD_S
    total = OK + E4XX + E5XX
    assert _totals(report, "Invocations") == total
    assert _totals(report, "InvocationsPerInstance") == pytest.approx(total / 2)
    assert _totals(report, "Invocation4XXErrors") == E4XX
    assert _totals(report, "Invocation5XXErrors") == E5XX
    assert _totals(report, "InvocationModelErrors") == E4XX + E5XX
    assert _totals(report, "ModelLatency", "SampleCount") == total
    assert _totals(report, "OverheadLatency", "SampleCount") == total
    for period in report["Periods"]:
        assert period["VariantName"] == "AllTraffic"
        latency = period["Metrics"]["ModelLatency"]
        if latency["SampleCount"]:
            assert latency["Unit"] == "Microseconds"
            assert 0 < latency["Minimum"] <= latency["Average"] <= latency["Maximum"] < 2_000_000
            assert period["Metrics"]["OverheadLatency"]["Minimum"] >= 0


def test_prometheus_exposition(smlocal: Smlocal, measured: str) -> None:
    resp = httpx.get(f"{smlocal.server.url}/metrics", timeout=10)
    assert resp.status_code == 200
    assert resp.headers["Content-Type"].startswith("text/plain")
    labels = f'endpoint_name="{measured}",variant_name="AllTraffic"'
    values = {}
    for line in resp.text.splitlines():
        if not line.startswith("#") and labels in line:
            name, value = line.split(" ")
            values[name.split("{")[0]] = float(value)
    assert values["sagemaker_invocations_total"] == OK + E4XX + E5XX
    assert values["sagemaker_invocation_4xx_errors_total"] == E4XX
    assert values["sagemaker_invocation_5xx_errors_total"] == E5XX
    assert values["sagemaker_invocation_model_errors_total"] == E4XX + E5XX
    assert values["sagemaker_model_latency_microseconds_count"] == OK + E4XX + E5XX
    assert values["sagemaker_model_latency_microseconds_sum"] > 0
    assert "sagemaker_overhead_latency_microseconds_sum" in values


def test_cpu_and_memory_sampled(smlocal: Smlocal, measured: str) -> None:
    deadline = time.monotonic() + 30 * PERIOD_S + 10
    while True:
        report = _report(smlocal, measured)
        cpu = [p["Metrics"]["CPUUtilization"] for p in report["Periods"] if "CPUUtilization" in p["Metrics"]]
        mem = [
            p["Metrics"]["MemoryUtilization"]
            for p in report["Periods"]
            if "MemoryUtilization" in p["Metrics"]
        ]
        if cpu and mem:
            break
        assert time.monotonic() < deadline, report
        time.sleep(PERIOD_S / 2)
    assert cpu[-1]["Unit"] == "Percent" and cpu[-1]["Namespace"] == "/aws/sagemaker/Endpoints"
    assert all(0 <= s["Minimum"] <= s["Maximum"] for s in cpu)
    assert all(0 < s["Minimum"] <= s["Maximum"] <= 100 for s in mem)
    assert report["Variants"] == [{"VariantName": "AllTraffic", "InstanceCount": 2}]


def test_faults_are_attributed_to_the_variant_called(smlocal: Smlocal) -> None:
    variants = [
        {
            "VariantName": v,
            "ModelName": "TwoVariants",
            "InitialInstanceCount": 1,
            "InstanceType": "ml.m5.large",
        }
        for v in ("A", "B")
    ]
    try:
        described = smlocal.deploy("TwoVariants", variants=variants)
        assert described["EndpointStatus"] == "InService", described
        with pytest.raises(ClientError):
            smlocal.rt.invoke_endpoint(
                EndpointName="TwoVariants", Body=b"x", TargetVariant="B", CustomAttributes="status=503"
            )
        deadline = time.monotonic() + 30 * PERIOD_S + 10
        while True:  # until the sampler has seen both instances (their host ports)
            sampled = {
                p["VariantName"]
                for p in _report(smlocal, "TwoVariants")["Periods"]
                if "MemoryUtilization" in p["Metrics"]
            }
            if sampled == {"A", "B"}:
                break
            assert time.monotonic() < deadline
            time.sleep(PERIOD_S / 2)
        served = {"A": 0, "B": 0}
        for _ in range(8):
            served[
                smlocal.rt.invoke_endpoint(EndpointName="TwoVariants", Body=b"ok")["InvokedProductionVariant"]
            ] += 1
        for _ in range(8):
            with pytest.raises(ClientError):
                smlocal.rt.invoke_endpoint(
                    EndpointName="TwoVariants", Body=b"x", CustomAttributes="status=500"
                )
        report = _report(smlocal, "TwoVariants")
        by_variant: dict[str, dict[str, float]] = {"A": {}, "B": {}}
        for period in report["Periods"]:
            for metric in ("Invocations", "Invocation5XXErrors"):
                counts = by_variant[period["VariantName"]]
                counts[metric] = counts.get(metric, 0) + period["Metrics"][metric]["Sum"]
        assert by_variant["B"]["Invocation5XXErrors"] >= 1
        assert by_variant["A"]["Invocation5XXErrors"] + by_variant["B"]["Invocation5XXErrors"] == 9
        assert by_variant["A"]["Invocations"] + by_variant["B"]["Invocations"] == 17
        assert by_variant["A"]["Invocations"] >= served["A"]
    finally:
        smlocal.cleanup("TwoVariants")


def test_metrics_cli(smlocal: Smlocal, measured: str) -> None:
    env = {**os.environ, "SMLOCAL_ENDPOINT_URL": smlocal.server.url, "COLUMNS": "250"}
    table = subprocess.run(
        [sys.executable, "-m", "emulator.cli", "metrics", measured],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert table.returncode == 0, table.stderr
    assert "AllTraffic" in table.stdout and "invocations" in table.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "emulator.cli", "metrics", measured, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert '"Invocation5XXErrors"' in as_json.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "emulator.cli", "metrics", "Nope"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert missing.returncode == 1 and "Nope" in missing.stderr


def test_logs_follow_gets_lines_written_after_it_started_and_new_instances(smlocal: Smlocal) -> None:
    described = smlocal.deploy("Followed")
    assert described["EndpointStatus"] == "InService", described
    env = {**os.environ, "SMLOCAL_ENDPOINT_URL": smlocal.server.url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulator.cli", "logs", "Followed", "--follow", "--variant", "AllTraffic"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=default_sigint,  # its Ctrl-C below must reach it
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout
    reader = threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True)
    reader.start()

    def wait_for(text: str, timeout_s: float = 20.0) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} within {timeout_s} s") from None
            if text in line:
                return line

    try:
        healthy = wait_for("echo: listening")  # the history arrived: the stream is open
        assert healthy.startswith("AllTraffic/i-")
        smlocal.rt.invoke_endpoint(EndpointName="Followed", Body=b"hi", ContentType="text/plain")
        line = wait_for("POST /invocations")  # written by the container after following began
        assert line.split(" ", 1)[0] == healthy.split(" ", 1)[0]
        # an instance started after following began (a scale-out) joins the stream
        smlocal.sm.update_endpoint_weights_and_capacities(
            EndpointName="Followed",
            DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 2}],
        )
        second = wait_for("echo: listening")
        assert second.startswith("AllTraffic/i-") and second.split(" ", 1)[0] != healthy.split(" ", 1)[0]
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(timeout=10)
            stdout.close()
            assert proc.stderr is not None
            proc.stderr.close()
        smlocal.cleanup("Followed")
