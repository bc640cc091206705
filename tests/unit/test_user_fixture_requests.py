"""The user fixtures' pure parts (contract_tests.pytest_fixtures): factory options -> SageMaker requests,
endpoint names, and the session's errors when no server can be had (no Docker needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contract_tests.pytest_fixtures.endpoints import build_request, unique_name

pytest_plugins = ["pytester"]

ROLE = "arn:aws:iam::123456789012:role/smlocal"


def test_one_image_is_one_model_and_one_instance_variant() -> None:
    request = build_request("img:1", "file:///m.tar.gz", env={"A": "1"}, instance_count=2)
    assert request.models == [
        {
            "ExecutionRoleArn": ROLE,
            "PrimaryContainer": {
                "Image": "img:1",
                "ModelDataUrl": "file:///m.tar.gz",
                "Environment": {"A": "1"},
            },
        }
    ]
    assert request.variants == [
        {
            "VariantName": "AllTraffic",
            "ModelName": 0,
            "InitialVariantWeight": 1.0,
            "InitialInstanceCount": 2,
            "InstanceType": "ml.m5.large",
        }
    ]
    assert request.config_extra == {}


def test_variants_share_a_model_unless_they_differ() -> None:
    request = build_request(
        "img:1", variants=[{"weight": 3}, {"name": "b", "weight": 1, "instance_type": "ml.c5.xlarge"}]
    )
    assert len(request.models) == 1
    assert [(v["VariantName"], v["ModelName"], v["InitialVariantWeight"]) for v in request.variants] == [
        ("Variant1", 0, 3.0),
        ("b", 0, 1.0),
    ]
    other = build_request("img:1", variants=[{}, {"image": "img:2", "env": {"B": "2"}}])
    assert [v["ModelName"] for v in other.variants] == [0, 1]
    assert other.models[1]["PrimaryContainer"] == {"Image": "img:2", "Environment": {"B": "2"}}


def test_every_kind_maps_to_its_request_field() -> None:
    mc = build_request(
        None,
        containers=[{"image": "a", "hostname": "one"}, {"image": "b", "model_data": "s3://x/m.tar.gz"}],
        inference_execution_mode="Direct",
    )
    assert mc.models[0]["Containers"] == [
        {"Image": "a", "ContainerHostname": "one"},
        {"Image": "b", "ModelDataUrl": "s3://x/m.tar.gz"},
    ]
    assert mc.models[0]["InferenceExecutionConfig"] == {"Mode": "Direct"}
    mme = build_request("img", "s3://x/models/", multi_model=True)
    assert mme.models[0]["PrimaryContainer"]["Mode"] == "MultiModel"
    serverless = build_request("img", serverless={"MemorySizeInMB": 1024, "MaxConcurrency": 2})
    assert serverless.variants[0]["ServerlessConfig"] == {"MemorySizeInMB": 1024, "MaxConcurrency": 2}
    assert "InitialInstanceCount" not in serverless.variants[0]
    asynchronous = build_request(
        "img", async_config={"OutputConfig": {"S3OutputPath": "s3://x/out"}}, config_options={"Tags": []}
    )
    assert asynchronous.config_extra == {
        "AsyncInferenceConfig": {"OutputConfig": {"S3OutputPath": "s3://x/out"}},
        "Tags": [],
    }


def test_contradictions_are_type_errors() -> None:
    with pytest.raises(TypeError, match="needs an image"):
        build_request(None)
    with pytest.raises(TypeError, match="either image/model_data or containers="):
        build_request("img", containers=[{"image": "a"}])


def test_names_are_valid_unique_and_leave_room_for_model_suffixes() -> None:
    pattern = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
    long = unique_name("test_x[" + "p" * 100 + "]")
    assert pattern.match(long) and len(long) <= 63 - 4
    assert unique_name("test_predict[a/b]").startswith("test-predict-a-b-")
    assert unique_name("t") != unique_name("t")
    assert pattern.match(unique_name("[]"))


def test_a_server_that_cannot_start_fails_with_its_output(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(smlocal_server):\n    pass\n")
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--smlocal-serve-arg=--no-such-option")
    run.assert_outcomes(errors=1)
    out = run.stdout.str()
    assert "smlocal_server: smlocal serve (serve --host 127.0.0.1" in out
    assert "exited with status 2; its output:" in out
    assert "unrecognized arguments: --no-such-option" in out


def test_an_external_url_that_does_not_answer_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(smlocal_server):\n    pass\n")
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--smlocal-url", "http://127.0.0.1:9/")
    run.assert_outcomes(errors=1)
    assert "no smlocal server answers at http://127.0.0.1:9 (--smlocal-url / SMLOCAL_URL)" in run.stdout.str()


def test_options_and_marker_are_registered(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("import pytest\n\n@pytest.mark.smlocal_reuse_endpoints\ndef test_x():\n    pass\n")
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers")
    run.assert_outcomes(passed=1)
    help_text = pytester.runpytest_subprocess("--help").stdout.str()
    for option in ("--smlocal-url", "--smlocal-serve-arg", "--smlocal-region", "--smlocal-start-timeout"):
        assert option in help_text
    assert "smlocal_reuse_endpoints" in pytester.runpytest_subprocess("--markers").stdout.str()


def test_the_quick_start_shows_the_example_the_suite_runs() -> None:
    """docs/quickstart-pytest.md's example is the file tests/integration/test_user_fixtures.py runs."""
    root = Path(__file__).parents[2]
    page = (root / "docs" / "quickstart-pytest.md").read_text()
    example = (root / "docs" / "examples" / "pytest_quickstart" / "test_example.py").read_text()
    shown = page.split("```python\n", 1)[1].split("```", 1)[0]
    assert shown.strip() and shown in example
    assert example.split('"""', 2)[2].strip() == shown.strip()  # all of it, but the docstring


