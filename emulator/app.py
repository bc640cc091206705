"""Composition root: the aiohttp Application serving SageMaker's APIs on one port."""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import boto3
from aiohttp import web

from emulator.config import ServerConfig, instance_volume_bytes
from emulator.errors import PolicyFileInvalid
from emulator.hosting.endpoints.service import HostingService
from emulator.hosting.monitoring import store as m
from emulator.hosting.monitoring.alarms import AlarmService
from emulator.hosting.monitoring.component_load import SAMPLE_EVERY_S, ComponentLoadSampler
from emulator.hosting.monitoring.sampler import InstanceProbes, InstanceRef, Sampler
from emulator.hosting.monitoring.store import Metrics
from emulator.hosting.scaling.autoscaler import AutoScaler
from emulator.model.arns import Account
from emulator.model.iam_access import AccessPolicies
from emulator.model_data.store import ArtifactStore
from emulator.runtime import gpus, labels
from emulator.runtime.base import ContainerRuntime
from emulator.runtime.docker import DockerRuntime
from emulator.wire import (
    admin_api,
    autoscaling_api,
    cloudwatch_api,
    control_api,
    guard,
    runtime_api,
    runtime_async,
    runtime_stream,
)
from emulator.wire.access import AccessCheck
from emulator.wire.errors import unknown_target

SERVICE = web.AppKey("hosting_service", HostingService)
CONFIG = web.AppKey("config", ServerConfig)
METRICS = web.AppKey("metrics", Metrics)
SCALER = web.AppKey("autoscaler", AutoScaler)
ALARMS = web.AppKey("alarms", AlarmService)


def _copies_in_rotation(service: HostingService, component: str) -> int:
    """An inference component's copies in rotation (InvocationsPerCopy's divisor; 1 at least)."""
    load = service.component_load(component)
    return max(load[1], 1) if load is not None else 1


def _instance_count(service: HostingService, endpoint: str, variant: str) -> int:
    """A variant's live instance count when metrics first see it (then the sampler keeps it current)."""
    try:
        described = service.describe_endpoint(endpoint)
    except Exception:  # noqa: BLE001 - gone meanwhile
        return 1
    return next(
        (v.current_instance_count for v in described.production_variants if v.variant_name == variant), 1
    )


def _sampler(
    metrics: Metrics, service: HostingService, rt: ContainerRuntime, config: ServerConfig
) -> Sampler:
    """CPU/memory/disk/GPU sampling over the engine's view of this server's endpoint containers (by
    label); the host's GPUs are looked for once, here."""
    selector = {
        labels.MANAGED: "true",
        labels.OWNER: labels.owner_id(config.state_dir),
        labels.ROLE: "endpoint",
    }

    def instances() -> list[InstanceRef]:
        return [
            InstanceRef(
                h.labels.get(labels.ENDPOINT, ""),
                h.labels.get(labels.VARIANT, ""),
                h.labels.get(labels.INSTANCE, ""),
                h.id,
                h.labels.get(labels.CONTAINER_HOSTNAME, ""),
            )
            for h in rt.list(selector)
        ]

    def stats(container_id: str) -> tuple[float | None, float | None] | None:
        sample = rt.stats(container_id)
        return None if sample is None else (sample.cpu_percent, sample.memory_percent)

    async def counts() -> dict[tuple[str, str], int]:
        found: dict[tuple[str, str], int] = {}
        for endpoint in list(service.endpoints):
            try:
                described = service.describe_endpoint(endpoint.name)
            except Exception:  # noqa: BLE001 - deleted meanwhile
                continue
            for v in described.production_variants:
                found[(endpoint.name, v.variant_name)] = v.current_instance_count
        return found

    def volume_bytes(endpoint: str, variant: str) -> float:
        """The variant's volume per instance: its VolumeSizeInGB in the endpoint's config, else its
        instance type's (from DescribeEndpoint, or from the endpoint config while DescribeEndpoint
        lists no variants yet: Creating); 0 (no datapoint) for a variant neither names."""
        try:
            described = service.describe_endpoint(endpoint)
            configured = service.describe_endpoint_config(described.endpoint_config_name)
        except Exception:  # noqa: BLE001 - deleted meanwhile
            return 0.0
        running = [v.instance_type for v in described.production_variants if v.variant_name == variant]
        planned = [v for v in configured.production_variants if v.variant_name == variant]
        instance_type = running[0] if running else planned[0].instance_type if planned else None
        if not running and not planned:
            return 0.0
        size = planned[0].volume_size_gb if planned else None
        return instance_volume_bytes(config, instance_type, size)

    probes = InstanceProbes(
        disk_usage=lambda: rt.disk_usage(selector),
        volume_bytes=volume_bytes,
        gpus=gpus.find_reader(),
        gpu_access=rt.gpu_access,
        loaded_models=service.multi_model.loaded_counts,
    )
    return Sampler(metrics, instances, stats, counts, config.metrics_period_real_s, probes=probes)


