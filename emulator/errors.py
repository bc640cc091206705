"""The domain error tree. No HTTP status codes live here: wire/errors.py maps each class once.

    SmlocalError
    ├── ValidationFailed            bad input; the message is the client-visible text
    │   ├── ResourceNotFound        Describe/Delete of something that does not exist
    │   ├── ResourceAlreadyExists   Create of a name already taken (case-insensitive)
    │   ├── ResourceInProgress      mutation of an endpoint that is Creating/Updating/Deleting
    │   ├── ModelDataNotFound       CreateModel whose s3:// model data does not exist
    │   ├── EndpointNotFound        runtime call for an endpoint that is not InService
    │   ├── InvalidParameterValue   CloudWatch: a parameter value it refuses (InvalidParameterValue)
    │   ├── InvalidParameterCombination  CloudWatch: parameters that do not go together
    │   ├── InvalidFormat           CloudWatch: StateReasonData that is not JSON
    │   ├── InvalidNextToken        CloudWatch: a NextToken it did not give out
    │   └── MalformedRequest        a body or member that cannot be deserialised (wrong JSON type,
    │                               bad timestamp, not JSON): json-1.1 SerializationException
    ├── ResourceLimitExceeded       an account-level quota (instances per instance type) is used up
    ├── ObjectNotFound              Application Auto Scaling: no such scalable target or policy
    ├── ArnNotFound                 Application Auto Scaling: an ARN names no resource (tagging)
    ├── TooManyTags                 Application Auto Scaling: a resource would have over 50 tags
    ├── AlarmNotFound               CloudWatch's ResourceNotFound: no such alarm
    ├── UnknownOperation            an API operation smlocal does not implement
    ├── PayloadTooLarge             request body over the invocation cap
    ├── Throttled                   a serverless endpoint already serves MaxConcurrency requests
    ├── ModelFault                  the container answered badly; becomes 424 ModelError
    │   ├── ModelErrorResponse      the container answered with a non-2xx status
    │   ├── ModelTimeout            no answer within the invocation timeout
    │   ├── ModelUnreachable        connection refused/reset/closed by the container
    │   └── ModelResponseTooLarge   the container's answer exceeded the response cap
    ├── ModelStreamFault            a response stream failed after its first byte: a ModelStreamError
    │   │                           event (ErrorCode from the subclass), never an HTTP status
    │   ├── StreamBroken            the container closed or reset the connection mid-answer
    │   └── StreamTimeExceeded      the container stopped sending, or ran past the stream's time
    ├── ModelDataError              model data could not be fetched or extracted (FailureReason)
    ├── DeploymentFailed            a container could not be started or never became healthy
    ├── EngineError                 the container engine is missing or refused a request
    │   ├── EngineUnavailable       no engine answers (`docker info` fails)
    │   └── ImageNotFound           an image name resolves to no local image
    ├── SetupError                  the machine lacks something smlocal cannot install itself
    ├── PolicyFileInvalid           `--iam-policies`: a file or policy document smlocal refuses
    └── NotAuthorized               `--iam-policies`: the caller may not make this call (403)
        ├── AccessDenied            no policy allows the action, or one denies it explicitly
        ├── UnrecognizedClient      an access key id the policies file does not know
        └── MissingAuthentication   no SigV4 Credential in the request

Each error carries a ready-made, client-visible message; formatting of exact AWS texts lives with
the code that knows the context (hosting/ and model/), never in the wire layer.
"""

from __future__ import annotations

from typing import NamedTuple


