"""The `sagemaker_endpoint` factory: CreateModel, CreateEndpointConfig, CreateEndpoint, wait, and
delete it all again.

    name = sagemaker_endpoint("my-model:latest", model_data="file:///abs/model.tar.gz")

One call makes one endpoint, its endpoint config and a model per distinct container set, all named
after the test (`<test>-<8 hex>`, unique per call), and waits until the endpoint is InService; a
Failed endpoint fails the test with its FailureReason and its containers' logs. Teardown deletes the
endpoint, waits until DescribeEndpoint no longer knows it, then deletes the config and the models.
Options follow SageMaker's request fields in snake_case (see `EndpointFactory.__call__`).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

#: Seconds to wait for InService (SageMaker's startup limit is 480 s) and for a deleted endpoint.
DEFAULT_TIMEOUT_S = 600.0
DELETE_TIMEOUT_S = 120.0
POLL_S = 0.1
LOG_TAIL_LINES = 200
#: Statuses in which DeleteEndpoint is refused until they end.
_BUSY = ("Creating", "Updating", "SystemUpdating", "RollingBack")


class ContainerOptions(TypedDict, total=False):
    """One container of a multi-container model (`containers=`)."""

    image: str  # required
    model_data: str
    env: dict[str, str]
    hostname: str  # ContainerHostname (Direct mode: the TargetContainerHostname to invoke)


class VariantOptions(TypedDict, total=False):
    """One production variant (`variants=`); what it leaves out comes from the call's arguments."""

    name: str  # VariantName (default Variant1, Variant2, ...)
    weight: float  # InitialVariantWeight (default 1.0)
    image: str
    model_data: str
    env: dict[str, str]
    instance_count: int
    instance_type: str
    serverless: dict[str, Any]  # ServerlessConfig


class Endpoint(str):
    """An InService endpoint's name (a str), with the names of what was made for it."""

    config_name: str
    model_names: tuple[str, ...]

    def __new__(cls, name: str, config_name: str, model_names: Sequence[str]) -> Endpoint:
        obj = super().__new__(cls, name)
        obj.config_name = config_name
        obj.model_names = tuple(model_names)
        return obj


class DeploymentFailed(Exception):
    """The endpoint did not reach InService; the message has the FailureReason and the logs."""


_NOT_NAME = re.compile(r"[^a-zA-Z0-9]+")


def unique_name(test_name: str, max_len: int = 63) -> str:
    """`<test name, letters and digits, hyphens between>-<8 hex>`: a valid SageMaker name per call."""
    stem = _NOT_NAME.sub("-", test_name).strip("-").lower() or "test"
    suffix = uuid.uuid4().hex[:8]
    stem = stem[: max_len - 1 - len(suffix) - 4].rstrip("-")  # room for a "-mNN" model suffix
    return f"{stem}-{suffix}"


