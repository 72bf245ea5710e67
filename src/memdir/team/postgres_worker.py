"""Filling the PostgreSQL store's vectors in the background: no search or write embeds a memory.

A :class:`Worker` is a daemon thread of the store's process, one per (database, schema,
embedder), shared by every store of that schema the process opens (the team server opens one
per thread) and stopped, after its current batch, when the last of them closes. It loads the
model first (:func:`load_model`: once per process; until then searches rank by words alone),
then embeds the memories that lack a vector of that model in batches of
:data:`memdir.retrieval.semantic.BATCH`, newest first, and sleeps until it is woken: at once by a
write of this process, and by a search that saw memories without a vector (written elsewhere, or
by a store with vectors off) at most once per :data:`LOOK_INTERVAL` after a look found none.

Invariants:
- A batch is embedded with no transaction open; each vector is then written by one statement
  that re-reads the memory ``FOR SHARE`` and writes only while it still has the text the
  vector was computed from (a concurrent edit wins; its vector comes in a later batch).
- The same :func:`fill_batch` serves ``embed_memories`` (everything now, the caller waiting)
  and the worker, over either table (:class:`VectorTable`: pgvector's ``embeddings`` or
  ``plain_vectors``).
- Nothing here raises into a store: a failed batch is one warning, and the worker tries
  again after :data:`RETRY_INTERVAL`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg import sql

from memdir.core.errors import DatabaseError, warn
from memdir.retrieval.semantic import BATCH, vector_text
from memdir.team.postgres_conn import Conn, Connections

if TYPE_CHECKING:
    from memdir.retrieval.embed import Embedder

__all__ = ["LOOK_INTERVAL", "VectorTable", "Worker", "fill_batch", "load_model",
           "loaded_model", "release_worker", "worker_for"]

LOOK_INTERVAL = 1.0  # seconds: a search's wake-up after a look found nothing to embed
RETRY_INTERVAL = 30.0  # seconds after a failed batch


@dataclass(frozen=True)
class VectorTable:
    """Where a schema's vectors live: the table, how a vector is written as a parameter (the
    SQL of its value and the Python conversion), and whether a write renumbers ``seq``."""

    name: str
    value: sql.Composable
    encode: Callable[[Any], Any]
    renumber: bool


# -- the model: loaded once per process, off the request path ---------------------------------

_model_lock = threading.Lock()
_model_done = threading.Event()
_model: list[Embedder | None] = []


def load_model() -> Embedder | None:
    """The process's embedding model, loading it if needed (the caller waits)."""
    from memdir.retrieval.embed import load_embedder

    with _model_lock:
        if not _model_done.is_set():
            _model.append(load_embedder())
            _model_done.set()
    return _model[0]


def loaded_model() -> tuple[bool, Embedder | None]:
    """(whether the model's loading has finished, the model or None if it failed); never
    waits."""
    return (True, _model[0]) if _model_done.is_set() else (False, None)


# -- one batch --------------------------------------------------------------------------------

