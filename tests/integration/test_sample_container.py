"""The Stable Diffusion sample image end to end: built from sample_container/, deployed through boto3,
invoked; `smlocal check` on it; and `smlocal demo` as the README runs it. Its streamed answer
(Accept: application/x-ndjson) is read straight from the container, as SageMaker reads it.

The image build reuses .smlocal/build (wheelhouse + layer cache), so a warm machine spends its time on
the container starts (the pipeline loads in a few seconds), not on building.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contract_tests.containers import SageMakerContainer
from emulator.cli import main as smlocal_main
from emulator.config import ContractLimits
from emulator.demo import DemoOptions, run_demo
from emulator.runtime.labels import owner_id
from tests.fixtures.docker_env import track_owner
from tests.fixtures.sagemaker_container import no_reaper  # noqa: F401
from tests.fixtures.sample import BUILD_DIR
from tests.fixtures.smlocal_server import Smlocal, error_of, start_smlocal

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
#: Loading torch, diffusers and the tiny pipeline takes seconds; leave room for a loaded CI machine.
LIMITS = ContractLimits(startup_timeout_s=120.0, invocation_timeout_s=60.0, stop_grace_s=10.0)
REQUEST = {"prompt": "a red fox in the snow", "seed": 7, "height": 64, "width": 64, "num_inference_steps": 2}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NAME = "sd-test"


@pytest.fixture(scope="module")
def sd(
    tmp_path_factory: pytest.TempPathFactory, sample_image: str, sample_model_tar: Path
) -> Iterator[Smlocal]:
    """An smlocal server with the sample deployed as endpoint NAME (CPU instance type)."""
    env = start_smlocal(tmp_path_factory.mktemp("smlocal-sd"), sample_image, limits=LIMITS)
    try:
        described = env.deploy(NAME, model_data=sample_model_tar.as_uri(), wait=False)
        described = env.wait(NAME, timeout_s=LIMITS.startup_timeout_s + 30)
        assert described["EndpointStatus"] == "InService", described.get("FailureReason")
        yield env
    finally:
        env.cleanup(NAME)
        env.server.stop()


def invoke(sd: Smlocal, body: dict[str, Any], accept: str = "image/png") -> tuple[bytes, str]:
    response = sd.rt.invoke_endpoint(
        EndpointName=NAME, Body=json.dumps(body).encode(), ContentType="application/json", Accept=accept
    )
    return response["Body"].read(), response["ContentType"]


def test_png_is_valid_64x64_and_the_same_for_the_same_seed(sd: Smlocal) -> None:
    from PIL import Image

    first, content_type = invoke(sd, REQUEST)
    assert content_type == "image/png"
    assert first.startswith(PNG_MAGIC)
    with Image.open(io.BytesIO(first)) as image:
        image.verify()
    with Image.open(io.BytesIO(first)) as image:
        assert image.size == (64, 64)
        assert image.format == "PNG"
    second, _ = invoke(sd, REQUEST)
    assert second == first
    other, _ = invoke(sd, {**REQUEST, "seed": 8})
    assert other != first


def test_json_accept_gives_the_same_png_in_base64(sd: Smlocal) -> None:
    png, _ = invoke(sd, REQUEST)
    data, content_type = invoke(sd, REQUEST, accept="application/json")
    assert content_type.startswith("application/json")
    document = json.loads(data)
    decoded = [
        base64.b64decode(value)
        for value in _strings(document)
        if value.startswith(base64.b64encode(PNG_MAGIC[:6]).decode())
    ]
    assert decoded == [png], f"no base64 PNG equal to the image/png answer in {str(document)[:300]}"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@pytest.mark.parametrize(
    "body",
    [b"not json", json.dumps({**REQUEST, "num_inference_steps": "many"}).encode(), b'{"seed": 1}'],
    ids=["not-json", "bad-steps", "no-prompt"],
)
def test_bad_input_is_a_model_error_with_the_containers_400(sd: Smlocal, body: bytes) -> None:
    with pytest.raises(sd.rt.exceptions.ModelError) as raised:
        sd.rt.invoke_endpoint(EndpointName=NAME, Body=body, ContentType="application/json")
    code, status, _ = error_of(raised)
    response = raised.value.response
    assert (code, status) == ("ModelError", 424)
    assert response["OriginalStatusCode"] == 400
    reason = json.loads(response["OriginalMessage"])
    assert isinstance(reason.get("error"), str) and reason["error"], reason


def test_smlocal_check_passes_on_the_sample_image(
    sample_image: str, sample_model_tar: Path, tmp_path: Path
) -> None:
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(REQUEST))
    report = tmp_path / "report.json"
    status = smlocal_main(
        [
            "check",
            sample_image,
            "--model-data",
            str(sample_model_tar),
            "--payload",
            str(payload),
            "--startup-timeout",
            "120",
            "--stop-grace",
            "15",
            "--streaming",  # the sample streams a line per step for "stream": true
            "--stream-body",
            json.dumps({**REQUEST, "num_inference_steps": 60, "stream": True}),
            "--json",
            str(report),
        ]
    )
    document = json.loads(report.read_text())
    rows = document["results"]
    outcomes = {row["id"]: row["outcome"] for row in rows}
    bad = {check_id: o for check_id, o in outcomes.items() if o not in ("passed", "skipped")}
    assert not bad, json.dumps([r for r in rows if r["id"] in bad], indent=1)[:4000]
    assert status == 0
    # It serves: the prompt got a 2xx, and nothing must-read was left in the summary line.
    assert outcomes["invocations.serves"] == "passed"
    assert outcomes["model-data.extracts"] == "passed"
    for check_id in ("streaming.incremental", "streaming.framing", "streaming.disconnect"):
        assert outcomes[check_id] == "passed", check_id
    assert document["headline_warnings"] == []


def test_smlocal_demo_writes_a_png(sample_image: str, tmp_path: Path) -> None:
    out = tmp_path / "x.png"
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "COLUMNS": "160", "PYTHONPATH": pythonpath}
    args = ["--out", str(out), "--port", "0", "--state-dir", str(tmp_path / "state")]
    proc = subprocess.run(
        [sys.executable, "-m", "emulator.cli", "demo", *args, "--build-dir", str(BUILD_DIR)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=400,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert out.read_bytes().startswith(PNG_MAGIC)
    assert str(out) in proc.stdout.replace("\n", "")
    for timing in ("image build", "model build", "deploy -> InService", "per request"):
        assert timing in proc.stdout
    assert "torch build in the image: CPU only" in proc.stdout  # read from the image's label


# ------------------------------------------------------------------------- streamed, from the container


@pytest.fixture(scope="module")
def sd_container(
    request: pytest.FixtureRequest, sample_image: str, sample_model_tar: Path
) -> Iterator[tuple[Any, str]]:
    """The sample image run as SageMaker runs it (SageMakerContainer: `serve`, the model read-only at
    /opt/ml/model, port 8080 published on 127.0.0.1 only); yields it and its base URL once /ping
    answers 200."""
    request.getfixturevalue("no_reaper")
    model = sample_model_tar.parent / "model"  # the folder the fixture packed
    with SageMakerContainer(sample_image, model_data=model, limits=LIMITS) as container:
        yield container.get_wrapped_container(), container.url


def test_the_container_streams_a_line_per_step_then_the_png(sd_container: tuple[Any, str]) -> None:
    from PIL import Image

    _, url = sd_container
    body = {**REQUEST, "num_inference_steps": 8}
    arrivals: list[tuple[float, dict[str, Any]]] = []
    with httpx.Client(timeout=LIMITS.invocation_timeout_s) as client:
        whole = client.post(f"{url}/invocations", json=body, headers={"Accept": "image/png"})
        assert whole.status_code == 200 and whole.headers["content-type"] == "image/png"
        started = time.monotonic()
        with client.stream(
            "POST", f"{url}/invocations", json=body, headers={"Accept": "application/x-ndjson"}
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/x-ndjson"
            assert response.headers["transfer-encoding"] == "chunked"
            assert response.headers["x-amzn-sagemaker-custom-attributes"] == "seed=7"
            for line in response.iter_lines():
                arrivals.append((time.monotonic() - started, json.loads(line)))
    *progress, (_, last) = arrivals
    steps = progress[0][1]["steps"]
    assert steps == 9  # PNDM: num_inference_steps + 1 denoising passes
    assert [event for _, event in progress] == [
        {"event": "progress", "step": i, "steps": steps} for i in range(1, steps + 1)
    ]
    assert last["event"] == "image" and last["content_type"] == "image/png" and last["seed"] == 7
    png = base64.b64decode(last["image"])
    assert png.startswith(PNG_MAGIC)
    with Image.open(io.BytesIO(png)) as image:
        image.verify()
    assert png == whole.content  # the same image as the unstreamed answer
    times = [t for t, _ in arrivals]
    assert times == sorted(times)


def test_a_client_leaving_mid_stream_stops_the_generation_and_the_container_serves_on(
    sd_container: tuple[Any, str],
) -> None:
    container, url = sd_container
    body = {**REQUEST, "num_inference_steps": 150, "seed": 99}  # the most steps the sample allows
    with httpx.Client(timeout=LIMITS.invocation_timeout_s) as client:
        with client.stream(
            "POST", f"{url}/invocations", json=body, headers={"Accept": "application/x-ndjson"}
        ) as response:
            first = json.loads(next(response.iter_lines()))
            assert first == {"event": "progress", "step": 1, "steps": 151}
        # closed after one line; the server stops the pipeline at a following step
        deadline = time.monotonic() + LIMITS.invocation_timeout_s
        logs = ""
        while "ended early" not in logs and time.monotonic() < deadline:
            logs = container.logs().decode(errors="replace")
            time.sleep(0.1)  # polls the container's log for the line the server writes
        assert "the client of a streamed answer went away" in logs, logs[-2000:]
        stopped = re.search(r"generation \(seed 99\) ended early: .* stopped after step (\d+) of 151", logs)
        assert stopped and int(stopped[1]) < 151, logs[-2000:]
        assert "seed 99 in" not in logs  # the abandoned image was never finished
        assert client.get(f"{url}/ping").status_code == 200
        after = client.post(f"{url}/invocations", json=REQUEST, headers={"Accept": "image/png"})
        assert after.status_code == 200 and after.content.startswith(PNG_MAGIC)


# ------------------------------------------------------------------ streamed, through smlocal and boto3


def test_the_stream_op_through_smlocal_hands_on_each_line_then_the_png(sd: Smlocal) -> None:
    """Unchanged boto3: X-Amzn-SageMaker-Accept reaches the container as Accept, the parts re-assemble
    (across any cut) to the container's lines, and its headers come back as the stream's."""
    png, _ = invoke(sd, REQUEST)
    response = sd.rt.invoke_endpoint_with_response_stream(
        EndpointName=NAME,
        Body=json.dumps(REQUEST).encode(),
        ContentType="application/json",
        Accept="application/x-ndjson",
    )
    assert response["ContentType"] == "application/x-ndjson"
    assert response["CustomAttributes"] == "seed=7"
    assert response["InvokedProductionVariant"] == "AllTraffic"
    data = b"".join(event["PayloadPart"]["Bytes"] for event in response["Body"] if "PayloadPart" in event)
    *progress, last = [json.loads(line) for line in data.splitlines()]
    assert progress == [{"event": "progress", "step": i, "steps": 3} for i in (1, 2, 3)]  # 2 steps + PNDM's 1
    assert last["event"] == "image" and base64.b64decode(last["image"]) == png
    # without an Accept (as smlocal check --streaming sends its --stream-body): "stream": true asks
    asked = sd.rt.invoke_endpoint_with_response_stream(
        EndpointName=NAME,
        Body=json.dumps({**REQUEST, "stream": True}).encode(),
        ContentType="application/json",
    )
    assert asked["ContentType"] == "application/x-ndjson"
    again = b"".join(event["PayloadPart"]["Bytes"] for event in asked["Body"] if "PayloadPart" in event)
    assert again == data


def test_smlocal_demo_stream_shows_the_steps_and_writes_the_png(
    sample_image: str, sample_model_tar: Path, tmp_path: Path
) -> None:
    """`smlocal demo --stream` as run_demo runs it (in this process, on this tree's image tag)."""
    from rich.console import Console

    state_dir = tmp_path / "state"
    track_owner(owner_id(state_dir.resolve()))  # the session's leak check covers the demo's containers
    out = tmp_path / "streamed.png"
    options = DemoOptions(
        out=out,
        port=0,
        state_dir=state_dir,
        build_dir=BUILD_DIR,
        stream=True,
        image=sample_image,
        requests=2,
        startup_timeout_s=LIMITS.startup_timeout_s,
    )
    console = Console(file=io.StringIO(), width=160)
    assert run_demo(options, console=console) == 0
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert out.read_bytes().startswith(PNG_MAGIC)
    assert "time to first part (streamed)" in text and "first " in text, text[-2000:]
    # the default 4 steps: PNDM's 5 denoising passes, each its own line, then the image
    assert "5 step lines of 5, then the image, in " in text, text[-2000:]
