"""The multi-model test image against the MME container API table (hosting contract §5), on a real
engine: model folders bind-mounted read-only at /opt/ml/models/{model_name}/model, as SageMaker
extracts artifacts, and every call made over a port published on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import docker
import pytest
from docker.models.containers import Container

from contract_tests.containers import SageMakerContainer
from tests.fixtures.mme import mme_model_dir
from tests.fixtures.sagemaker_container import no_reaper  # noqa: F401
from tests.integration.test_echo_image import exit_code, request

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("no_reaper")]

MODELS = "/opt/ml/models"


@contextmanager
def mme_container(
    client: docker.DockerClient, image: str, models_dir: Path, **env: str
) -> Iterator[tuple[Container, int]]:
    """Run the image as SageMaker runs an MME container (SageMakerContainer with models_dir:
    SAGEMAKER_MULTI_MODEL=true, the folder read-only at /opt/ml/models), healthy; removed afterwards."""
    with SageMakerContainer(image, models_dir=models_dir, environment=env, startup_timeout_s=30) as model:
        yield model.get_wrapped_container(), model.host_port


def call(
    port: int, method: str, path: str, body: Any = None, **headers: str
) -> tuple[int, Any, dict[str, str]]:
    data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
    if data is not None and "Content-Type" not in headers:
        headers = {"Content-Type": "application/json", "Accept": "application/json", **headers}
    status, raw, response_headers = request(port, method, path, data, **headers)
    is_json = response_headers.get("Content-Type") == "application/json"
    return status, json.loads(raw) if is_json else raw, response_headers


def load(port: int, name: str) -> tuple[int, Any]:
    status, body, _ = call(port, "POST", "/models", {"model_name": name, "url": f"{MODELS}/{name}/model"})
    return status, body


@pytest.fixture
def models_dir(tmp_path: Path) -> Path:
    root = tmp_path / "models"
    for name, answer in (("m1", "alpha"), ("m2", "beta"), ("m4", "delta")):
        mme_model_dir(root / name / "model", answer)
    plain = root / "m3" / "model"
    (plain / "sub").mkdir(parents=True)
    (plain / "weights.bin").write_bytes(b"w")
    (plain / "sub" / "config.json").write_text("{}")
    return root


def test_the_container_api_table(
    docker_engine: docker.DockerClient, mme_image: str, models_dir: Path
) -> None:
    image = docker_engine.images.get(mme_image)
    assert image.labels["com.amazonaws.sagemaker.capabilities.multi-models"] == "true"
    assert image.labels["com.amazonaws.sagemaker.capabilities.accept-bind-to-port"] == "true"
    with mme_container(docker_engine, mme_image, models_dir, MAX_LOADED="3") as (container, port):
        assert b"SAGEMAKER_MULTI_MODEL=true" in container.logs()
        # Load: 200, then 409 for the same name; 400 for a folder that is not there, or a bad body.
        assert load(port, "m1") == (200, {"status": "Model m1 loaded"})
        status, body = load(port, "m1")
        assert (status, body["message"]) == (409, "model m1 is already loaded")
        status, body, _ = call(port, "POST", "/models", {"model_name": "x", "url": f"{MODELS}/none/model"})
        assert status == 400 and "cannot read the model folder /opt/ml/models/none/model" in body["message"]
        status, body, _ = call(port, "POST", "/models", {"url": f"{MODELS}/m2/model"})
        assert status == 400 and "model_name" in body["message"]
        assert load(port, "m2")[0] == 200 and load(port, "m3")[0] == 200
        # 507 once MAX_LOADED models are loaded.
        status, body = load(port, "m4")
        assert (status, body["message"]) == (507, "cannot load m4: 3 models are loaded already")

        # Get: the entry, or 404.
        status, body, _ = call(port, "GET", "/models/m2")
        assert (status, body) == (200, {"modelName": "m2", "modelUrl": f"{MODELS}/m2/model"})
        status, body, _ = call(port, "GET", "/models/m4")
        assert (status, body["message"]) == (404, "model m4 is not loaded")

        # List: two a page, nextPageToken absent on the last page.
        status, first, _ = call(port, "GET", "/models")
        assert status == 200
        assert first["models"] == [
            {"modelName": "m1", "modelUrl": f"{MODELS}/m1/model"},
            {"modelName": "m2", "modelUrl": f"{MODELS}/m2/model"},
        ]
        status, last, _ = call(port, "GET", f"/models?next_page_token={first['nextPageToken']}")
        assert (status, last) == (200, {"models": [{"modelName": "m3", "modelUrl": f"{MODELS}/m3/model"}]})
        assert call(port, "GET", "/models?next_page_token=bogus")[0] == 400

        # Invoke: the body format, the answer (answer.txt, or the folder's file list), 404 when not loaded.
        status, body, headers = call(
            port, "POST", "/models/m1/invoke", b"hello", **{"X-Amzn-SageMaker-Target-Model": "a/m1.tar.gz"}
        )
        assert (status, body, headers["Content-Type"]) == (
            200,
            b"hello|alpha|target=a/m1.tar.gz|loads=1",
            "text/plain",
        )
        assert (
            call(port, "POST", "/models/m3/invoke", b"")[1]
            == b"|sub/config.json,weights.bin|target=-|loads=1"
        )
        status, body, _ = call(port, "POST", "/models/m4/invoke", b"x")
        assert (status, body["message"]) == (404, "model m4 is not loaded")

        # Unload: 200 and gone (room for another), 404 the second time; a reload counts.
        status, body, _ = call(port, "DELETE", "/models/m1")
        assert (status, body) == (200, {"status": "Model m1 unloaded"})
        assert call(port, "GET", "/models/m1")[0] == 404
        assert call(port, "POST", "/models/m1/invoke", b"x")[0] == 404
        status, body, _ = call(port, "DELETE", "/models/m1")
        assert (status, body["message"]) == (404, "model m1 is not loaded")
        assert load(port, "m4")[0] == 200
        assert call(port, "DELETE", "/models/m4")[0] == 200
        assert load(port, "m1")[0] == 200
        assert call(port, "POST", "/models/m1/invoke", b"again")[1] == b"again|alpha|target=-|loads=2"
        names = [m["modelName"] for m in call(port, "GET", "/models")[1]["models"]]
        assert names == ["m2", "m3"]  # page one; m1 is on the next

        # SIGTERM: exits 0 promptly.
        started = time.monotonic()
        container.kill(signal="SIGTERM")
        assert exit_code(container, timeout_s=10) == 0
        assert time.monotonic() - started < 3.0


def test_slow_loads_of_different_models_run_in_parallel(
    docker_engine: docker.DockerClient, mme_image: str, models_dir: Path
) -> None:
    with mme_container(docker_engine, mme_image, models_dir, LOAD_SLEEP_S="2") as (container, port):
        results: dict[str, tuple[int, Any]] = {}

        def load_one(name: str) -> None:
            results[name] = load(port, name)

        threads = [threading.Thread(target=load_one, args=(name,)) for name in ("m1", "m2")]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        # While m1 loads (the container logged the claim), a second load of it is refused at once.
        deadline = time.monotonic() + 5
        while b"mme: loading m1 " not in container.logs() and time.monotonic() < deadline:
            time.sleep(0.02)
        status, body = load(port, "m1")
        assert (status, body["message"]) == (409, "model m1 is already loaded")
        assert time.monotonic() - started < 2.0
        for thread in threads:
            thread.join()
        assert results == {
            "m1": (200, {"status": "Model m1 loaded"}),
            "m2": (200, {"status": "Model m2 loaded"}),
        }
        assert time.monotonic() - started < 3.5  # two 2 s loads side by side, not one after the other


def test_sigterm_lets_a_load_in_flight_finish(
    docker_engine: docker.DockerClient, mme_image: str, models_dir: Path
) -> None:
    with mme_container(docker_engine, mme_image, models_dir, LOAD_SLEEP_S="1") as (container, port):
        results: list[tuple[int, Any]] = []
        loading = threading.Thread(target=lambda: results.append(load(port, "m1")))
        loading.start()
        deadline = time.monotonic() + 5
        while b"mme: loading m1 " not in container.logs() and time.monotonic() < deadline:
            time.sleep(0.02)
        container.kill(signal="SIGTERM")
        loading.join()
        assert results == [(200, {"status": "Model m1 loaded"})]
        assert exit_code(container, timeout_s=10) == 0
