"""SageMaker's client-visible texts, in one place (shared/spec/hosting-contract.md §1.8, §6.8, §11.3).

Texts marked [U] in the spec are smlocal's own choice; docs/api-coverage.md lists them.
"""

from __future__ import annotations

_KIND_NAMES = {"model": "model", "endpoint-config": "endpoint configuration", "endpoint": "endpoint"}


def not_found(kind: str, arn: str) -> str:
    return f'Could not find {_KIND_NAMES[kind]} "{arn}".'


def already_exists(kind: str, arn: str) -> str:
    return f'Cannot create already existing {_KIND_NAMES[kind]} "{arn}".'


def in_progress(endpoint_arn: str) -> str:
    return f'Cannot update in-progress endpoint "{endpoint_arn}".'


def runtime_endpoint_not_found(name: str, account_id: str) -> str:
    return f"Endpoint {name} of account {account_id} not found."


def unknown_variant(variant: str, endpoint: str) -> str:  # [U]
    return f"Variant {variant} not found for endpoint {endpoint}."


def unknown_variant_update(variant: str, endpoint: str) -> str:  # [U]
    return f"The variant {variant} does not exist in endpoint {endpoint}."


def image_not_found(image: str) -> str:  # [U]: SageMaker's own text names the role; we have none
    return (
        f"Requested image {image} not found. smlocal resolves images on the local Docker engine: "
        "build or tag it there first."
    )


def cannot_start_container(variant: str) -> str:
    return (
        "CannotStartContainerError. Please ensure the model container for variant "
        f"{variant} starts correctly when invoked with 'docker run <image> serve'"
    )


def ping_health_check_failed(variant: str) -> str:
    return (
        f"The primary container for production variant {variant} did not pass the ping health check. "
        "Please check CloudWatch logs for this endpoint."
    )


def model_error(status: int, body: str, console_url: str, account_id: str, container: str = "primary") -> str:
    kind = "client" if 400 <= status < 500 else "server"
    return (
        f'Received {kind} error ({status}) from {container} with message "{body}". '
        f"See {console_url} in account {account_id} for more information."
    )


def invocation_timed_out(container: str = "primary") -> str:
    return (
        f"Your invocation timed out while waiting for a response from container {container}. "
        "Review the latency metrics for each container in Amazon CloudWatch, resolve the issue, "
        "and try again."
    )


def response_too_large(limit: int, container: str = "primary") -> str:  # [U]
    return f"The response from container {container} exceeded the maximum payload size of {limit} bytes."


def container_unreachable(reason: str, container: str = "primary") -> str:  # [U]
    return f"Could not get a response from container {container}: {reason}."


def connection_refused(detail: str, container: str = "primary") -> str:  # [U]
    return f"Could not connect to container {container}: the connection was refused ({detail})."


def closed_before_status_line(detail: str, container: str = "primary") -> str:  # [U]
    return (
        f"Container {container} closed the connection before sending an HTTP status line: its server "
        f"may have died or nothing listens on port 8080 ({detail})."
    )


def closed_mid_response(detail: str, container: str = "primary") -> str:  # [U]
    return f"Container {container} closed the connection before the whole response was sent ({detail})."


def request_too_large(limit: int) -> str:  # [O] 2018 text, with today's limit
    return f"HTTP content length exceeded {limit} bytes."


# ---------------------------------------------------------------------- Application Auto Scaling (§9)


def no_scalable_target(target: str) -> str:
    """`target`: "service namespace: ..., resource ID: ..., scalable dimension: ..."."""
    return f"No scalable target registered for {target}"


def no_scaling_policy(target: str, policy_name: str) -> str:
    return f"No scaling policy found for {target}, policy name: {policy_name}"


def unsupported_scalable_target() -> str:
    return (
        "Unsupported service namespace, resource type or scalable dimension. smlocal scales the "
        "sagemaker namespace's endpoint/{EndpointName}/variant/{VariantName} resources in the "
        "sagemaker:variant:DesiredInstanceCount dimension (and serverless variants in "
        "sagemaker:variant:DesiredProvisionedConcurrency)."
    )


def capacities_required() -> str:  # [U]
    return "MinCapacity and MaxCapacity are required for registering a new scalable target"


def min_above_max() -> str:
    return "Minimum capacity cannot be greater than maximum capacity"


