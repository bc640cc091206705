"""An endpoint's logs as `smlocal logs` reads them: every CloudWatch-style stream at once (the live
containers' from the engine, stopped ones' from their archives, the platform's `_smlocal`), or the
live containers followed. Writing and archiving them is fleet/logs.py's."""

from __future__ import annotations

import asyncio

from emulator.hosting.endpoints.base import ServiceBase
from emulator.hosting.fleet.log_follow import LogFollow, selector
from emulator.model.cold_start import ColdStartProfile

#: why a live instance has no cold-start profile [U]
ADOPTED = "adopted after a restart of smlocal: its start was not measured by this server"


class EndpointLogs(ServiceBase):
    async def endpoint_logs(self, endpoint_name: str) -> dict[str, str]:
        """Every log stream of an endpoint, by CloudWatch-style stream name (`variant/instance-id`,
        `variant/instance-id/container-hostname` for each container of a multi-container instance, and
        `component/instance-id` for each copy of an inference component [U]):
        live containers from the engine, stopped ones from their archives, plus `_smlocal`."""
        root = self.config.logs_dir / endpoint_name
        streams: dict[str, str] = {}
        if root.exists():
            for path in sorted(root.rglob("*.log")):
                streams[str(path.relative_to(root).with_suffix(""))] = path.read_text(errors="replace")
        fleet = self._fleets.get(endpoint_name)
        live: list[tuple[str, str]] = []  # (stream name, container id)
        for i in fleet.all_instances() if fleet is not None else []:
            if i.containers:  # a multi-container instance: a stream per container, as CloudWatch has
                live.extend(
                    (f"{i.variant_name}/{i.instance_id}/{c.hostname}", c.handle.id) for c in i.containers
                )
            else:
                live.append((f"{i.variant_name}/{i.instance_id}", i.handle.id))
        for component in self._live_components.values():
            if component.endpoint_name == endpoint_name:
                live.extend((f"{component.name}/{c.instance_id}", c.handle.id) for c in component.copies)
        texts = await asyncio.gather(*(self.executors.engine(self.runtime.logs, cid) for _, cid in live))
        for (stream, _), text in zip(live, texts, strict=True):
            streams[stream] = text
        return dict(sorted(streams.items()))

    async def follow_logs(
        self, endpoint_name: str, variant: str | None, instance: str | None
    ) -> LogFollow | None:
        """The live containers' logs of an endpoint, followed; None when none is running."""
        return await LogFollow.open(self.runtime, selector(self.owner, endpoint_name, variant, instance))

    def cold_starts(self, endpoint_name: str) -> tuple[list[ColdStartProfile], list[tuple[str, str]]]:
        """The endpoint's cold-start profiles since the server started (oldest first), and its live
        instances without one, as (variant, instance id): adopted after a restart."""
        profiles = self.deployer.cold_starts.profiles(endpoint_name)
        fleet = self._fleets.get(endpoint_name)
        measured = {p.instance_id for p in profiles}
        missing = [
            (i.variant_name, i.instance_id)
            for i in (fleet.all_instances() if fleet is not None else [])
            if i.instance_id not in measured
        ]
        return profiles, missing
