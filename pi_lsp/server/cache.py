"""A small least-recently-used cache, bounded by count and by an optional total weight."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """At most `max_items` values whose weights sum to at most `max_weight`; the least recently
    used go first, and a value heavier than the whole budget is not kept at all."""

    def __init__(self, max_items: int, max_weight: int | None = None,
                 weigh: Callable[[V], int] = lambda _value: 0) -> None:
        self.max_items, self.max_weight, self.weigh = max_items, max_weight, weigh
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.weight = 0

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[K]:
        """The keys, least recently used first."""
        return iter(list(self._items))

    def get(self, key: K) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: K, value: V) -> None:
        self.pop(key)
        weight = self.weigh(value)
        if self.max_weight is not None and weight > self.max_weight:
            return
        self._items[key] = (value, weight)
        self.weight += weight
        while len(self._items) > self.max_items or (
                self.max_weight is not None and self.weight > self.max_weight):
            _key, (_value, dropped) = self._items.popitem(last=False)
            self.weight -= dropped

    def pop(self, key: K) -> V | None:
        item = self._items.pop(key, None)
        if item is None:
            return None
        self.weight -= item[1]
        return item[0]

    def drop_where(self, matches: Callable[[K], bool]) -> None:
        for key in [k for k in self._items if matches(k)]:
            self.pop(key)
