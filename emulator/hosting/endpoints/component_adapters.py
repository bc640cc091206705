"""Adapter inference components (BaseInferenceComponentName): a LoRA-style adapter served by its
base component's copies, with the base's compute, invoked by its own name.

The mechanism is SageMaker's adapter API for model containers, as AWS's own
model_hosting_container_standards (the LMI / vLLM containers' SageMaker layer) implements it [U: the
API is the containers', smlocal's staging of the files is its own choice]:

* the adapter's `Container.ArtifactUrl` (a .tar.gz, or an S3 prefix ending in "/") is materialized
  through the model data cache and copied into its base's adapter folder, which every copy of the
  base has mounted read-only at ADAPTER_ROOT (/opt/ml/adapters), one folder per adapter;
* every copy of the base is asked `POST /adapters` {"name": ADAPTER, "src": "/opt/ml/adapters/ADAPTER"}
  (a copy started later is asked before it joins rotation); an answer other than 2xx fails the
  adapter with the container's answer;
* an invocation of the adapter goes to a copy of the base with the header
  `X-Amzn-SageMaker-Adapter-Identifier: ADAPTER`;
* DeleteInferenceComponent of the adapter asks `DELETE /adapters/ADAPTER` of every copy, then removes
  its folder. A base cannot be deleted while adapters use it [U].
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import shutil
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import aiohttp

from emulator.config import MODEL_DATA_DOWNLOAD_TIMEOUT_S
from emulator.errors import DeploymentFailed, ValidationFailed
from emulator.hosting.endpoints.base import failure_reason
from emulator.hosting.endpoints.component_live import LiveComponent
from emulator.hosting.endpoints.component_rollout import ComponentRollout
from emulator.hosting.fleet.variants import Instance
from emulator.model import messages
from emulator.model.components import ADAPTER_ROOT, ComponentSpec, ComponentStatus, InferenceComponent
from emulator.model.resources import ModelDataSource

log = logging.getLogger(__name__)

#: How long a copy may take to answer one adapter registration [U].
REGISTER_TIMEOUT_S = 60.0
_SERVING = (ComponentStatus.CREATING, ComponentStatus.IN_SERVICE, ComponentStatus.UPDATING)


class ComponentAdapters(ComponentRollout):
    def _adapters_of(self, base: str) -> list[InferenceComponent]:
        """The adapters loaded (or being loaded) into the base's copies."""
        return [
            c
            for c in self.inference_components
            if c.spec.base_component_name is not None
            and c.spec.base_component_name.lower() == base.lower()
            and c.status in _SERVING
        ]

    def _create_adapter(
        self, name: str, endpoint_name: str, spec: ComponentSpec, tags: tuple[tuple[str, str], ...]
    ) -> InferenceComponent:
        base_name = spec.base_component_name
        assert base_name is not None
        base = self.inference_components.get(base_name)
        if base is None or base.spec.adapter or base.endpoint_name != endpoint_name:
            raise ValidationFailed(messages.adapter_base_not_found(base_name, endpoint_name))
        if base.status is not ComponentStatus.IN_SERVICE:
            raise ValidationFailed(messages.adapter_base_not_in_service(base.name, base.status.value))
        if spec.container is None or spec.container.artifact_url is None:
            raise ValidationFailed(messages.adapter_needs_artifact(name))
        if spec.compute is not None:
            raise ValidationFailed(messages.adapter_has_compute(name))
        now = self._clock()
        record = InferenceComponent(
            name=name,
            arn=self.account.inference_component_arn(name),
            endpoint_name=base.endpoint_name,
            variant_name=base.variant_name,
            spec=spec,
            desired_copies=0,
            creation_time=now,
            last_modified_time=now,
            tags=tags,
        )
        self.inference_components.put(record)
        self._persist_components()
        self.deployer.platform_log(base.endpoint_name, f"{name}: loading the adapter into {base.name}")
        self._background(self._load_adapter(record))
        return record

    def _background(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    def _adapter_restored(self, record: InferenceComponent) -> None:
        if record.status is ComponentStatus.DELETING:
            self._background(self._unload_adapter(record))
        elif record.status is ComponentStatus.CREATING:
            self._background(self._load_adapter(record))

    async def _load_adapter(self, record: InferenceComponent) -> None:
        """The artifact staged, every copy of the base told: InService, or Failed with the reason."""
        base = record.spec.base_component_name
        assert base is not None
        try:
            await self._stage(record)
            live = self._live_components.get(base.lower())
            copies = [] if live is None else list(live.copies)
            await asyncio.gather(*(self._register(live, c, record.name) for c in copies if live is not None))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure is the adapter's FailureReason
            reason = failure_reason(record.endpoint_name, exc)
            self.deployer.platform_log(record.endpoint_name, f"{record.name}: {reason}")
            self._set_component(record.name, ComponentStatus.FAILED, reason)
            return
        self._set_component(record.name, ComponentStatus.IN_SERVICE, None)
        self.deployer.platform_log(record.endpoint_name, f"{record.name}: adapter InService on {base}")

    async def _stage(self, record: InferenceComponent) -> Path:
        """The adapter's artifact, materialized and copied into its base's adapter folder."""
        container = record.spec.container
        assert container is not None and container.artifact_url is not None
        url = container.artifact_url
        source = ModelDataSource(url, "None", "S3Prefix") if url.endswith("/") else ModelDataSource(url)
        variant = self._fleets[record.endpoint_name].variants[record.variant_name].variant
        timeout_s = float(record.spec.model_data_download_timeout_s or MODEL_DATA_DOWNLOAD_TIMEOUT_S)
        deadline = time.monotonic() + timeout_s * self.config.model_data_timeout_scale
        staged = await self._materialize(record.endpoint_name, variant, source, deadline)
        assert record.spec.base_component_name is not None
        target = self._adapters_dir(record.endpoint_name, record.spec.base_component_name) / record.name
        await self.executors.model_data(_replace_tree, staged, target)
        return target

    async def _register(self, live: LiveComponent, copy: Instance, adapter: str) -> None:
        """POST /adapters on one copy of the base; DeploymentFailed with its answer unless 2xx."""
        body = {"name": adapter, "src": f"{ADAPTER_ROOT}/{adapter}"}
        timeout = aiohttp.ClientTimeout(total=REGISTER_TIMEOUT_S)
        try:
            async with self.invoker.session.post(
                f"{copy.base_url}/adapters", json=body, timeout=timeout, allow_redirects=False
            ) as resp:
                text = (await resp.content.read(500)).decode(errors="replace")
                if not 200 <= resp.status < 300:
                    raise DeploymentFailed(
                        messages.adapter_refused(adapter, live.name, copy.instance_id, resp.status, text)
                    )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise DeploymentFailed(
                messages.adapter_refused(
                    adapter, live.name, copy.instance_id, 0, str(exc) or type(exc).__name__
                )
            ) from exc

    async def _copies_started(self, live: LiveComponent, copies: list[Instance]) -> None:
        """New copies of a base: every adapter loaded (or being loaded) is registered first."""
        adapters = [a for a in self._adapters_of(live.name) if a.status is not ComponentStatus.CREATING]
        await asyncio.gather(*(self._register(live, c, a.name) for c in copies for a in adapters))

    def _delete_adapter(self, record: InferenceComponent) -> None:
        self.inference_components.put(
            dataclasses.replace(record, status=ComponentStatus.DELETING, last_modified_time=self._clock())
        )
        self._persist_components()
        self._background(self._unload_adapter(record))

    async def _unload_adapter(self, record: InferenceComponent) -> None:
        """DELETE /adapters/NAME on every copy of the base (a refusal is logged), its folder removed."""
        base = record.spec.base_component_name
        assert base is not None
        live = self._live_components.get(base.lower())
        copies = [] if live is None else list(live.copies)
        results = await asyncio.gather(
            *(self._unregister(c, record.name) for c in copies), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
            if isinstance(result, Exception):
                self.deployer.platform_log(record.endpoint_name, f"{record.name}: unloading: {result}")
        folder = self._adapters_dir(record.endpoint_name, base) / record.name
        await self.executors.model_data(shutil.rmtree, folder, True)
        self.inference_components.remove(record.name)
        self._persist_components()
        self.deployer.platform_log(record.endpoint_name, f"{record.name}: deleted")

    async def _unregister(self, copy: Instance, adapter: str) -> None:
        timeout = aiohttp.ClientTimeout(total=REGISTER_TIMEOUT_S)
        async with self.invoker.session.delete(
            f"{copy.base_url}/adapters/{adapter}", timeout=timeout, allow_redirects=False
        ) as resp:
            await resp.read()
            if not 200 <= resp.status < 300 and resp.status != 404:
                raise DeploymentFailed(
                    f"DELETE /adapters/{adapter} on {copy.instance_id}: HTTP {resp.status}"
                )


def _replace_tree(source: Path, target: Path) -> None:
    """Copy the staged artifact into the adapter's folder (replacing an older copy)."""
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target)
