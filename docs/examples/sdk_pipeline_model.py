"""The SageMaker Python SDK's PipelineModel against smlocal: two containers in Serial.

    pip install "sagemaker<3"          # not a dependency of smlocal; run with 2.257.7
    smlocal serve --port 8090 &
    python3 docs/examples/sdk_pipeline_model.py http://127.0.0.1:8090 smlocal-test/echo-bind:latest [NAME]

The image must carry com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true (the test suite
builds smlocal-test/echo-bind:latest). The SDK needs only boto3 clients pointed at smlocal: no S3
bucket when the models have no model data, no STS call when the role is given. deploy's own wait
sleeps 30 s before its first DescribeEndpoint (36.5 s in all, measured): this one deploys with
wait=False and waits with the session's wait_for_endpoint polling every second (docs/quickstart-sdk-v2.md).
"""

from __future__ import annotations

import sys

import boto3
from sagemaker.model import Model
from sagemaker.pipeline import PipelineModel
from sagemaker.session import Session

url, image = sys.argv[1], sys.argv[2]
name = sys.argv[3] if len(sys.argv) > 3 else "sdk-pipeline"
creds = {"region_name": "us-east-1", "aws_access_key_id": "x", "aws_secret_access_key": "y"}
sm = boto3.client("sagemaker", endpoint_url=url, **creds)
rt = boto3.client("sagemaker-runtime", endpoint_url=url, **creds)
session = Session(boto_session=boto3.Session(**creds), sagemaker_client=sm, sagemaker_runtime_client=rt)
role = "arn:aws:iam::123456789012:role/smlocal"
first = Model(
    image_uri=image,
    role=role,
    sagemaker_session=session,
    env={"STAGE": "first", "STAGE_CONTENT_TYPE": "text/csv"},
)
second = Model(image_uri=image, role=role, sagemaker_session=session, env={"STAGE": "second"})
pipeline = PipelineModel(models=[first, second], role=role, sagemaker_session=session, name=name)
pipeline.deploy(initial_instance_count=1, instance_type="ml.m5.large", endpoint_name=name, wait=False)
session.wait_for_endpoint(name, poll=1)
print()  # after the wait's progress characters
print(sm.describe_model(ModelName=name)["Containers"])
# b'1,2|first:text/csv;accept=-|second:text/csv;accept=-': each stage's tag, in order
print(rt.invoke_endpoint(EndpointName=name, Body=b"1,2", ContentType="text/csv")["Body"].read())
pipeline.delete_model()
session.delete_endpoint(name)
session.delete_endpoint_config(name)
