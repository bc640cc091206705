"""`smlocal metrics` as tables that stay readable in any terminal width.

One table with every column when the terminal is wide enough; otherwise two (request counts, then
latency and utilisation; a third for a multi-model endpoint's model metrics), periods shown as their
time of day when they all fall on one date, and the headers wrapped between words, never inside one.
Pure rendering: the CLI fetches the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

#: (metric, statistic, column title); the two groups are the two narrow tables.
COUNT_COLUMNS = (
    ("Invocations", "Sum", "invocations"),
    ("InvocationsPerInstance", "Sum", "per instance"),
    ("Invocation4XXErrors", "Sum", "4xx"),
    ("Invocation5XXErrors", "Sum", "5xx"),
    ("InvocationModelErrors", "Sum", "model errors"),
)
LATENCY_COLUMNS = (
    ("ModelLatency", "Average", "model us avg"),
    ("ModelLatency", "Maximum", "model us max"),
    ("OverheadLatency", "Average", "overhead us avg"),
    ("CPUUtilization", "Average", "CPU %"),
    ("MemoryUtilization", "Average", "memory %"),
    ("DiskUtilization", "Average", "disk %"),
)
#: Shown only when some period has them (an endpoint on GPU instances).
GPU_COLUMNS = (
    ("GPUUtilization", "Average", "GPU %"),
    ("GPUMemoryUtilization", "Average", "GPU memory %"),
)
#: Shown only when some period has them (a multi-model endpoint).
MULTI_MODEL_COLUMNS = (
    ("ModelCacheHit", "Average", "cache hit ratio"),
    ("ModelLoadingWaitTime", "Average", "load wait us avg"),
    ("ModelLoadingTime", "Average", "load us avg"),
    ("LoadedModelCount", "Sum", "loaded models"),
)
#: A multi-container endpoint's table per container (ContainerPeriods of the report).
CONTAINER_COLUMNS = (
    ("Invocations", "Sum", "invocations"),
    ("Invocation4XXErrors", "Sum", "4xx"),
    ("Invocation5XXErrors", "Sum", "5xx"),
    ("ContainerLatency", "Average", "container us avg"),
    ("OverheadLatency", "Average", "overhead us avg"),
    ("CPUUtilization", "Average", "CPU %"),
    ("MemoryUtilization", "Average", "memory %"),
)
Column = tuple[str, str, str]


def _number(value: Any, metric: str) -> str:
    """Latencies in whole microseconds; counts and percentages with up to two decimals."""
    if value is None:
        return ""
    if metric.endswith(("Latency", "Time")):
        return f"{value:,.0f}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _stamps(periods: Sequence[Mapping[str, Any]]) -> tuple[list[str], str]:
    """Each period's label (time of day when all share one date), and the date for the title."""
    stamps = [str(p["Timestamp"]) for p in periods]
    dates = {s.split("T", 1)[0] for s in stamps}
    short = len(dates) == 1
    labels = []
    for period, stamp in zip(periods, stamps, strict=True):
        day, _, clock = stamp.partition("T")
        text = clock.rstrip("Z") if short else f"{day} {clock.rstrip('Z')}"
        labels.append(text + ("" if period["Complete"] else " *"))
    return labels, (next(iter(dates)) if short else "")


def _table(
    report: Mapping[str, Any], endpoint: str, columns: Sequence[Column], what: str, stacked: bool
) -> Table:
    """`stacked`: each header word on its own line, so that a column is as wide as its longest word
    or value (rich would otherwise cut words and numbers to make the table fit)."""
    periods = report["Periods"]
    labels, date = _stamps(periods)
    title = f"{endpoint}: {what}{report['PeriodSeconds']:g} s periods" + (f" of {date} (UTC)" if date else "")
    table = Table(title=title)
    headers = ["period (UTC)", "variant", *(name for _, _, name in columns)]
    for i, header in enumerate(headers):
        table.add_column(
            "\n".join(header.split()) if stacked else header,
            justify="left" if i < 2 else "right",
            overflow="fold" if i == 1 else "ellipsis",  # a long variant name folds onto more lines
            no_wrap=i != 1,
        )
    for period, label in zip(periods, labels, strict=True):
        metrics = period["Metrics"]
        cells = [_number(metrics.get(metric, {}).get(stat), metric) for metric, stat, _ in columns]
        table.add_row(label, str(period["VariantName"]), *cells)
    return table


def container_table(report: Mapping[str, Any], endpoint: str) -> Table | None:
    """The per-container table of a multi-container endpoint (None for any other)."""
    periods = report.get("ContainerPeriods") or []
    if not periods:
        return None
    labels, date = _stamps(periods)
    title = f"{endpoint}: per container, {report['PeriodSeconds']:g} s periods" + (
        f" of {date} (UTC)" if date else ""
    )
    table = Table(title=title)
    for i, header in enumerate(
        ["period (UTC)", "variant", "container", *(n for _, _, n in CONTAINER_COLUMNS)]
    ):
        table.add_column(
            "\n".join(header.split()),
            justify="left" if i < 3 else "right",
            overflow="fold" if i in (1, 2) else "ellipsis",
            no_wrap=i not in (1, 2),
        )
    for period, label in zip(periods, labels, strict=True):
        metrics = period["Metrics"]
        cells = [_number(metrics.get(metric, {}).get(stat), metric) for metric, stat, _ in CONTAINER_COLUMNS]
        table.add_row(label, str(period["VariantName"]), str(period["ContainerName"]), *cells)
    return table


def metric_tables(report: Mapping[str, Any], endpoint: str, width: int) -> list[Table]:
    """One table of every column if it fits in `width`, else a counts table and a latency table."""
    latency: tuple[Column, ...] = LATENCY_COLUMNS
    if any(name in p["Metrics"] for p in report["Periods"] for name, _, _ in GPU_COLUMNS):
        latency = (*LATENCY_COLUMNS, *GPU_COLUMNS)
    models: tuple[Column, ...] = ()
    if any(name in p["Metrics"] for p in report["Periods"] for name, _, _ in MULTI_MODEL_COLUMNS):
        models = MULTI_MODEL_COLUMNS
    whole = _table(report, endpoint, (*COUNT_COLUMNS, *latency, *models), "", stacked=False)
    measuring = Console(width=10_000)
    if measuring.measure(whole).maximum <= width:
        return [whole]
    tables = [
        _table(report, endpoint, COUNT_COLUMNS, "requests in ", stacked=True),
        _table(report, endpoint, latency, "latency and use in ", stacked=True),
    ]
    if models:
        tables.append(_table(report, endpoint, models, "models in ", stacked=True))
    return tables


def print_metrics(report: Mapping[str, Any], endpoint: str, console: Console | None = None) -> None:
    console = console or Console()
    for table in metric_tables(report, endpoint, console.width):
        console.print(table)
    per_container = container_table(report, endpoint)
    if per_container is not None:
        console.print(per_container)
    if any(not p["Complete"] for p in (*report["Periods"], *report.get("ContainerPeriods", ()))):
        console.print("* period still in progress")
    for line in cold_start_lines(report):
        console.print(line, highlight=False, markup=False)  # wrapped to the width, as the tables are


def cold_start_lines(report: Mapping[str, Any]) -> list[str]:
    """One line per instance start the server measured (smlocal's `ColdStarts` member of the report):
    the wall time and what dominated; `smlocal profile` has the phases."""
    return [
        f"cold start {p['VariantName']}/{p['InstanceId']}: ready after {p['WallSeconds']:.2f} s; "
        f"{p['Summary']}"
        for p in report.get("ColdStarts", ())
    ]