def _async_invocation(
    metrics: m.Metrics, endpoint: str, variant: str, status: int, model_s: float, total_s: float
) -> None:
    """An async request's container call: Invocation4XX/5XXErrors and ModelLatency (Invocations,
    InvocationsPerInstance and OverheadLatency are not published for async endpoints)."""
    metrics.async_endpoints.add(endpoint)
    outcome = m.OK if 200 <= status < 300 else runtime_api.outcome_of(status)
    metrics.record(endpoint, variant, outcome, model_s, total_s)


def _s3_factory(config: ServerConfig) -> Callable[[], Any]:
    return _client_factory(config, "s3", config.s3_endpoint_url)


def _client_factory(config: ServerConfig, service: str, endpoint_url: str | None) -> Callable[[], Any]:
    def make() -> Any:
        return boto3.session.Session().client(service, endpoint_url=endpoint_url, region_name=config.region)

    return make


def _access_check(config: ServerConfig) -> AccessCheck | None:
    """`--iam-policies FILE`, read and parsed once here: a bad file stops `smlocal serve` at start."""
    path = config.iam_policies_file
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyFileInvalid(f"--iam-policies {path}: cannot read it: {exc}") from None
    policies = AccessPolicies.parse(text, config.region, source=f"--iam-policies {path}")
    return AccessCheck(policies, Account(config.region, config.account_id))


