"""A user's test file: their model image run as SageMaker runs it, with SageMakerContainer.

    TESTCONTAINERS_RYUK_DISABLED=true MODEL_IMAGE=my-model:latest pytest test_quickstart.py

docs/quickstart-testcontainers.md explains each line; tests/integration/test_sagemaker_container.py
runs this file (with the project's echo image and a model.tar.gz beside it), so it cannot rot.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract_tests.containers import SageMakerContainer

IMAGE = os.environ.get("MODEL_IMAGE", "my-model:latest")
MODEL_DATA = Path(__file__).parent / "model.tar.gz"


@pytest.fixture(scope="module")
def model() -> Iterator[SageMakerContainer]:
    # `docker run IMAGE serve`, model.tar.gz extracted read-only at /opt/ml/model, port 8080 on
    # 127.0.0.1; returns once GET /ping answers 200 (2 s per ping, within 8 minutes: lowered here).
    with SageMakerContainer(IMAGE, model_data=MODEL_DATA, startup_timeout_s=60) as container:
        yield container
    # left the with block: SIGTERM, up to 30 s to exit, SIGKILL, container removed


def test_the_model_answers_json(model: SageMakerContainer) -> None:
    answer = model.invoke(json.dumps({"inputs": [1, 2, 3]}), accept="application/json")
    assert answer.status == 200, answer.text()
    assert answer.content_type == "application/json"
    assert json.loads(answer.body)


def test_the_health_check_answers_200(model: SageMakerContainer) -> None:
    assert model.ping().status == 200