def endpoint_not_in_service(endpoint: str, status: str) -> str:  # [O] the second sentence; [U] the first
    return (
        f"Endpoint {endpoint} is in {status} status. "
        "The status should be in 'InService' to register it as a scalable target."
    )


def scaling_endpoint_not_found(endpoint: str) -> str:  # [U]
    return f"The endpoint {endpoint} does not exist."


def scaling_variant_not_found(variant: str, endpoint: str) -> str:  # [U]
    return f"The variant {variant} does not exist in endpoint {endpoint}."


def predefined_metric_unsupported(dimension: str, supported: str) -> str:
    return f"Scalable dimension {dimension} only supports the following predefined metric types: {supported}"


def policy_configuration_required(policy_type: str, member: str) -> str:  # [U]
    return f"{member} is required for the {policy_type} policy type."


def autoscaled_variant_update(variant: str, endpoint: str) -> str:  # [U]
    return (
        f"The variant {variant} of endpoint {endpoint} is registered with Application Auto Scaling. "
        "Deregister its scalable target before you remove the variant or change its instance type."
    )


def rolling_needs_same_variants() -> str:  # [U]
    return (
        "A RollingUpdatePolicy replaces the instances of existing variants: the new endpoint "
        "configuration must have the same variant names. Add or remove variants with a "
        "BlueGreenUpdatePolicy."
    )


def rolled_back(reason: str) -> str:  # [U]
    return f"The update was rolled back because {reason}. The endpoint serves its previous configuration."


def rollback_failed(reason: str) -> str:  # [U]
    return f"The update failed and its rollback failed too: {reason}. Instances of both configurations serve."


def no_tagged_resource(arn: str) -> str:  # [U]
    return f"No scalable target found for the resource ARN {arn}"


def too_many_tags(arn: str, limit: int) -> str:  # [U]
    return f"The resource {arn} would have more than {limit} tags."


# ---------------------------------------------------------------------- multi-container models (§4)


def primary_and_containers() -> str:  # [U]
    return "Specify either PrimaryContainer or Containers, not both."


def no_container() -> str:  # [U]
    return "A model needs a PrimaryContainer or at least one entry in Containers."


def direct_needs_hostnames() -> str:  # [U]
    return (
        "ContainerHostname must be specified for every container when InferenceExecutionConfig Mode "
        "is Direct."
    )


def serial_hostnames_all_or_none() -> str:  # [U]
    return "ContainerHostname must be specified for all containers or for none of them."


def duplicate_hostname(hostname: str) -> str:  # [U]
    return (
        f"ContainerHostname {hostname} is used by more than one container. "
        "Container hostnames must be unique."
    )


def missing_bind_to_port_label(image: str) -> str:  # [D] §3.5
    return (
        f"Your Ecr Image {image} does not contain required "
        "com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true Docker label(s)."
    )


def missing_multi_models_label(image: str) -> str:  # [U] the form of the bind-to-port text (§3.5)
    return (
        f"Your Ecr Image {image} does not contain required "
        "com.amazonaws.sagemaker.capabilities.multi-models=true Docker label(s)."
    )


def target_model_required(endpoint: str) -> str:  # [U]
    return f"Endpoint {endpoint} is a multi-model endpoint: specify the TargetModel to invoke."


def target_model_not_multi_model(endpoint: str) -> str:  # [U]
    return f"TargetModel is only allowed for multi-model endpoints; endpoint {endpoint} is not one."


def target_model_not_found(bucket_or_dir: str, key: str) -> str:  # [U] the inference-component form [O]
    return (
        f"Failed to download model data (bucket: {bucket_or_dir}, key: {key}). Please ensure that there "
        "is an object located at the URL and that the role passed to CreateModel has permissions to "
        "download the model."
    )


def target_model_outside_prefix(target: str) -> str:  # [U]
    return f"TargetModel {target} must be a path relative to the model's ModelDataUrl."


def model_not_ready(target: str) -> str:  # [U]
    return (
        f"Model {target} is not ready yet: it is being downloaded and loaded. Retry the request; loading "
        "continues for up to 360 seconds."
    )


def containers_failed_ping(variant: str, hostnames: str) -> str:  # [D] the form; [U] the words around it
    return (
        f"The containers {hostnames} for production variant {variant} did not pass the ping health check. "
        "Please check CloudWatch logs for this endpoint."
    )