class SmlocalError(Exception):
    """Base of every error smlocal raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ValidationFailed(SmlocalError):
    """Input the API rejects (control plane: ValidationException; runtime: ValidationError)."""


class ResourceLimitExceeded(SmlocalError):
    """A change would take the account past one of its service quotas (SageMaker's
    ResourceLimitExceeded, which its Create*/Update* operations model)."""


class ResourceNotFound(ValidationFailed):
    """A named resource does not exist."""


class ResourceAlreadyExists(ValidationFailed):
    """A Create* call names a resource that already exists."""


class ResourceInProgress(ValidationFailed):
    """A mutation was refused because the endpoint is changing state."""


class NoCapacity(ValidationFailed):
    """An invocation of an inference component with no copy in rotation (scaled to zero, or none
    started yet): counted as NoCapacityInvocationFailures (the scale-out-from-zero alarm's metric)."""

    def __init__(self, message: str, endpoint_name: str, variant_name: str, component_name: str) -> None:
        super().__init__(message)
        self.endpoint_name = endpoint_name
        self.variant_name = variant_name
        self.component_name = component_name


class ModelDataNotFound(ValidationFailed):
    """The model data a CreateModel call points at does not exist."""


class EndpointNotFound(ValidationFailed):
    """A runtime call names an endpoint that does not exist (or is not serving)."""


class InvalidParameterValue(ValidationFailed):
    """CloudWatch's InvalidParameterValue: a parameter's value is refused."""


class InvalidParameterCombination(ValidationFailed):
    """CloudWatch's InvalidParameterCombination: parameters that cannot be given together (or alone)."""


class InvalidFormat(ValidationFailed):
    """CloudWatch's InvalidFormat: a member that must be JSON is not."""


class InvalidNextToken(ValidationFailed):
    """CloudWatch's InvalidNextToken."""


class MalformedRequest(ValidationFailed):
    """The request cannot be deserialised: not a JSON object, a member of the wrong JSON type, a
    timestamp that is no timestamp, a number out of its type's range (json-1.1:
    SerializationException; runtime: ValidationError; CloudWatch: ValidationError)."""


class AlarmNotFound(SmlocalError):
    """CloudWatch's ResourceNotFound (404): no alarm of that name."""


class ObjectNotFound(SmlocalError):
    """Application Auto Scaling's ObjectNotFoundException: no such scalable target or policy."""


class ArnNotFound(SmlocalError):
    """Application Auto Scaling's ResourceNotFoundException: an ARN names no resource."""


class TooManyTags(SmlocalError):
    """Application Auto Scaling's TooManyTagsException."""


class UnknownOperation(SmlocalError):
    """An operation of the AWS API that smlocal does not implement."""

    def __init__(self, service: str, operation: str) -> None:
        super().__init__(
            f"Operation {operation} of {service} is not implemented by smlocal. "
            "See docs/api-coverage.md for the operations it supports."
        )
        self.service = service
        self.operation = operation


class PayloadTooLarge(SmlocalError):
    """The request body is over the invocation size cap."""


class Throttled(SmlocalError):
    """A serverless endpoint is at its MaxConcurrency: the request is refused at once, not queued
    (clients see ThrottlingException, which boto3 retries)."""


class ContainerCall(NamedTuple):
    """One call into one container of a multi-container instance, for its metrics: the container's
    hostname, the HTTP status it answered (0: no answer) and the call's seconds."""

    hostname: str
    status: int
    elapsed_s: float


class ModelFault(SmlocalError):
    """The model container did not produce a usable answer; clients see 424 ModelError."""

    def __init__(self, message: str, original_status: int, original_message: str, log_group_arn: str) -> None:
        super().__init__(message)
        self.original_status = original_status
        self.original_message = original_message
        self.log_group_arn = log_group_arn
        #: set by hosting for metrics: the variant whose instance was called, and how long the call took
        self.variant_name: str | None = None
        self.model_latency_s = 0.0
        #: set by hosting on a multi-container instance: each container call the request made, the
        #: failing one last (its metrics per ContainerName)
        self.container_calls: tuple[ContainerCall, ...] = ()


class ModelNotReady(SmlocalError):
    """A multi-model endpoint's model is still being downloaded and loaded after the request window
    (clients see 429 ModelNotReadyException and retry; loading goes on)."""


class ModelErrorResponse(ModelFault):
    """The container answered with a non-2xx status."""


class ModelTimeout(ModelFault):
    """The container did not answer within the invocation timeout."""


class ModelUnreachable(ModelFault):
    """The connection to the container failed (refused, reset, closed early)."""

    #: The container looks gone (refused, or a new connection dropped unanswered): take the
    #: instance out of rotation until a ping clears it. False for a drop after it answered.
    suspect: bool = False


class ModelResponseTooLarge(ModelFault):
    """The container's response body exceeded the response size cap."""


class ModelStreamFault(SmlocalError):
    """A streamed answer failed after its first part was sent: the client gets a ModelStreamError
    event with `error_code` (spec §2.2), then the stream ends."""

    error_code = "StreamBroken"


class StreamBroken(ModelStreamFault):
    """The container closed or reset the connection before the end of its chunked answer."""

    error_code = "StreamBroken"


class StreamTimeExceeded(ModelStreamFault):
    """The container sent nothing for the idle limit, or its answer ran past the total limit."""

    error_code = "ModelInvocationTimeExceeded"


class ModelDataError(SmlocalError):
    """Model data could not be fetched or safely extracted; the message is a FailureReason."""


class DeploymentFailed(SmlocalError):
    """Containers of a variant could not be started or never passed their health check."""


class EngineError(SmlocalError):
    """The container engine failed a request."""


class EngineUnavailable(EngineError):
    """No container engine answers."""


class ImageNotFound(EngineError):
    """No local image matches the requested name."""


class SetupError(SmlocalError):
    """The machine lacks a prerequisite that smlocal cannot install by itself."""


class PolicyFileInvalid(SmlocalError):
    """`smlocal serve --iam-policies FILE`: the file, or a policy document in it, is refused."""


class NotAuthorized(SmlocalError):
    """`--iam-policies`: the caller may not make this call (HTTP 403)."""


class AccessDenied(NotAuthorized):
    """IAM's AccessDeniedException: no identity-based policy allows the action, or one denies it."""


class UnrecognizedClient(NotAuthorized):
    """UnrecognizedClientException: the request's access key id is unknown."""


class MissingAuthentication(NotAuthorized):
    """MissingAuthenticationTokenException: the request carries no SigV4 Credential."""


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first leaf of a (nested) exception group: what a failed TaskGroup reports."""
    for exc in group.exceptions:
        return first_error(exc) if isinstance(exc, BaseExceptionGroup) else exc
    return group
