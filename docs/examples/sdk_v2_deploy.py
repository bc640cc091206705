"""The SageMaker Python SDK v2 against smlocal: Model.deploy, Predictor.predict with serializers.

    pip install "sagemaker<3"          # not a dependency of smlocal (2.257.7 tried)
    smlocal serve --port 8090 &
    python3 docs/examples/sdk_v2_deploy.py http://127.0.0.1:8090 my-model:latest [ENDPOINT_NAME]

Set-up (docs/quickstart-sdk-v2.md): a Session made of boto3 clients pointed at smlocal, `role=` given
(else the SDK asks STS who you are), and no model data (or an S3 server for it). deploy(wait=True)
sleeps 30 s before its first DescribeEndpoint, so this deploys with wait=False and then waits with
the session's wait_for_endpoint polling every second.
"""

from __future__ import annotations

import sys

import boto3
from sagemaker.deserializers import CSVDeserializer, JSONDeserializer
from sagemaker.model import Model
from sagemaker.predictor import Predictor
from sagemaker.serializers import CSVSerializer, JSONSerializer
from sagemaker.session import Session

url, image = sys.argv[1], sys.argv[2]
name = sys.argv[3] if len(sys.argv) > 3 else "sdk-v2-demo"

boto_session = boto3.Session(
    region_name="us-east-1", aws_access_key_id="smlocal", aws_secret_access_key="smlocal"
)
session = Session(
    boto_session=boto_session,
    sagemaker_client=boto_session.client("sagemaker", endpoint_url=url),
    sagemaker_runtime_client=boto_session.client("sagemaker-runtime", endpoint_url=url),
)
model = Model(
    image_uri=image,
    role="arn:aws:iam::123456789012:role/smlocal",  # given: no STS call
    name=name,
    sagemaker_session=session,
    predictor_cls=Predictor,
)
predictor = model.deploy(
    initial_instance_count=1,
    instance_type="ml.m5.large",
    endpoint_name=name,
    serializer=JSONSerializer(),
    deserializer=JSONDeserializer(),
    wait=False,  # deploy's own wait sleeps 30 s first; this one polls every second
)
described = session.wait_for_endpoint(name, poll=1)
print()  # the SDK's wait prints one progress character per poll
print("status", described["EndpointStatus"])

# JSON in, JSON out (the test image answers the request body)
print("json", predictor.predict({"inputs": [1, 2, 3], "label": "café"}))
# CSV: the serializer and deserializer of the predictor can be changed at any time
predictor.serializer, predictor.deserializer = CSVSerializer(), CSVDeserializer()
print("csv", predictor.predict([[1, 2], [3, 4]]))

predictor.delete_endpoint()  # the endpoint and its endpoint config
model.delete_model()
print("deleted", name)
