"""The project's own tests: the model image behind a local SageMaker endpoint.

No conftest: `sagemaker_endpoint` and `sagemaker_clients` (and the smlocal_reuse_endpoints marker)
come from smlocal's pytest plugin, loaded because smlocal is installed. The image is the one CI just
built (IMAGE), the model data the model.tar.gz CI packed from model/.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

IMAGE = os.environ.get("IMAGE", "my-model:ci")
MODEL_DATA = (Path(__file__).resolve().parents[1] / "model.tar.gz").as_uri()
# One endpoint for the module: the same sagemaker_endpoint(...) call returns the same endpoint.
pytestmark = pytest.mark.smlocal_reuse_endpoints


def test_predicts_with_the_packed_weights(sagemaker_endpoint, sagemaker_clients) -> None:
    name = sagemaker_endpoint(IMAGE, model_data=MODEL_DATA)  # InService when it returns
    body = json.dumps({"instances": [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]}).encode()
    out = sagemaker_clients.runtime.invoke_endpoint(
        EndpointName=name, Body=body, ContentType="application/json"
    )
    # model/model.json: weights [0.5, -1.0, 2.0], bias 0.25
    assert json.loads(out["Body"].read()) == {"predictions": [4.75, 0.25]}
    assert out["ContentType"] == "application/json"
    described = sagemaker_clients.sagemaker.describe_endpoint(EndpointName=name)
    assert described["EndpointStatus"] == "InService"


def test_a_wrong_number_of_features_is_the_models_400(sagemaker_endpoint, sagemaker_clients) -> None:
    name = sagemaker_endpoint(IMAGE, model_data=MODEL_DATA)
    runtime = sagemaker_clients.runtime
    with pytest.raises(runtime.exceptions.ModelError) as caught:
        runtime.invoke_endpoint(
            EndpointName=name, Body=b'{"instances": [[1.0]]}', ContentType="application/json"
        )
    assert caught.value.response["OriginalStatusCode"] == 400
    assert "each instance needs 3 features" in caught.value.response["OriginalMessage"]
