"""A multi-model container's model API as smlocal drives it (spec §5): `POST /models` to load,
`DELETE /models/{name}` to unload, and the room a load needs: within the instance's memory budget
(idle models unloaded least recently used first), and after a 507 (the least recently used idle
model unloaded, the load tried again).

When no loaded model is idle (each serves a call) but one will be, or another load or unload is under
way, a load waits for that and looks again, up to the load window [U] (issue 23: 60 concurrent calls
over 6 models on a container holding 2 failed 48 % at once with the container's 507); only when
nothing can free room, or the window passes, is the call a 424 ModelError carrying the 507.

A 507 when smlocal knows no loaded model to unload may come from models loaded before smlocal
restarted (a killed smlocal adopts the running container, which keeps them; the new process knows
none): the load lists the container's models once (`GET /models`) and unloads those smlocal has no
entry for, then tries again (issue 23's lifecycle suite: 2 of 112 calls around a kill failed so).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import aiohttp

from emulator.config import MODEL_LOAD_LIMIT_S
from emulator.errors import ModelErrorResponse, ModelTimeout, ModelUnreachable
from emulator.hosting.fleet.invoker import FaultContext
from emulator.hosting.fleet.variants import Instance
from emulator.hosting.multi_model.cache import CachedModel, InstanceModels

log = logging.getLogger(__name__)

#: Where the container finds model `name`'s files (spec §5).
CONTAINER_MODELS = "/opt/ml/models"
#: the most pages of `GET /models` read when looking for models loaded before a restart
MAX_LIST_PAGES = 100


class ContainerModels:
    def __init__(
        self,
        load_window_s: float,
        session: Callable[[], aiohttp.ClientSession],
        metric: Callable[[InstanceModels, str, float], None],
    ) -> None:
        """`session`: the aiohttp session of calls into containers; `metric`: records one value."""
        self._window_s = load_window_s
        self._session = session
        self._metric = metric

    async def make_room(self, instance: Instance, models: InstanceModels, model: CachedModel) -> None:
        """Unload idle models, least recently used first, until this one fits the memory budget;
        when none is idle but one will be (or another load ends), wait for it, up to the load window."""
        deadline = _Deadline(self._window_s)
        while models.loaded_bytes(but=model) + model.size > models.memory_budget:
            victims = models.unload_candidates(model)
            if victims:
                await self.unload(instance, models, victims[0])
                models.evictions += 1
            elif not await self._wait_for_room(models, model, deadline):
                break  # nothing will free room in time: try the load, the container decides
        model.loading = True  # counted from now on: concurrent loads make room for each other

    async def _wait_for_room(self, models: InstanceModels, model: CachedModel, deadline: _Deadline) -> bool:
        """Wait until room may have been freed (True), or False at once when nothing else is
        loading or in use, or once `deadline` passes."""
        if not models.room_may_free(model) or deadline.passed():
            return False
        model.waiting = True
        try:
            async with asyncio.timeout(deadline.left()):
                await models.wait_change()
        except TimeoutError:
            return False
        finally:
            model.waiting = False
        return True

    async def load(
        self, instance: Instance, models: InstanceModels, model: CachedModel, context: FaultContext
    ) -> None:
        """The container's load; a 507 unloads the least recently used idle model and tries again,
        or, with every loaded model busy, waits (up to the load window) for one to become idle."""
        body = {"model_name": model.name, "url": f"{CONTAINER_MODELS}/{model.name}/model"}
        deadline = _Deadline(self._window_s)
        strangers_looked_for = False
        try:
            while model.unloading:  # its own unload first (unload() wakes the waiters when it ends)
                if deadline.passed():
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(deadline.left()):
                        await models.wait_change()
            while True:
                started = time.perf_counter()
                status, text = await self._call(instance, "POST", "/models", context, body)
                if 200 <= status < 300 or status == 409:
                    if status != 409:  # a 409 loaded nothing now
                        self._metric(models, "ModelLoadingTime", time.perf_counter() - started)
                    model.loaded = True
                    log.info("%s: loaded %s as %s", instance.instance_id, model.target, model.name)
                    return
                if status != 507:
                    raise context.fault(ModelErrorResponse, status, text or f"load answered {status}")
                victims = models.unload_candidates(model)
                if victims:  # 507: make room, then try again
                    await self.unload(instance, models, victims[0])
                    models.evictions += 1
                    continue
                if not strangers_looked_for:
                    # and look again after it, whatever it found: models may have become idle
                    # meanwhile (they are victims now, not room that may free)
                    strangers_looked_for = True
                    await self._unload_strangers(instance, models, context)
                    continue
                if not await self._wait_for_room(models, model, deadline):
                    raise context.fault(ModelErrorResponse, status, text or f"load answered {status}")
        finally:
            model.loading = False

    async def unload(self, instance: Instance, models: InstanceModels, model: CachedModel) -> None:
        model.loaded = False
        model.unloading = True
        started = time.perf_counter()
        try:
            with contextlib.suppress(Exception):  # a failed unload: the container keeps it; we do not
                await self._call(instance, "DELETE", f"/models/{model.name}", None)
                self._metric(models, "ModelUnloadingTime", time.perf_counter() - started)
        finally:
            model.unloading = False
            models.changed()
        log.info("%s: unloaded %s", instance.instance_id, model.target)

    async def _unload_strangers(
        self, instance: Instance, models: InstanceModels, context: FaultContext
    ) -> bool:
        """Unload the models the container holds that smlocal has no entry for (an adopted container
        keeps the models loaded before smlocal restarted; its new process knows none of them):
        `GET /models`, its pages followed. Whether any was unloaded."""
        listed: list[str] = []
        token: str | None = None
        for _ in range(MAX_LIST_PAGES):
            query = f"?{urllib.parse.urlencode({'next_page_token': token})}" if token else ""
            status, text = await self._call(instance, "GET", f"/models{query}", context)
            page = _listed(text) if status == 200 else None
            if page is None:
                break
            names, token = page
            listed += names
            if token is None:
                break
        strangers = [n for n in listed if not any(m.name == n for m in models.models.values())]
        for name in strangers:  # (known as of after the listing: a call may have asked for one meanwhile)
            with contextlib.suppress(Exception):  # the container keeps it: its 507 will say so
                await self._call(instance, "DELETE", f"/models/{urllib.parse.quote(name, safe='')}", None)
                log.info("%s: unloaded %s, loaded before smlocal restarted", instance.instance_id, name)
        return bool(strangers)

    async def _call(
        self, instance: Instance, method: str, path: str, context: FaultContext | None, body: Any = None
    ) -> tuple[int, str]:
        """One call of the container's model API: its status and body text."""
        timeout = aiohttp.ClientTimeout(total=MODEL_LOAD_LIMIT_S)
        try:
            async with self._session().request(
                method, f"{instance.base_url}{path}", json=body, timeout=timeout, allow_redirects=False
            ) as resp:
                return resp.status, (await resp.content.read(64 * 1024)).decode("utf-8", "replace")
        except TimeoutError:
            if context is None:
                raise
            raise context.fault(ModelTimeout, 0, f"{method} {path} did not answer") from None
        except aiohttp.ClientError as exc:
            if context is None:
                raise
            raise context.fault(ModelUnreachable, 0, f"{method} {path} failed: {exc}") from exc


def _listed(text: str) -> tuple[list[str], str | None] | None:
    """The model names and the next page's token of a `GET /models` answer (spec §5), or None
    when it is not that shape."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    entries = value.get("models") if isinstance(value, dict) else None
    if not isinstance(entries, list):
        return None
    names = [e["modelName"] for e in entries if isinstance(e, dict) and isinstance(e.get("modelName"), str)]
    token = value.get("nextPageToken")
    return names, token if isinstance(token, str) and token else None


class _Deadline:
    """How long a load may wait for room: the load window, from when its wait began."""

    def __init__(self, budget_s: float) -> None:
        self._at = time.monotonic() + budget_s

    def left(self) -> float:
        return max(0.0, self._at - time.monotonic())

    def passed(self) -> bool:
        return time.monotonic() >= self._at
