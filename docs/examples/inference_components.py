"""Inference components on smlocal with unchanged boto3: one endpoint, two models, scaled to zero.

    smlocal serve --port 8090 &
    python3 docs/examples/inference_components.py http://127.0.0.1:8090 my-model:latest other-model:latest

An endpoint whose production variant names no model starts its instances empty; each model is then
deployed onto them as an inference component with its own copies and reservation, invoked by name.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import boto3

url, first_image, second_image = sys.argv[1:4]
aws = {"endpoint_url": url, "region_name": "us-east-1"}
aws |= {"aws_access_key_id": "smlocal", "aws_secret_access_key": "smlocal"}
sm = boto3.client("sagemaker", **aws)
runtime = boto3.client("sagemaker-runtime", **aws)


def wait(describe: Callable[[], dict[str, Any]], key: str, busy: tuple[str, ...]) -> dict[str, Any]:
    """Poll a Describe call while its status is one of `busy`."""
    while (described := describe())[key] in busy:
        time.sleep(0.5)
    return described


# 1. The endpoint: a variant without ModelName, and the role its components run with.
sm.create_endpoint_config(
    EndpointConfigName="ic-demo",
    ExecutionRoleArn="arn:aws:iam::123456789012:role/smlocal",
    ProductionVariants=[
        {"VariantName": "AllTraffic", "InstanceType": "ml.m5.large", "InitialInstanceCount": 1}
    ],
)
sm.create_endpoint(EndpointName="ic-demo", EndpointConfigName="ic-demo")
wait(lambda: sm.describe_endpoint(EndpointName="ic-demo"), "EndpointStatus", ("Creating",))

# 2. Two components: one from a model, one straight from an image; each copy reserves 1 GiB and a core.
sm.create_model(ModelName="ic-demo-first", PrimaryContainer={"Image": first_image})
compute = {"NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 1024}
for name, spec in (
    ("first", {"ModelName": "ic-demo-first"}),
    ("second", {"Container": {"Image": second_image}}),
):
    sm.create_inference_component(
        InferenceComponentName=name,
        EndpointName="ic-demo",
        VariantName="AllTraffic",
        Specification={**spec, "ComputeResourceRequirements": compute},
        RuntimeConfig={"CopyCount": 1},
    )
for name in ("first", "second"):
    described = wait(
        lambda name=name: sm.describe_inference_component(InferenceComponentName=name),
        "InferenceComponentStatus",
        ("Creating",),
    )
    print(name, described["InferenceComponentStatus"], described["RuntimeConfig"])

# 3. Each invoked by its name.
for name in ("first", "second"):
    answer = runtime.invoke_endpoint(
        EndpointName="ic-demo", InferenceComponentName=name, Body=b'{"x": 1}', ContentType="application/json"
    )
    print(name, "answered", answer["Body"].read().decode())

# 4. Scale "second" to zero copies: it answers SageMaker's error until a copy serves again.
sm.update_inference_component_runtime_config(
    InferenceComponentName="second", DesiredRuntimeConfig={"CopyCount": 0}
)
wait(
    lambda: sm.describe_inference_component(InferenceComponentName="second"),
    "InferenceComponentStatus",
    ("Updating",),
)
try:
    runtime.invoke_endpoint(EndpointName="ic-demo", InferenceComponentName="second", Body=b"{}")
except runtime.exceptions.ValidationError as refused:
    print("at zero:", refused.response["Error"]["Message"])

# 5. Components go first, then the endpoint.
for name in ("first", "second"):
    sm.delete_inference_component(InferenceComponentName=name)
while sm.list_inference_components(EndpointNameEquals="ic-demo")["InferenceComponents"]:
    time.sleep(0.5)
sm.delete_endpoint(EndpointName="ic-demo")
sm.delete_endpoint_config(EndpointConfigName="ic-demo")
sm.delete_model(ModelName="ic-demo-first")
print("deleted")
