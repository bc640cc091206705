"""Registries of resources by name: unique case-insensitively (as SageMaker's Create* checks),
found case-insensitively by the control plane and exactly by the runtime."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class Registry(Generic[T]):
    def __init__(self) -> None:
        self._items: dict[str, T] = {}

    def __contains__(self, name: str) -> bool:
        return name.lower() in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(sorted(self._items.values(), key=lambda item: item.name))

    def __len__(self) -> int:
        return len(self._items)

    def get(self, name: str) -> T | None:
        """Case-insensitive lookup (control plane)."""
        return self._items.get(name.lower())

    def get_exact(self, name: str) -> T | None:
        """Case-sensitive lookup (runtime: names are case-sensitive on invoke)."""
        item = self._items.get(name.lower())
        return item if item is not None and item.name == name else None

    def put(self, item: T) -> None:
        self._items[item.name.lower()] = item

    def remove(self, name: str) -> T | None:
        return self._items.pop(name.lower(), None)