def fill_batch(conn: Conn, table: VectorTable, embedder: Embedder, most: int = BATCH) -> int:
    """Embed up to ``most`` memories without a vector of this model (newest first) and write
    those still unchanged; how many were looked at (0: none is missing)."""
    name = sql.Identifier(table.name)
    rows = conn.execute(sql.SQL(
        "SELECT m.id, m.name, m.description, m.body FROM memories m WHERE NOT EXISTS "
        "(SELECT 1 FROM {table} e WHERE e.id = m.id AND e.model = %s AND "
        "e.norm_hash = m.norm_hash) ORDER BY m.updated DESC, m.id LIMIT %s").format(
            table=name), (embedder.name, most)).fetchall()
    if not rows:
        return 0
    vectors = embedder.embed([vector_text(r["name"], r["description"], r["body"])
                              for r in rows])
    renumber = sql.SQL(", seq = DEFAULT" if table.renumber else "")
    # One statement per memory, each its own transaction: it locks one row.
    conn.cursor().executemany(sql.SQL(
        "INSERT INTO {table} (id, model, norm_hash, vector) "
        "SELECT id, %s, norm_hash, {value} FROM memories WHERE id = %s AND name = %s "
        "AND description = %s AND body = %s FOR SHARE ON CONFLICT (id) DO UPDATE SET "
        "model = EXCLUDED.model, norm_hash = EXCLUDED.norm_hash, vector = EXCLUDED.vector"
        # A vector another filler (embed_memories, a second process) wrote meanwhile for this
        # very text is kept: rewriting it would renumber it and make a reader's cached copy
        # look stale for one search.
        "{renumber} WHERE {table}.model IS DISTINCT FROM EXCLUDED.model "
        "OR {table}.norm_hash IS DISTINCT FROM EXCLUDED.norm_hash").format(
            table=name, value=table.value, renumber=renumber),
        [(embedder.name, table.encode(v), r["id"], r["name"], r["description"], r["body"])
         for r, v in zip(rows, vectors, strict=True)])
    return len(rows)


# -- the worker -------------------------------------------------------------------------------

class Worker:
    """The background filler of one schema's vectors (see the module docstring)."""

    def __init__(self, dsn: str, schema: str, table: VectorTable,
                 embedder: Embedder | None) -> None:
        self.connections = Connections(dsn, schema)
        self.table, self._given = table, embedder
        self.users = 0
        self.batches = 0  # batches written, for tests and benchmarks
        self._wake = threading.Event()
        self._wake.set()  # the first look is at start: memories may be waiting already
        self._stopping = False
        self._idle_since = float("-inf")  # when the last look found nothing to embed
        self._retry_at = float("-inf")  # after a failed batch: no search wakes it before
        self._thread = threading.Thread(target=self._run, name=f"memdir-vectors-{schema}",
                                        daemon=True)
        self._thread.start()

    def wake(self, *, search: bool = False) -> None:
        """Look for memories without a vector soon; from a search, not within LOOK_INTERVAL
        of a look that found none, nor while waiting to retry a failed batch (searches come
        often; a write comes once)."""
        if search and time.monotonic() < max(self._idle_since + LOOK_INTERVAL, self._retry_at):
            return
        self._wake.set()

    def stop(self) -> None:
        """Stop after the current step, and wait for it (the process may be exiting)."""
        self._stopping = True
        self._wake.set()
        self._thread.join()
        self.connections.close()

    def _run(self) -> None:
        embedder = self._given or load_model()
        while embedder is not None and not self._stopping:
            self._wake.wait()
            self._wake.clear()
            while not self._stopping:
                started = time.monotonic()
                try:
                    with self.connections.db() as conn:
                        done = fill_batch(conn, self.table, embedder)
                except Exception as exc:  # a daemon thread must never die: words still work
                    why = exc.message if isinstance(exc, DatabaseError) else str(exc)
                    warn("memdir: vectors not filled (%s); search uses the words", why)
                    self._retry_at = time.monotonic() + RETRY_INTERVAL
                    self._wake.wait(RETRY_INTERVAL)
                    continue
                if not done:
                    self._idle_since = started
                    break
                self.batches += 1


_workers: dict[tuple[str, str, int], Worker] = {}
_workers_lock = threading.Lock()


def worker_for(dsn: str, schema: str, table: VectorTable, embedder: Embedder | None) -> Worker:
    """The process's worker of a schema (started if none), counted as used once more."""
    key = (dsn, schema, id(embedder))
    with _workers_lock:
        worker = _workers.get(key)
        if worker is None:
            worker = _workers[key] = Worker(dsn, schema, table, embedder)
        worker.users += 1
        return worker


def release_worker(worker: Worker) -> None:
    """One user less; the last one stops the worker (after its current batch)."""
    with _workers_lock:
        worker.users -= 1
        if worker.users > 0:
            return
        for key, found in list(_workers.items()):
            if found is worker:
                del _workers[key]
    worker.stop()
