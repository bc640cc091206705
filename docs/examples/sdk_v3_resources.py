"""The SageMaker Python SDK v3 against smlocal: sagemaker-core's resource classes.

    pip install "sagemaker>=3"         # not a dependency of smlocal (3.27.0, sagemaker-core 2.27.0 tried)
    smlocal serve --port 8090 &
    export AWS_ENDPOINT_URL_SAGEMAKER=http://127.0.0.1:8090
    export AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME=http://127.0.0.1:8090
    export AWS_DEFAULT_REGION=us-east-1 AWS_ACCESS_KEY_ID=smlocal AWS_SECRET_ACCESS_KEY=smlocal
    python3 docs/examples/sdk_v3_resources.py my-model:latest [ENDPOINT_NAME]

Set-up (docs/quickstart-sdk-v3.md): the resource classes make their own boto3 clients (no endpoint_url
argument), so smlocal's address comes from boto3's per-service environment variables; the role is
given (execution_role_arn), so nothing asks STS. wait_for_status polls every 5 s unless told `poll=`.
"""

from __future__ import annotations

import sys

from botocore.exceptions import ClientError
from sagemaker.core.resources import Endpoint, EndpointConfig, Model
from sagemaker.core.shapes import ContainerDefinition, ProductionVariant

image = sys.argv[1]
name = sys.argv[2] if len(sys.argv) > 2 else "sdk-v3-demo"

model = Model.create(
    model_name=name,
    primary_container=ContainerDefinition(image=image, environment={"GREETING": "hello"}),
    execution_role_arn="arn:aws:iam::123456789012:role/smlocal",
)
config = EndpointConfig.create(
    endpoint_config_name=name,
    production_variants=[
        ProductionVariant(
            variant_name="AllTraffic",
            model_name=model.model_name,
            initial_instance_count=1,
            instance_type="ml.m5.large",
        )
    ],
)
endpoint = Endpoint.create(endpoint_name=name, endpoint_config_name=config.endpoint_config_name)
endpoint.wait_for_status("InService", poll=1, timeout=120)
print("status", endpoint.endpoint_status)

# Endpoint.get(...).invoke(...): the answer's body is botocore's stream
answer = Endpoint.get(endpoint_name=name).invoke(
    body=b'{"inputs": [1, 2, 3]}', content_type="application/json"
)
print("answer", answer.content_type, answer.invoked_production_variant, answer.body.read().decode())

endpoint.delete()
endpoint.wait_for_delete(poll=1, timeout=120)
config.delete()
model.delete()
try:
    Endpoint.get(endpoint_name=name)
except ClientError as gone:  # SageMaker's own error, as boto3 raises it
    print("deleted", gone.response["Error"]["Code"], gone.response["Error"]["Message"])
