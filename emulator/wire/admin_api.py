"""smlocal's own routes under /_smlocal/: health, logs, metrics, cold starts, shutdown. Not part of
any AWS API.

Errors are AWS-shaped like every other answer (`__type`, `message`, x-amzn-RequestId): a bad query
value or endpoint name is a 400 ValidationException naming it, an unknown endpoint a 404. The
state-changing routes (POST) need `X-Smlocal-Admin: 1` (emulator.wire.guard)."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid

from aiohttp import web

from emulator import __version__
from emulator.hosting.endpoints.logs import ADOPTED
from emulator.hosting.endpoints.service import HostingService
from emulator.hosting.monitoring.store import Metrics
from emulator.wire.errors import plain_error
from emulator.wire.java_patterns import matcher
from emulator.wire.service_models import SAGEMAKER, operation_model

#: SageMaker's EndpointName pattern, from botocore's model.
_ENDPOINT_NAME = operation_model(SAGEMAKER, "DescribeEndpoint").input_shape.members["EndpointName"]
_endpoint_name_ok = matcher(str(_ENDPOINT_NAME.metadata["pattern"])) or (lambda name: "/" not in name)
_ENDPOINT_NAME_MAX = int(_ENDPOINT_NAME.metadata.get("max", 63))
_FLAGS = {"1": True, "true": True, "0": False, "false": False, "": False}


class BadQuery(Exception):
    """A query value or path part of an admin route that makes no sense; answered 400."""


def _bad_request(message: str) -> web.Response:
    return plain_error(400, "ValidationException", message, str(uuid.uuid4()))


def _not_found(message: str) -> web.Response:
    return plain_error(404, "ResourceNotFoundException", message, str(uuid.uuid4()))


def _endpoint_name(request: web.Request) -> str:
    name = request.match_info["name"]
    if not 1 <= len(name) <= _ENDPOINT_NAME_MAX or not _endpoint_name_ok(name):
        raise BadQuery(f"{name!r} is not an endpoint name (letters, digits and hyphens, at most 63).")
    return name


def _tail(request: web.Request) -> int:
    text = request.query.get("tail", "0")
    try:
        tail = int(text)
    except ValueError:
        tail = -1
    if tail < 0:
        raise BadQuery(f"Query parameter tail must be a whole number of lines (0 or more), not {text!r}.")
    return tail


def _follow(request: web.Request) -> bool:
    text = request.query.get("follow", "")
    flag = _FLAGS.get(text.lower())
    if flag is None:
        raise BadQuery(f"Query parameter follow must be 1, true, 0 or false, not {text!r}.")
    return flag


async def health(request: web.Request, svc: HostingService) -> web.Response:
    owner = svc.owner  # `smlocal down` checks it before a shutdown
    return web.json_response(
        {"status": "ok", "version": __version__, "endpoints": len(svc.endpoints), "owner": owner}
    )


async def endpoint_logs(request: web.Request, svc: HostingService) -> web.StreamResponse:
    """Every stream of an endpoint, each line prefixed by `variant/instance-id` (CloudWatch's stream name)."""
    try:
        name = _endpoint_name(request)
        tail = _tail(request)
        follow = _follow(request)
    except BadQuery as exc:
        return _bad_request(str(exc))
    variant = request.query.get("variant")
    instance = request.query.get("instance")
    if follow:
        return await _follow_logs(request, svc, name, variant, instance)
    streams = await svc.endpoint_logs(name)
    if not streams:
        return _not_found(f"No logs for endpoint {name}.")
    out: list[str] = []
    for stream, text in streams.items():
        parts = stream.split("/")
        if variant and parts[0] != variant:
            continue
        if instance and (len(parts) < 2 or parts[1] != instance):
            continue
        lines = text.splitlines()
        if tail:
            lines = lines[-tail:]
        out.extend(f"{stream} {line}" for line in lines)
    return web.Response(text="\n".join(out) + ("\n" if out else ""), content_type="text/plain")


async def _follow_logs(
    request: web.Request, svc: HostingService, name: str, variant: str | None, instance: str | None
) -> web.StreamResponse:
    """Stream the live containers' logs (history, then new lines) until the client goes away or
    every container has stopped with none taking its place (emulator.hosting.fleet.log_follow)."""
    follow = await svc.follow_logs(name, variant, instance)
    if follow is None:
        return _not_found(f"No running containers for endpoint {name}.")
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    await response.prepare(request)
    try:
        async for line in follow.lines():
            if line is not None:
                await response.write(line.encode())
            elif request.transport is None or request.transport.is_closing():
                break  # the client went away (Ctrl-C) while nothing was written
    except ConnectionResetError:
        pass
    finally:
        follow.close()
    return response


async def shutdown(request: web.Request, svc: HostingService) -> web.Response:
    """Ask the serving process to stop gracefully (used by `smlocal down`)."""
    asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGTERM)
    return web.json_response({"status": "stopping"})


async def endpoint_metrics(request: web.Request, svc: HostingService, metrics: Metrics) -> web.Response:
    """The endpoint's metric periods, with CloudWatch's metric names, units and statistics."""
    try:
        name = _endpoint_name(request)
    except BadQuery as exc:
        return _bad_request(str(exc))
    if svc.endpoints.get_exact(name) is None and not metrics.series(name):
        return _not_found(f"No metrics for endpoint {name}.")
    report = metrics.report(name)
    profiles, _ = svc.cold_starts(name)
    if profiles:  # smlocal's own member: each instance's cold start (`smlocal metrics` prints it)
        report["ColdStarts"] = [p.to_json() for p in profiles]
    return web.json_response(report)


async def endpoint_cold_starts(request: web.Request, svc: HostingService) -> web.Response:
    """The cold-start profile of every instance the server started for the endpoint (oldest first),
    and the live instances it has none for (adopted after a restart)."""
    try:
        name = _endpoint_name(request)
    except BadQuery as exc:
        return _bad_request(str(exc))
    profiles, missing = svc.cold_starts(name)
    if not profiles and not missing and svc.endpoints.get_exact(name) is None:
        return _not_found(f"No cold-start profiles for endpoint {name}.")
    return web.json_response(
        {
            "EndpointName": name,
            "Profiles": [p.to_json() for p in profiles],
            "WithoutProfile": [{"VariantName": v, "InstanceId": i, "Reason": ADOPTED} for v, i in missing],
        }
    )


async def prometheus(request: web.Request, svc: HostingService, metrics: Metrics) -> web.Response:
    """All endpoints' metrics in Prometheus' text exposition format (docs/metrics.md)."""
    return web.Response(
        body=metrics.prometheus().encode(),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )
