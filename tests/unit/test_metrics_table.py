"""`smlocal metrics` tables: every column when the terminal is wide, two readable tables at 80 columns."""

from __future__ import annotations

import io
import re
from typing import Any

from rich.console import Console

from emulator.metrics_table import COUNT_COLUMNS, LATENCY_COLUMNS, print_metrics

METRICS = {
    "Invocations": {"Sum": 12345.0},
    "InvocationsPerInstance": {"Sum": 6172.5},
    "Invocation4XXErrors": {"Sum": 0.0},
    "Invocation5XXErrors": {"Sum": 3.0},
    "InvocationModelErrors": {"Sum": 2.0},
    "ModelLatency": {"Average": 12345.67, "Maximum": 987654.0},
    "OverheadLatency": {"Average": 1234.5},
    "CPUUtilization": {"Average": 112.5},
    "MemoryUtilization": {"Average": 3.25},
}


def _report(variant: str = "AllTraffic") -> dict[str, Any]:
    periods = [
        {
            "Timestamp": f"2026-12-01T10:3{i}:00Z",
            "VariantName": variant,
            "Complete": i < 2,
            "Metrics": METRICS,
        }
        for i in range(3)
    ]
    return {"PeriodSeconds": 60.0, "Periods": periods}


def _render(report: dict[str, Any], width: int) -> str:
    out = io.StringIO()
    print_metrics(report, "my-endpoint-20261201-103200", Console(file=out, width=width, force_terminal=False))
    return out.getvalue()


def _cell_words(text: str) -> set[str]:
    return {w for line in text.splitlines() for cell in re.split("[┃│]", line) for w in cell.split()}


def test_at_80_columns_no_word_or_number_is_cut() -> None:
    text = _render(_report(), 80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    words = _cell_words(text)
    for _, _, title in (*COUNT_COLUMNS, *LATENCY_COLUMNS):
        for word in title.split():
            assert word in words, (word, text)
    for value in (
        "12,345",
        "6,172.5",
        "12,346",
        "987,654",
        "1,234",
        "112.5",
        "3.25",
        "10:30:00",
        "AllTraffic",
    ):
        assert value in words, (value, text)
    assert "10:32:00 *" in text and "* period still in progress" in text
    assert "of 2026-12-01 (UTC)" in text


def test_a_long_variant_name_folds_but_the_table_still_fits() -> None:
    text = _render(_report("a-variant-name-of-forty-characters-long-x"), 80)
    assert max(len(line) for line in text.splitlines()) <= 80
    for word in ("invocations", "instance", "overhead", "memory", "987,654"):
        assert word in _cell_words(text)


def test_a_wide_terminal_gets_one_table_with_full_headers() -> None:
    text = _render(_report(), 250)
    assert text.count("┏") == 1
    assert "overhead us avg" in text and "per instance" in text
