"""A user's test file for the smlocal pytest fixtures (docs/quickstart-pytest.md). No conftest needed:
installing smlocal installs the fixtures. The suite runs this file against its echo image
(tests/integration/test_user_fixtures.py), whose model answers with the request body.

    MODEL_IMAGE=my-model:latest pytest docs/examples/pytest_quickstart
"""

import json
import os

import pytest

IMAGE = os.environ.get("MODEL_IMAGE", "my-model:latest")


def test_predict(sagemaker_endpoint, sagemaker_clients):
    name = sagemaker_endpoint(IMAGE, env={"LOG_LEVEL": "debug"})  # InService when it returns

    response = sagemaker_clients.runtime.invoke_endpoint(
        EndpointName=name, Body=json.dumps({"inputs": [1, 2, 3]}), ContentType="application/json"
    )

    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert json.loads(response["Body"].read()) == {"inputs": [1, 2, 3]}


def test_two_variants(sagemaker_endpoint, sagemaker_clients):
    name = sagemaker_endpoint(
        IMAGE,
        variants=[{"name": "blue", "weight": 1.0}, {"name": "green", "weight": 0.0}],
    )

    # weight 0: green gets only the requests that name it
    for target in ("blue", "green"):
        response = sagemaker_clients.runtime.invoke_endpoint(
            EndpointName=name, Body=b"{}", ContentType="application/json", TargetVariant=target
        )
        assert response["InvokedProductionVariant"] == target
    response = sagemaker_clients.runtime.invoke_endpoint(
        EndpointName=name, Body=b"{}", ContentType="application/json"
    )
    assert response["InvokedProductionVariant"] == "blue"


def test_unknown_endpoint_is_a_validation_error(sagemaker_clients):
    with pytest.raises(sagemaker_clients.runtime.exceptions.ValidationError) as error:
        sagemaker_clients.runtime.invoke_endpoint(EndpointName="no-such-endpoint", Body=b"{}")
    assert "no-such-endpoint" in error.value.response["Error"]["Message"]