def target_container_required(endpoint: str) -> str:  # [U]
    return (
        f"Endpoint {endpoint} is a multi-container endpoint with Direct invocation: "
        "specify the TargetContainerHostname of the container to invoke."
    )


def unknown_target_container(hostname: str, endpoint: str) -> str:  # [U]
    return f"TargetContainerHostname {hostname} does not match any container of endpoint {endpoint}."


def target_container_not_direct(endpoint: str) -> str:  # [U]
    return (
        f"TargetContainerHostname is only allowed for multi-container endpoints with Direct invocation; "
        f"endpoint {endpoint} is not one."
    )


def volume_size_not_supported(instance_type: str) -> str:  # [U]; the SDK's rule, SageMaker's words unseen
    return (
        f"VolumeSizeInGB is not supported for instance type {instance_type}: its instances have "
        "instance storage (NVMe), which SageMaker uses instead of an EBS volume."
    )


def pipeline_payload_too_large(source: str, target: str, size: int) -> str:  # [D] 2023 text
    return (
        f"Received response from {source} with status code 200. However, the request payload from "
        f"{source} to {target} is {size} bytes, which has exceeded the maximum limit of 5 MB."
    )


# ---------------------------------------------------------------------- response streaming (§2)


def stream_time_exceeded(container: str = "primary") -> str:  # [O] a re:Post report of SageMaker's text
    return f"Your model {container} did not complete sending the inference response in the allotted time."


def stream_broken(detail: str, container: str = "primary") -> str:  # [U]
    return f"Container {container} closed the connection before the end of its streamed response ({detail})."


def internal_stream_failure(detail: str) -> str:  # [U]
    return f"smlocal failed while streaming the response: {detail}. Try your request again."


def streaming_multi_model(endpoint: str) -> str:  # [U]
    return (
        f"Endpoint {endpoint} is a multi-model endpoint: InvokeEndpointWithResponseStream cannot name a "
        "TargetModel. Use InvokeEndpoint."
    )


# ---------------------------------------------------------------------- asynchronous inference (§8)


def async_model_not_supported(model: str) -> str:  # [U] smlocal's own limit, for now
    return (
        f"Model {model} is a multi-model or multi-container model: smlocal serves asynchronous "
        "inference for single-container models only."
    )


def async_endpoint_needs_async_invoke(endpoint: str) -> str:  # [U]
    return (
        f"Endpoint {endpoint} is an asynchronous endpoint (its endpoint config has AsyncInferenceConfig): "
        "call InvokeEndpointAsync."
    )


def endpoint_not_async(endpoint: str) -> str:  # [U]
    return (
        f"Endpoint {endpoint} is not an asynchronous endpoint: InvokeEndpointAsync needs an endpoint "
        "config with AsyncInferenceConfig. Call InvokeEndpoint."
    )


def async_request_expired(inference_id: str, ttl_s: int) -> str:  # [U]
    return f"Inference {inference_id} expired after {ttl_s} seconds in the queue (RequestTTLSeconds)."


def async_input_unreadable(location: str, detail: str) -> str:  # [U]
    return f"Failed to download the input {location}: {detail}"


def async_model_failure(status: int) -> str:  # [O] AWS sample code's failureReason
    return (
        f"ClientError: Received server error ({status}) from model. See the SageMaker Endpoint logs in "
        "your account for more information."
    )


# ---------------------------------------------------------------------- serverless inference (§7)


def serverless_memory_size(value: int, allowed: tuple[int, ...]) -> str:  # [U]
    listed = ", ".join(str(a) for a in allowed)
    return f"MemorySizeInMB {value} is not supported for a serverless endpoint: choose one of {listed}."


def serverless_provisioned_over_max(variant: str, provisioned: int, maximum: int) -> str:  # [U]
    return (
        f"ProvisionedConcurrency ({provisioned}) of variant {variant} must be less than or equal to its "
        f"MaxConcurrency ({maximum})."
    )


def serverless_with_instances(variant: str) -> str:  # [U]
    return (
        f"Variant {variant} has a ServerlessConfig: it cannot also have InstanceType or InitialInstanceCount."
    )