def _container(image: str, model_data: str | None, env: Mapping[str, str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"Image": image}
    if model_data is not None:
        out["ModelDataUrl"] = model_data
    if env:
        out["Environment"] = dict(env)
    return out


@dataclass
class EndpointRequest:
    """What one factory call asks for, as the three create calls' arguments (names filled in later)."""

    models: list[dict[str, Any]]  # CreateModel arguments without ModelName
    variants: list[dict[str, Any]]  # ProductionVariants, "ModelName" an index into models
    config_extra: dict[str, Any] = field(default_factory=dict)


def build_request(
    image: str | None,
    model_data: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    instance_count: int = 1,
    instance_type: str = "ml.m5.large",
    variants: Sequence[VariantOptions] | None = None,
    containers: Sequence[ContainerOptions] | None = None,
    inference_execution_mode: str | None = None,
    multi_model: bool = False,
    serverless: Mapping[str, Any] | None = None,
    async_config: Mapping[str, Any] | None = None,
    execution_role_arn: str = "arn:aws:iam::123456789012:role/smlocal",
    model_options: Mapping[str, Any] | None = None,
    config_options: Mapping[str, Any] | None = None,
) -> EndpointRequest:
    """The factory's arguments as SageMaker requests; a contradiction is a TypeError/ValueError."""
    models: list[dict[str, Any]] = []
    model_index: dict[str, int] = {}

    def add_model(request: dict[str, Any]) -> int:
        key = repr(sorted(request.items()))
        if key not in model_index:
            model_index[key] = len(models)
            models.append(request)
        return model_index[key]

    def model_request(img: str | None, data: str | None, envs: Mapping[str, str] | None) -> dict[str, Any]:
        request: dict[str, Any] = {"ExecutionRoleArn": execution_role_arn, **(model_options or {})}
        if containers:
            if img is not None or data is not None:
                raise TypeError("give either image/model_data or containers=, not both")
            parts = []
            for c in containers:
                part = _container(c["image"], c.get("model_data"), {**(envs or {}), **c.get("env", {})})
                if "hostname" in c:
                    part["ContainerHostname"] = c["hostname"]
                parts.append(part)
            request["Containers"] = parts
            if inference_execution_mode is not None:
                request["InferenceExecutionConfig"] = {"Mode": inference_execution_mode}
            return request
        if img is None:
            raise TypeError("sagemaker_endpoint needs an image (or containers=)")
        primary = _container(img, data, envs)
        if multi_model:
            primary["Mode"] = "MultiModel"
        request["PrimaryContainer"] = primary
        return request

    production: list[dict[str, Any]] = []
    for i, v in enumerate(variants or [VariantOptions()]):
        index = add_model(
            model_request(
                v.get("image", image),
                v.get("model_data", model_data),
                {**(env or {}), **v.get("env", {})},
            )
        )
        variant: dict[str, Any] = {
            "VariantName": v.get("name", "AllTraffic" if not variants else f"Variant{i + 1}"),
            "ModelName": index,
            "InitialVariantWeight": float(v.get("weight", 1.0)),
        }
        serverless_config = v.get("serverless", serverless)
        if serverless_config is not None:
            variant["ServerlessConfig"] = dict(serverless_config)
        else:
            variant["InitialInstanceCount"] = v.get("instance_count", instance_count)
            variant["InstanceType"] = v.get("instance_type", instance_type)
        production.append(variant)
    extra: dict[str, Any] = dict(config_options or {})
    if async_config is not None:
        extra["AsyncInferenceConfig"] = dict(async_config)
    return EndpointRequest(models=models, variants=production, config_extra=extra)


@dataclass
class EndpointFactory:
    """Creates endpoints on one server and deletes them again (`cleanup`).

    sagemaker: a boto3 sagemaker client. logs: endpoint name -> its containers' logs (text).
    name_for: the name stem of the current test.
    """

    sagemaker: Any
    logs: Callable[[str], str]
    test_name: str
    created: list[Endpoint] = field(default_factory=list)

    def create(self, request: EndpointRequest, timeout_s: float = DEFAULT_TIMEOUT_S) -> Endpoint:
        """Create and wait; raises DeploymentFailed (the endpoint already listed for cleanup)."""
        name = unique_name(self.test_name)
        count = len(request.models)
        model_names = [name if count == 1 else f"{name}-m{i}" for i in range(count)]
        endpoint = Endpoint(name, name, model_names)
        self.created.append(endpoint)  # cleanup deletes whatever of it exists, whatever fails below
        from botocore.exceptions import ClientError

        try:
            for model_name, model in zip(model_names, request.models, strict=True):
                self.sagemaker.create_model(ModelName=model_name, **model)
            variants = [{**v, "ModelName": model_names[v["ModelName"]]} for v in request.variants]
            self.sagemaker.create_endpoint_config(
                EndpointConfigName=name, ProductionVariants=variants, **request.config_extra
            )
            self.sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)
        except ClientError as exc:  # a refused request: SageMaker's message says what to fix
            raise DeploymentFailed(
                f"{getattr(exc, 'operation_name', 'a create call')} for endpoint {name} was refused: "
                f"{_code(exc)}: {_message(exc)}"
            ) from None
        self.wait_in_service(name, timeout_s)
        return endpoint

    def wait_in_service(self, name: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            described = self.sagemaker.describe_endpoint(EndpointName=name)
            status = described["EndpointStatus"]
            if status == "InService":
                return
            if status not in _BUSY or time.monotonic() > deadline:
                reason = described.get("FailureReason") or (
                    f"still {status} after {timeout_s:g} s" if status == "Creating" else "(none given)"
                )
                raise DeploymentFailed(
                    f"endpoint {name} is {status}, not InService.\nFailureReason: {reason}\n\n"
                    f"container logs:\n{self.logs(name) or '(none)'}"
                )
            time.sleep(POLL_S)

    def cleanup(self) -> list[str]:
        """Delete every endpoint made (newest first), waiting until each is gone, then its config and
        models; returns what could not be deleted (empty when all went)."""
        problems: list[str] = []
        while self.created:
            endpoint = self.created.pop()
            problems.extend(delete_endpoint(self.sagemaker, endpoint))
        return problems


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _message(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Message", ""))


def _not_found(exc: Exception) -> bool:
    """SageMaker's answer for a name it does not know: ValidationException "Could not find ..."."""
    return _code(exc) == "ValidationException" and _message(exc).startswith("Could not find")


def _status(sagemaker: Any, name: str) -> str | None:
    """The endpoint's status, None once DescribeEndpoint no longer knows it."""
    from botocore.exceptions import ClientError

    try:
        return str(sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"])
    except ClientError as exc:
        if _not_found(exc):
            return None
        raise


def delete_endpoint(sagemaker: Any, endpoint: Endpoint, timeout_s: float = DELETE_TIMEOUT_S) -> list[str]:
    """Delete an endpoint, wait until it is gone, delete its config and models; what went wrong.

    An endpoint still Creating or Updating (a test that failed on timeout_s) cannot be deleted yet
    (SageMaker refuses: "Cannot update in-progress endpoint"): DeleteEndpoint is sent again once it
    has left that state. A refusal followed by a settled status is the endpoint settling between the
    two calls (CI saw Creating refused, then InService): it is sent again at once, and only a second
    refusal in a settled status in a row is a problem."""
    from botocore.exceptions import ClientError

    problems: list[str] = []
    name = str(endpoint)
    deadline = time.monotonic() + timeout_s
    settled_refusals = 0
    while True:
        try:
            sagemaker.delete_endpoint(EndpointName=name)
            break
        except ClientError as exc:
            if _not_found(exc):  # never created, or already deleted by the test
                break
            status = _status(sagemaker, name)
            if status is None:
                break
            settled_refusals = 0 if status in _BUSY else settled_refusals + 1
            if settled_refusals > 1 or time.monotonic() > deadline:
                problems.append(f"DeleteEndpoint {name} ({status}): {_message(exc)}")
                break
            if settled_refusals:
                continue
        time.sleep(POLL_S)
    while not problems and _status(sagemaker, name) is not None:
        if time.monotonic() > deadline:
            problems.append(f"endpoint {name} still there {timeout_s:g} s after DeleteEndpoint")
            break
        time.sleep(POLL_S)
    for call, key, value in (
        (sagemaker.delete_endpoint_config, "EndpointConfigName", endpoint.config_name),
        *((sagemaker.delete_model, "ModelName", m) for m in endpoint.model_names),
    ):
        try:
            call(**{key: value})
        except ClientError as exc:
            if not _not_found(exc):
                problems.append(f"delete {value}: {_message(exc)}")
    return problems