def test_serve_args_and_region_reach_the_started_server(pytester: pytest.Pytester) -> None:
    """ini smlocal_serve_args and --smlocal-serve-arg are `smlocal serve` options (the account id in
    the ARNs here), --smlocal-region the server's and the clients' region."""
    pytester.makeini("[pytest]\nsmlocal_serve_args = --account-id 111122223333\n")
    pytester.makepyfile(
        """
import pytest

def test_arn(smlocal_server, sagemaker_clients):
    assert smlocal_server.region == sagemaker_clients.runtime.meta.region_name == "eu-west-1"
    with pytest.raises(sagemaker_clients.sagemaker.exceptions.ClientError) as error:
        sagemaker_clients.sagemaker.describe_endpoint(EndpointName="x")
    message = error.value.response["Error"]["Message"]
    assert message == 'Could not find endpoint "arn:aws:sagemaker:eu-west-1:111122223333:endpoint/x".'
"""
    )
    run = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--strict-config",
        "--smlocal-region",
        "eu-west-1",
        "--smlocal-serve-arg=--time-scale=2",
    )
    run.assert_outcomes(passed=1)


class _Settling:
    """A SageMaker client (fake, pure logic) whose endpoint is Creating when DeleteEndpoint is first sent
    and InService by the DescribeEndpoint that follows the refusal: the race CI met."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.deletes = 0
        self.gone = False

    def _error(self, code: str, message: str) -> Exception:
        from botocore.exceptions import ClientError

        return ClientError({"Error": {"Code": code, "Message": message}}, "DeleteEndpoint")

    def delete_endpoint(self, EndpointName: str) -> None:  # noqa: N803 - boto3's spelling
        self.deletes += 1
        if self.deletes <= self.refusals:
            raise self._error("ValidationException", "Cannot update in-progress endpoint")
        self.gone = True

    def describe_endpoint(self, EndpointName: str) -> dict[str, str]:  # noqa: N803
        if self.gone:
            raise self._error("ValidationException", f'Could not find endpoint "{EndpointName}".')
        return {"EndpointStatus": "InService"}

    def delete_endpoint_config(self, **_: str) -> None: ...

    def delete_model(self, **_: str) -> None: ...


def test_delete_sends_again_when_the_endpoint_settles_between_refusal_and_describe() -> None:
    from contract_tests.pytest_fixtures.endpoints import Endpoint, delete_endpoint

    settling = _Settling(refusals=1)
    assert delete_endpoint(settling, Endpoint("e", "e", ["e"]), timeout_s=5) == []
    assert settling.deletes == 2

    stuck = _Settling(refusals=5)  # refused twice in a settled status: a real problem, reported
    problems = delete_endpoint(stuck, Endpoint("e", "e", ["e"]), timeout_s=5)
    assert stuck.deletes == 2
    assert problems == ["DeleteEndpoint e (InService): Cannot update in-progress endpoint"]
