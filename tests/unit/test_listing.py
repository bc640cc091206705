"""emulator.model.listing.list_page: filters, sort orders and pagination tokens."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from emulator.errors import ValidationFailed
from emulator.model.listing import ListQuery, list_page

T0 = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Item:
    name: str
    creation_time: datetime
    status: str = "InService"
    modified: datetime = T0


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


ITEMS = [
    Item("Bravo-model", at(2), "Creating", at(20)),
    Item("alpha", at(1), "InService", at(10)),
    Item("charlie-MODEL", at(3), "Failed", at(30)),
    Item("delta", at(4), "InService", at(40)),
]


def names(items: list[Item]) -> list[str]:
    return [i.name for i in items]


def page(query: ListQuery, **kw: object) -> list[str]:
    items, token = list_page(ITEMS, query, **kw)  # type: ignore[arg-type]
    assert token is None
    return names(items)


def test_default_is_creation_time_descending() -> None:
    assert page(ListQuery()) == ["delta", "charlie-MODEL", "Bravo-model", "alpha"]


@pytest.mark.parametrize("needle", ["model", "MODEL", "Model", "-mOd"])
def test_name_contains_is_case_insensitive(needle: str) -> None:
    assert sorted(page(ListQuery(name_contains=needle))) == ["Bravo-model", "charlie-MODEL"]


def test_name_contains_no_match() -> None:
    assert page(ListQuery(name_contains="zulu")) == []


def test_creation_time_before_and_after_are_exclusive() -> None:
    assert page(ListQuery(creation_time_before=at(3), sort_order="Ascending")) == ["alpha", "Bravo-model"]
    assert page(ListQuery(creation_time_after=at(3), sort_order="Ascending")) == ["delta"]
    assert page(ListQuery(creation_time_after=at(1), creation_time_before=at(4), sort_order="Ascending")) == [
        "Bravo-model",
        "charlie-MODEL",
    ]


def test_last_modified_filters_use_the_given_accessor() -> None:
    query = ListQuery(
        last_modified_time_after=at(15), last_modified_time_before=at(35), sort_order="Ascending"
    )
    assert page(query, last_modified=lambda i: i.modified) == ["Bravo-model", "charlie-MODEL"]
    # without an accessor the last-modified filters do not apply
    assert len(page(query)) == 4


def test_status_filter() -> None:
    query = ListQuery(status_equals="InService", sort_order="Ascending")
    assert page(query, status=lambda i: i.status) == ["alpha", "delta"]
    # without a status accessor (models, configs) the filter is ignored
    assert len(page(query)) == 4


def test_sort_by_name_ascending_and_descending() -> None:
    asc = page(ListQuery(sort_by="Name", sort_order="Ascending"))
    desc = page(ListQuery(sort_by="Name", sort_order="Descending"))
    # plain code-point order, as Python sorts strings
    assert asc == sorted(i.name for i in ITEMS)
    assert desc == list(reversed(asc))


def test_sort_by_creation_time_ascending() -> None:
    assert page(ListQuery(sort_by="CreationTime", sort_order="Ascending")) == [
        "alpha",
        "Bravo-model",
        "charlie-MODEL",
        "delta",
    ]


def test_sort_by_status_when_available() -> None:
    got = page(ListQuery(sort_by="Status", sort_order="Ascending"), status=lambda i: i.status)
    assert got[:2] == ["Bravo-model", "charlie-MODEL"]  # Creating < Failed < InService
    assert sorted(got[2:]) == ["alpha", "delta"]


def test_unknown_sort_key_falls_back_to_creation_time() -> None:
    assert page(ListQuery(sort_by="Status", sort_order="Ascending")) == [
        "alpha",
        "Bravo-model",
        "charlie-MODEL",
        "delta",
    ]


@pytest.mark.parametrize("max_results", [1, 2, 3, 7, 10])
def test_pagination_walks_every_item_exactly_once(max_results: int) -> None:
    items = [Item(f"item-{n:03d}", at(n)) for n in range(23)]
    seen: list[str] = []
    token: str | None = None
    pages = 0
    while True:
        query = ListQuery(sort_by="Name", sort_order="Ascending", max_results=max_results, next_token=token)
        got, token = list_page(items, query)
        assert 0 < len(got) <= max_results
        seen.extend(names(got))
        pages += 1
        if token is None:
            break
        assert pages < 100
    assert seen == [i.name for i in items]
    assert pages == -(-23 // max_results)


def test_exact_multiple_has_no_trailing_token() -> None:
    items = [Item(f"i{n}", at(n)) for n in range(4)]
    first, token = list_page(items, ListQuery(max_results=2))
    assert token is not None
    second, token = list_page(items, ListQuery(max_results=2, next_token=token))
    assert token is None
    assert len(first) == len(second) == 2


def test_pagination_applies_after_filtering() -> None:
    got, token = list_page(
        ITEMS, ListQuery(name_contains="model", max_results=1, sort_by="Name", sort_order="Ascending")
    )
    assert names(got) == ["Bravo-model"] and token is not None
    got, token = list_page(
        ITEMS,
        ListQuery(
            name_contains="model", max_results=1, sort_by="Name", sort_order="Ascending", next_token=token
        ),
    )
    assert names(got) == ["charlie-MODEL"] and token is None


def test_empty_listing() -> None:
    assert list_page([], ListQuery()) == ([], None)


@pytest.mark.parametrize(
    "token",
    [
        "not-base64!!",
        "x",
        base64.urlsafe_b64encode(b"other:3").decode(),
        base64.urlsafe_b64encode(b"smlocal:abc").decode(),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_invalid_token_raises_validation_failed(token: str) -> None:
    with pytest.raises(ValidationFailed) as info:
        list_page(ITEMS, ListQuery(next_token=token))
    assert token in info.value.message


def test_negative_offset_token_is_rejected() -> None:
    token = base64.urlsafe_b64encode(b"smlocal:-2").decode()
    with pytest.raises(ValidationFailed):
        list_page(ITEMS, ListQuery(next_token=token))
