"""List* semantics shared by ListModels, ListEndpointConfigs and ListEndpoints: filter, sort, page."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from emulator.errors import ValidationFailed


class Listable(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def creation_time(self) -> datetime: ...


T = TypeVar("T", bound=Listable)


@dataclass(frozen=True)
class ListQuery:
    name_contains: str | None = None
    creation_time_before: datetime | None = None
    creation_time_after: datetime | None = None
    last_modified_time_before: datetime | None = None
    last_modified_time_after: datetime | None = None
    status_equals: str | None = None
    sort_by: str = "CreationTime"  # "Name" | "CreationTime" | "Status"
    sort_order: str = "Descending"  # "Ascending" | "Descending"
    max_results: int = 10
    next_token: str | None = None


def _encode(offset: int) -> str:
    return base64.urlsafe_b64encode(f"smlocal:{offset}".encode()).decode()


def _decode(token: str) -> int:
    try:
        prefix, _, number = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        if prefix != "smlocal":
            raise ValueError(token)
        offset = int(number)
        if offset < 0:
            raise ValueError(token)
        return offset
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise ValidationFailed(f"Invalid pagination token {token}.") from exc  # [U] text


def list_page(
    items: Sequence[T],
    query: ListQuery,
    last_modified: Callable[[T], datetime] | None = None,
    status: Callable[[T], str] | None = None,
) -> tuple[list[T], str | None]:
    selected = [
        item
        for item in items
        if (query.name_contains is None or query.name_contains.lower() in item.name.lower())
        and (query.creation_time_before is None or item.creation_time < query.creation_time_before)
        and (query.creation_time_after is None or item.creation_time > query.creation_time_after)
        and (
            last_modified is None
            or (
                (
                    query.last_modified_time_before is None
                    or last_modified(item) < query.last_modified_time_before
                )
                and (
                    query.last_modified_time_after is None
                    or last_modified(item) > query.last_modified_time_after
                )
            )
        )
        and (status is None or query.status_equals is None or status(item) == query.status_equals)
    ]
    keys: dict[str, Callable[[T], object]] = {
        "Name": lambda item: item.name,
        "CreationTime": lambda item: item.creation_time,
    }
    if status is not None:
        keys["Status"] = status
    key = keys.get(query.sort_by, keys["CreationTime"])
    selected.sort(key=key, reverse=query.sort_order == "Descending")  # type: ignore[arg-type]
    start = _decode(query.next_token) if query.next_token else 0
    end = start + max(1, query.max_results)
    return selected[start:end], (_encode(end) if end < len(selected) else None)
