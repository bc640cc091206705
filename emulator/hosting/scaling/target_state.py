"""What the autoscaler keeps per scalable target: its clocks, the scaling activity under way, and its
scaling activities (DescribeScalingActivities; kept in memory, the newest 100 persisted).

Clocks are monotonic wall seconds, not shown to clients; activity timestamps are wall-clock times.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from emulator.model import scaling as sc

ACTIVITIES_KEPT = 1000  # per target, in memory (the newest 100 are persisted)


@dataclass
class TargetState:
    """Clocks of one target (monotonic wall seconds), not shown to clients."""

    scale_out_at: float | None = None  # when the last scale-out activity ended
    scale_out_cooldown_s: float = 0.0
    scale_out_from: int = 0  # the capacity before the last scale-out
    scale_in_at: float | None = None
    scale_in_cooldown_s: float = 0.0
    action: asyncio.Task[None] | None = None
    last_not_scaled: str | None = None  # the reason code of the newest not-scaled activity
    range_changed: bool = False  # registered (again): the capacity is to be brought into range
    activities: list[sc.ScalingActivity] = field(default_factory=list)  # oldest first


class TargetStates:
    """Every target's state; a change to its activities calls `on_change` (which persists)."""

    def __init__(self, wall: Callable[[], datetime], on_change: Callable[[], None]) -> None:
        self._wall = wall
        self._on_change = on_change
        self._state: dict[sc.TargetKey, TargetState] = {}

    def of(self, key: sc.TargetKey) -> TargetState:
        state = self._state.get(key)
        if state is None:
            state = self._state[key] = TargetState()
        return state

    def load(self, activities: Iterable[sc.ScalingActivity]) -> None:
        for activity in activities:
            self.of(activity.key).activities.append(activity)

    def actions(self) -> list[asyncio.Task[None]]:
        """The scaling activities' tasks (running or done), for shutdown."""
        return [s.action for s in self._state.values() if s.action is not None]

    def persisted(self) -> list[sc.ScalingActivity]:
        """The newest 100 activities of each target, as autoscaling.json keeps them."""
        return [a for s in self._state.values() for a in s.activities[-100:]]

    # ------------------------------------------------------------------ scaling activities

    def describe(
        self, namespace: str, resource_id: str | None, dimension: str | None, include_not_scaled: bool
    ) -> list[sc.ScalingActivity]:
        """Newest first, as Application Auto Scaling lists them."""
        found = [
            a
            for key, state in self._state.items()
            if key.namespace == namespace
            and (resource_id is None or key.resource_id == resource_id)
            and (dimension is None or key.dimension == dimension)
            for a in state.activities
            if include_not_scaled or not a.not_scaled_reasons
        ]
        return sorted(found, key=lambda a: a.start_time, reverse=True)

    def record_not_scaled(
        self, key: sc.TargetKey, wanted: int, cause: str, reason: sc.NotScaledReason
    ) -> None:
        now = self._wall()
        self.append(
            sc.ScalingActivity(
                activity_id=str(uuid.uuid4()),
                key=key,
                description=f"Setting desired {sc.capacity_noun(key.dimension)} to {wanted}.",
                cause=cause,
                start_time=now,
                end_time=now,
                status=sc.ActivityStatus.FAILED,
                status_message=f"Failed to set desired {sc.capacity_noun(key.dimension)} to {wanted}",
                not_scaled_reasons=(reason,),
            )
        )

    def append(self, activity: sc.ScalingActivity) -> None:
        activities = self.of(activity.key).activities
        activities.append(activity)
        del activities[:-ACTIVITIES_KEPT]
        self._on_change()

    def replace(self, activity: sc.ScalingActivity) -> None:
        activities = self.of(activity.key).activities
        for i, a in enumerate(activities):
            if a.activity_id == activity.activity_id:
                activities[i] = activity
        self._on_change()
