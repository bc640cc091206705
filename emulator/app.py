"""Composition root: the aiohttp Application serving SageMaker's APIs on one port."""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import boto3
from aiohttp import web

from emulator.config import ServerConfig
from emulator.hosting.artifacts import ArtifactStore
from emulator.hosting.service import HostingService
from emulator.runtime.base import ContainerRuntime
from emulator.runtime.docker import DockerRuntime
from emulator.wire import admin_api, control_api, runtime_api
from emulator.wire.errors import unknown_target

SERVICE = web.AppKey("hosting_service", HostingService)
CONFIG = web.AppKey("config", ServerConfig)


def _s3_factory(config: ServerConfig) -> Callable[[], Any]:
    def make() -> Any:
        return boto3.session.Session().client(
            "s3", endpoint_url=config.s3_endpoint_url, region_name=config.region
        )

    return make


def build_app(
    config: ServerConfig,
    runtime: ContainerRuntime | None = None,
    stop_containers_on_exit: bool = True,
) -> web.Application:
    # The body cap is enforced by the runtime handler with SageMaker's error; the server's own
    # cap only has to stay above it.
    app = web.Application(client_max_size=config.limits.max_request_bytes + 1)
    app[CONFIG] = config

    async def hosting(app: web.Application) -> AsyncIterator[None]:
        config.state_dir.mkdir(parents=True, exist_ok=True)
        rt = runtime or DockerRuntime()
        artifacts = ArtifactStore(config.artifacts_dir, _s3_factory(config))
        service = HostingService(config, rt, artifacts)
        app[SERVICE] = service
        await service.start()
        yield
        await service.close(stop_containers=stop_containers_on_exit)

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
        return unknown_target(target or "(no X-Amz-Target)", str(uuid.uuid4()))

    async def fallback(request: web.Request) -> web.StreamResponse:
        return unknown_target(f"{request.method} {request.path}", str(uuid.uuid4()))

    app.router.add_post("/", json_rpc)
    app.router.add_post("/endpoints/{name}/invocations", bind(runtime_api.invoke_endpoint))
    app.router.add_post(
        "/endpoints/{name}/async-invocations", bind(runtime_api.not_implemented, "InvokeEndpointAsync")
    )
    app.router.add_post(
        "/endpoints/{name}/invocations-response-stream",
        bind(runtime_api.not_implemented, "InvokeEndpointWithResponseStream"),
    )
    app.router.add_get("/_smlocal/health", bind(admin_api.health))
    app.router.add_get("/_smlocal/endpoints/{name}/logs", bind(admin_api.endpoint_logs))
    app.router.add_post("/_smlocal/shutdown", bind(admin_api.shutdown))
    app.router.add_route("*", "/{tail:.*}", fallback)
    return app
