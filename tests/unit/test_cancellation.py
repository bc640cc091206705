"""Cancellation: the event a multi-model instance's stop sets, whose callbacks cut a stalled read."""

from __future__ import annotations

from emulator.model_data.sources import Cancellation


def test_callbacks_run_once_when_set_and_can_be_forgotten() -> None:
    cancel = Cancellation()
    called: list[str] = []
    cancel.on_set(lambda: called.append("a"))
    forget = cancel.on_set(lambda: called.append("b"))
    forget()
    assert called == [] and not cancel.is_set()
    cancel.set()
    cancel.set()
    assert called == ["a"] and cancel.is_set()
    cancel.on_set(lambda: called.append("late"))  # already set: at once
    assert called == ["a", "late"]
