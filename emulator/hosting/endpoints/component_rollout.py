"""UpdateInferenceComponent's rollout: a new specification's copies replace the old ones batch by
batch, rolled back when a batch fails or an alarm of its AutoRollbackConfiguration fires."""

from __future__ import annotations

import asyncio
import dataclasses

from emulator.errors import DeploymentFailed, EngineError
from emulator.hosting.endpoints.base import failure_reason
from emulator.hosting.endpoints.component_copies import ComponentCopies
from emulator.hosting.endpoints.component_live import LiveComponent
from emulator.hosting.fleet.variants import Instance, VariantFleet
from emulator.model import messages
from emulator.model.components import ComponentStatus, InferenceComponent


class ComponentRollout(ComponentCopies):
    async def _roll_out(self, live: LiveComponent, record: InferenceComponent, variant: VariantFleet) -> None:
        """UpdateInferenceComponent: the new specification's copies replace the old ones a batch at a
        time (RollingUpdatePolicy.MaximumBatchSize, WaitIntervalInSeconds between batches; all at
        once without one [U]); each batch is started and healthy before as many old copies leave
        rotation, so that the component never serves fewer copies. A batch that fails (or an alarm of
        AutoRollbackConfiguration in ALARM) rolls back: the new copies stop, the old ones serve on, the
        old specification is kept and the failure is the component's FailureReason (InService) [U]."""
        old = list(live.copies)
        old_spec, old_plan = live.spec, live.plan
        deployment = record.last_deployment_config
        desired = record.desired_copies
        batch = (
            desired if deployment is None else deployment.rolling_update.maximum_batch_size.copies(desired)
        )
        wait_s = 0.0 if deployment is None else float(deployment.rolling_update.wait_interval_s)
        new: list[Instance] = []
        try:
            plan = await self._component_plan(record)
            live.spec, live.plan = record.spec, plan
            while len(new) < desired:
                step = min(batch, desired - len(new))
                new += await self._add_copies(live, plan, step, variant)
                if live.pending:
                    raise DeploymentFailed(messages.component_update_no_room(live.name, live.pending))
                retiring = old[:step]
                old = old[step:]
                for copy in retiring:
                    self._forget_copy(live, copy)
                await self._retire(retiring)
                if wait_s and len(new) < desired:
                    await self._bake(record, wait_s)
            if old:
                for copy in old:
                    self._forget_copy(live, copy)
                await self._retire(old)
            if deployment is not None and wait_s:
                await self._bake(record, wait_s)
        except (DeploymentFailed, EngineError) as exc:
            reason = failure_reason(live.endpoint_name, exc)
            self.deployer.platform_log(
                live.endpoint_name, f"{live.name}: update failed, rolling back: {reason}"
            )
            await self._stop_copies(live, [c for c in new if c in live.copies])
            live.spec, live.plan = old_spec, old_plan
            current = self.inference_components.get(live.name)
            if current is not None:
                self.inference_components.put(
                    dataclasses.replace(
                        current,
                        spec=old_spec,
                        status=ComponentStatus.IN_SERVICE,
                        failure_reason=reason,
                        last_modified_time=self._clock(),
                    )
                )
                self._persist_components()
            live.wake.set()  # the old specification's copies are brought back to the count
            return
        self._record_image(live)
        self.deployer.platform_log(live.endpoint_name, f"{live.name}: update complete")

    async def _bake(self, record: InferenceComponent, wait_s: float) -> None:
        """WaitIntervalInSeconds (scaled by --time-scale as every other wait): an alarm of the
        deployment's AutoRollbackConfiguration in ALARM meanwhile fails the update."""
        deployment = record.last_deployment_config
        alarms = () if deployment is None else deployment.alarms
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.real_seconds(wait_s)
        while True:
            if alarms and self.alarm_states is not None:
                firing = list(self.alarm_states(alarms))
                if firing:
                    raise DeploymentFailed(f"alarm(s) in ALARM during the update: {', '.join(firing)}")
            left = deadline - loop.time()
            if left <= 0:
                return
            await asyncio.sleep(min(left, 0.2))  # alarms have no event of their own: bounded polling