def serverless_gpu(variant: str, instance_type: str) -> str:  # [U]; GPUs are not supported (spec §7)
    return (
        f"Serverless endpoints do not support GPUs: variant {variant} names instance type "
        f"{instance_type}. Remove InstanceType."
    )


def serverless_several_variants() -> str:  # [U]; one variant only (spec §7)
    return "An endpoint config with a serverless production variant can have only one production variant."


def serverless_async() -> str:  # [U]
    return "An endpoint config with a serverless production variant cannot have an AsyncInferenceConfig."


def serverless_model_not_supported(model: str, kind: str) -> str:  # [U]; spec §7
    return (
        f"Model {model} is a {kind} model: serverless endpoints support neither multi-model endpoints "
        "nor inference pipelines (models of several containers)."
    )


def serverless_network_isolation(model: str) -> str:  # [U]; spec §7
    return f"Model {model} has EnableNetworkIsolation: serverless endpoints do not support network isolation."


def serverless_model_data_source(model: str) -> str:  # [U]; ModelDataSource is not supported [M]
    return (
        f"Model {model} uses a ModelDataSource: serverless endpoints need model data given as one "
        "ModelDataUrl (a .tar.gz)."
    )


def serverless_oversize(request_id: str) -> str:  # [O] aws/sagemaker-python-sdk#4271
    return f"Request {request_id} has oversize body."


def serverless_throttled(endpoint: str, max_concurrency: int) -> str:  # [U]; AWS's message is unseen
    return (
        f"Endpoint {endpoint} is serving its MaxConcurrency of {max_concurrency} concurrent invocations: "
        "the request was throttled. Retry it later or raise MaxConcurrency."
    )


def serverless_out_of_memory(memory_size_mb: int) -> str:  # [U]
    return (
        f"The container used more than the endpoint's MemorySizeInMB ({memory_size_mb} MB) and was "
        "stopped (out of memory)."
    )


def serverless_cold_start_failed(reason: str) -> str:  # [U]
    return f"The serverless endpoint could not start its model container: {reason}"


def serverless_instance_count(variant: str) -> str:  # [U]
    return (
        f"Variant {variant} is serverless: it has no instance count to update. Use a new endpoint config "
        "to change its ServerlessConfig."
    )


def serverless_streaming(endpoint: str) -> str:  # [U] smlocal's own limit
    return (
        f"Endpoint {endpoint} is a serverless endpoint: smlocal does not serve "
        "InvokeEndpointWithResponseStream on serverless endpoints. Use InvokeEndpoint."
    )


def serverless_not_instance_scalable(variant: str, endpoint: str) -> str:  # [U]
    return (
        f"Variant {variant} of endpoint {endpoint} is serverless: it has no "
        "sagemaker:variant:DesiredInstanceCount to scale. Scale its "
        "sagemaker:variant:DesiredProvisionedConcurrency instead."
    )


def serverless_image_too_large(image: str, size: int, limit: int) -> str:  # [U]
    return (
        f"The image {image} is {size / 1024**3:.2f} GB ({size} bytes): serverless endpoints support images "
        f"of up to {limit / 1024**3:.2f} GB ({limit} bytes). Reduce the image size or deploy to instances."
    )


def serverless_update_not_serverless(variant: str) -> str:  # [U]
    return f"Variant {variant} is not serverless: ServerlessUpdateConfig applies to serverless variants only."


def not_provisioned_scalable(variant: str, endpoint: str) -> str:  # [U]
    return (
        f"Variant {variant} of endpoint {endpoint} has no ProvisionedConcurrency: only a serverless variant "
        "with ProvisionedConcurrency can be scaled in sagemaker:variant:DesiredProvisionedConcurrency."
    )


def provisioned_capacity_range(
    variant: str, max_concurrency: int, min_capacity: int, max_capacity: int
) -> str:
    # [U] ProvisionedConcurrency must stay within 1..MaxConcurrency (spec §7)
    return (
        f"MinCapacity ({min_capacity}) and MaxCapacity ({max_capacity}) of a "
        "sagemaker:variant:DesiredProvisionedConcurrency target must be between 1 and the MaxConcurrency "
        f"({max_concurrency}) of variant {variant}."
    )


def async_input_exactly_one() -> str:  # [U]
    return (
        "Provide exactly one of InputLocation and Body: the input in S3 (InputLocation) or inline "
        "(Body, up to 128000 bytes)."
    )
