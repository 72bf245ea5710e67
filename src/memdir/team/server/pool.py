"""One store per worker thread: how the sync route handlers of the API reach a MemoryStore.

FastAPI runs sync handlers in a thread pool. A :class:`~memdir.Memdir` holds one SQLite
connection, which must never be used by two threads at once, so each worker thread gets its
own store from the factory on first use (:class:`threading.local`) and keeps it for the life
of the server. Stores of different threads may work at the same time: they share only the
files and the index, which are safe for concurrent processes already (WAL, ``BEGIN
IMMEDIATE``, atomic file writes). The number of worker threads (and so of stores) is capped
by the server (``threads``).

Invariant: every store the pool created is closed once, by :meth:`StorePool.close`, when the
server stops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from memdir.core.memory_store import MemoryStore

__all__ = ["StoreFactory", "StorePool"]

StoreFactory = Callable[[], MemoryStore]


class StorePool:
    def __init__(self, factory: StoreFactory) -> None:
        self._factory = factory
        self._local = threading.local()
        self._lock = threading.Lock()
        self._stores: list[MemoryStore] = []
        self._closed = False

    def get(self) -> MemoryStore:
        """This thread's store (created on the thread's first request)."""
        store: MemoryStore | None = getattr(self._local, "store", None)
        if store is None:
            store = self._factory()
            with self._lock:
                if self._closed:  # a request racing the shutdown: do not leak it
                    store.close()
                    raise RuntimeError("the server is stopping")
                self._stores.append(store)
            self._local.store = store
        return store

    def close(self) -> None:
        with self._lock:
            self._closed = True
            stores, self._stores = self._stores, []
        for store in stores:
            store.close()
