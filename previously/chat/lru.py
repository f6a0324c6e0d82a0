"""A least-recently-used cache bounded in bytes, not entries (issue 24 points 4 and 5): one entry
may be a few bytes or a quarter of a megabyte, so a count says nothing about memory. Safe to
use from several threads (page views, the chat's rendering threads)."""

import sys
import threading
from collections import OrderedDict
from collections.abc import Hashable


def size_of(value) -> int:
    """The bytes a cached str (or bytes) holds, as Python stores it."""
    return sys.getsizeof(value)


class ByteLRU:
    """Entries are kept until their sizes together pass `max_bytes`; then the least recently
    used go first. A value larger than the whole bound is not kept at all."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable):
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: Hashable, value, size: int | None = None) -> None:
        size = size_of(value) if size is None else size
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            if size > self.max_bytes:
                return
            self._items[key] = (value, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._items.popitem(last=False)
                self.bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._items)