def build_app(
    config: ServerConfig,
    runtime: ContainerRuntime | None = None,
    stop_containers_on_exit: bool = True,
) -> web.Application:
    # The body cap is enforced by the runtime handler with SageMaker's error; the server's own
    # cap only has to stay above it.
    app = web.Application(
        client_max_size=config.limits.max_request_bytes + 1, middlewares=guard.middlewares(config.host)
    )
    app.on_response_prepare.append(guard.add_request_id)
    app[CONFIG] = config
    metrics = app[METRICS] = Metrics(period_s=config.metrics_period_real_s)
    hooks = runtime_api.MetricHooks(metrics)
    access = _access_check(config)

    async def hosting(app: web.Application) -> AsyncIterator[None]:
        config.state_dir.mkdir(parents=True, exist_ok=True)
        own: DockerRuntime | None = None  # an engine client this app makes is closed with it
        rt: ContainerRuntime
        if runtime is None:
            rt = own = DockerRuntime()
        else:
            rt = runtime
        artifacts = ArtifactStore.for_server(config, _s3_factory(config))
        multi_model_artifacts = ArtifactStore.for_multi_model(config, _s3_factory(config))
        service = HostingService(
            config,
            rt,
            artifacts,
            s3_client_factory=_s3_factory(config),
            sns_client_factory=_client_factory(config, "sns", config.sns_endpoint_url),
            multi_model_artifacts=multi_model_artifacts,
        )
        app[SERVICE] = service
        await service.start()
        metrics.instance_count = functools.partial(_instance_count, service)
        hooks.sampler = _sampler(metrics, service, rt, config)
        service.multi_model.record = metrics.record_model_metric
        service.async_inference.metrics.record = metrics.record_async
        service.async_inference.metrics.invocation = functools.partial(_async_invocation, metrics)
        service.serverless.record = metrics.record_model_metric
        hooks.sampler.start()
        scaler = app[SCALER] = AutoScaler(config, service, metrics)
        scaler.start()
        alarms = app[ALARMS] = AlarmService(config, metrics, scaler)
        alarms.start()
        service.alarm_states = alarms.in_alarm  # deployments roll back on these
        scaler.registry.alarms_targeting = alarms.targeting
        alarms.managed = scaler.managed_alarms  # target tracking's alarms, shown by DescribeAlarms
        service.deletion_listeners.append(metrics.forget)  # a deleted endpoint's metrics go missing
        service.component_deletion_listeners.append(metrics.forget_component)
        hooks.copies_of = functools.partial(_copies_in_rotation, service)
        component_load = ComponentLoadSampler(
            metrics,
            lambda: [c.name for c in service.inference_components],
            service.component_load,
            config.real_seconds(SAMPLE_EVERY_S),
        )
        component_load.start()
        yield
        await component_load.close()
        await alarms.close()
        await scaler.close()
        await hooks.sampler.close()
        await service.close(stop_containers=stop_containers_on_exit)
        artifacts.close()
        multi_model_artifacts.close()
        if own is not None:  # the engine client this app made: its connections go with it
            own.close()

    app.cleanup_ctx.append(hosting)

    def bind(
        handler: Callable[..., Awaitable[web.StreamResponse]], *args: Any
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def route(request: web.Request) -> web.StreamResponse:
            return await handler(request, request.app[SERVICE], *args)

        return functools.update_wrapper(route, handler)

    async def json_rpc(request: web.Request) -> web.StreamResponse:
        target = request.headers.get("X-Amz-Target", "")
        service, _, operation = target.partition(".")
        if service == "SageMaker":
            return await control_api.handle(request, request.app[SERVICE], operation)
        if service == autoscaling_api.TARGET_PREFIX:
            return await autoscaling_api.handle(request, request.app[SCALER], operation)
        if service == cloudwatch_api.SERVICE_ID:
            return await cloudwatch_api.handle_json(request, request.app[ALARMS], operation)
        return unknown_target(target or "(no X-Amz-Target)", str(uuid.uuid4()))

    async def cloudwatch(request: web.Request) -> web.StreamResponse:
        return await cloudwatch_api.handle_cbor(request, request.app[ALARMS])

    async def fallback(request: web.Request) -> web.StreamResponse:
        return unknown_target(f"{request.method} {request.path}", str(uuid.uuid4()))

    app.router.add_post("/", json_rpc)
    app.router.add_post(cloudwatch_api.PATH, cloudwatch)  # CloudWatch (smithy-rpc-v2-cbor)
    app.router.add_post("/endpoints/{name}/invocations", bind(runtime_api.invoke_endpoint, hooks, access))
    app.router.add_post(
        "/endpoints/{name}/async-invocations", bind(runtime_async.invoke_endpoint_async, access)
    )
    app.router.add_post(
        "/endpoints/{name}/invocations-response-stream",
        bind(runtime_stream.invoke_endpoint_with_response_stream, hooks, access),
    )
    app.router.add_get("/_smlocal/health", bind(admin_api.health))
    app.router.add_get("/_smlocal/endpoints/{name}/logs", bind(admin_api.endpoint_logs))
    app.router.add_get("/_smlocal/endpoints/{name}/metrics", bind(admin_api.endpoint_metrics, metrics))
    app.router.add_get("/_smlocal/endpoints/{name}/cold-starts", bind(admin_api.endpoint_cold_starts))
    app.router.add_get("/metrics", bind(admin_api.prometheus, metrics))
    app.router.add_post("/_smlocal/shutdown", bind(admin_api.shutdown))
    app.router.add_route("*", "/{tail:.*}", fallback)
    return app
