"""smlocal's own routes under /_smlocal/: health, logs, shutdown. Not part of any AWS API."""

from __future__ import annotations

import asyncio
import os
import signal

from aiohttp import web

from emulator import __version__
from emulator.hosting.service import HostingService


async def health(request: web.Request, svc: HostingService) -> web.Response:
    return web.json_response({"status": "ok", "version": __version__, "endpoints": len(svc.endpoints)})


async def endpoint_logs(request: web.Request, svc: HostingService) -> web.Response:
    """Every stream of an endpoint, each line prefixed by `variant/instance-id` (CloudWatch's stream name)."""
    name = request.match_info["name"]
    variant = request.query.get("variant")
    instance = request.query.get("instance")
    tail = int(request.query.get("tail", "0"))
    streams = await svc.endpoint_logs(name)
    if not streams:
        return web.json_response({"message": f"No logs for endpoint {name}."}, status=404)
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


async def shutdown(request: web.Request, svc: HostingService) -> web.Response:
    """Ask the serving process to stop gracefully (used by `smlocal down`)."""
    asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGTERM)
    return web.json_response({"status": "stopping"})
