"""What hosting needs of the model data store (store.ArtifactStore implements it; tests may fake it)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from emulator.model.resources import ModelDataSource
from emulator.model_data.timings import MaterializeTimings

T = TypeVar("T")


class ModelDataStore(Protocol):
    def check_exists(self, source: ModelDataSource) -> None: ...

    def materialize(
        self,
        source: ModelDataSource,
        timeout_s: float | None = None,
        shown_timeout_s: float | None = None,
        cancel: threading.Event | None = None,
        timings: MaterializeTimings | None = None,
    ) -> Path: ...

    def materialize_into(
        self, source: ModelDataSource, use: Callable[[Path], T], cancel: threading.Event | None = None
    ) -> T: ...
