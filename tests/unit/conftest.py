"""Fixtures shared by the unit tests."""

from __future__ import annotations

from typing import Any

import pytest

from emulator import server
from emulator.config import ServerConfig


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[ServerConfig]:
    """serve_forever replaced: the config it would have served with is recorded."""
    seen: list[ServerConfig] = []

    def fake(config: ServerConfig, **_: Any) -> None:
        seen.append(config)

    monkeypatch.setattr(server, "serve_forever", fake)
    return seen
