"""Vectors in the PostgreSQL store: pgvector embeddings, written and searched (DESIGN §4).

The same meaning search as the SQLite index (:mod:`memdir.semantic`), with the vectors in
the ``embeddings`` table (:mod:`memdir.postgres_schema`) and the nearest found by pgvector's
cosine distance; :mod:`memdir.postgres_search` fuses them with the words.

Invariants:
- Vectors are on when the embeddings table exists (pgvector), the store was not opened with
  ``semantic=False`` nor under ``MEMDIR_SEMANTIC=0``, and the ``embed`` extra is installed
  (:func:`memdir.embed.available`). Otherwise nothing here reads or writes a vector and
  search is the tsvector alone. The model is loaded on the first write or search that needs
  it (:func:`memdir.embed.load_embedder`: once per process).
- A new or changed memory's vector is computed from :func:`memdir.semantic.vector_text` and
  written in the transaction that writes the memory (for a batch, computed before the
  transaction opens: no lock waits for the model). A vector is kept only for the text it was
  computed from: the trigger ``embeddings_stale`` deletes it when the name, description or
  body change, and a lazy fill writes one only while the memory still has that text
  (``FOR SHARE`` re-checks it after a concurrent writer commits).
- Memories without a vector (stored with vectors off, or before pgvector) are embedded by
  searches, at most :data:`memdir.semantic.BATCH` per search, one process thread at a time:
  a search never waits for the whole store. Once a store finds none left it looks again
  only after :data:`FILL_INTERVAL` (the look scans the table: ~5 ms at 10k memories), so a
  memory written with vectors off elsewhere is found by meaning at most that much later;
  what this store writes has its vector at once.
- The cosine ranking has the search's filters (types, scopes, tags, status) in its SQL;
  of the nearest :data:`~memdir.semantic.POOL` × 2 (``hnsw.ef_search`` is raised to that
  many on each connection: the index yields no more), those below
  :data:`~memdir.semantic.SIMILARITY_FLOOR` are dropped, as in the SQLite index.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from psycopg import sql

from memdir.errors import DatabaseError, warn
from memdir.model import Memory
from memdir.postgres_conn import COLUMNS, Conn, memory_from_row
from memdir.semantic import BATCH, POOL, SIMILARITY_FLOOR, vector_text
from memdir.store import norm_hash
from memdir.vectors import semantic_wanted

if TYPE_CHECKING:
    from memdir.embed import Embedder
    from memdir.postgres_conn import Connections
    from memdir.postgres_schema import Pgvector

__all__ = ["Embeddings"]


FILL_INTERVAL = 5.0  # seconds between looks for missing vectors once none were left
_filling = threading.Lock()  # one fill per process at a time: the others search on


def _literal(vector: Any) -> str:
    """A vector as pgvector's text input (float32 values round-trip exactly)."""
    return "[" + ",".join(map(str, vector.tolist())) + "]"


def _text(memory: Memory) -> str:
    return vector_text(memory.name, memory.description, memory.body)


class Embeddings:
    """The vectors of one :class:`~memdir.postgres.PostgresStore` (see the module docstring)."""

    def __init__(self, pgvector: Pgvector | None, semantic: bool | None) -> None:
        self.pgvector = pgvector
        self._semantic = semantic
        self._on: bool | None = None
        self._embedder: Embedder | None = None
        self._tuned: weakref.WeakSet[Conn] = weakref.WeakSet()  # hnsw.ef_search set there
        self._complete = float("-inf")  # time.monotonic() when a fill last found none left

    @property
    def on(self) -> bool:
        """Whether this store writes vectors and searches by meaning as well as words."""
        if self._on is None:
            self._on = self.pgvector is not None and semantic_wanted(self._semantic)
        return self._on

    @property
    def embedder(self) -> Embedder | None:
        """The model (loaded on first use), or None when vectors are off."""
        if self._embedder is None and self.on:
            from memdir.embed import load_embedder

            self._embedder = load_embedder()
            if self._embedder is None:  # a broken install: warned once, words only
                self._on = False
        return self._embedder

    def _sql(self, text: str, **names: Any) -> sql.Composed:
        assert self.pgvector is not None
        return sql.SQL(text).format(pgvector=sql.Identifier(self.pgvector.schema), **names)

    def compute(self, memories: Iterable[Memory]) -> dict[str, str]:
        """The vector of each memory's text (pgvector text input), by text; empty when off."""
        embedder = self.embedder
        if embedder is None:
            return {}
        texts = list(dict.fromkeys(_text(m) for m in memories))
        if not texts:
            return {}
        return dict(zip(texts, map(_literal, embedder.embed(texts)), strict=True))

    def save(self, conn: Conn, memories: Iterable[Memory], computed: dict[str, str]) -> None:
        """Write the vectors of the memories just written (in the caller's transaction); one
        whose text was not computed (a duplicate that kept its own text) keeps its vector."""
        embedder = self.embedder
        if embedder is None or not computed:
            return
        rows = [(m.id, embedder.name, norm_hash(m.body), computed[t])
                for m in memories if (t := _text(m)) in computed]
        if rows:
            conn.cursor().executemany(self._sql(
                "INSERT INTO embeddings (id, model, norm_hash, vector) "
                "VALUES (%s, %s, %s, %s::{pgvector}.vector) ON CONFLICT (id) DO UPDATE SET "
                "model = EXCLUDED.model, norm_hash = EXCLUDED.norm_hash, "
                "vector = EXCLUDED.vector"), rows)

    def changed(self, conn: Conn, before: Memory, after: Memory) -> None:
        """After an update in ``conn``'s transaction: the new vector if the text changed (the
        trigger has deleted the old one)."""
        if self.on and _text(before) != _text(after):
            self.save(conn, [after], self.compute([after]))

    def fill(self, connections: Connections, most: int = BATCH, *, lazy: bool = False) -> int:
        """Embed up to ``most`` memories that have no vector of this model; how many were
        written. ``lazy``: not within FILL_INTERVAL of finding none left. Never raises: a
        failed fill leaves the words to rank alone."""
        embedder = self.embedder
        started = time.monotonic()
        if embedder is None or (lazy and started - self._complete < FILL_INTERVAL):
            return 0
        if not _filling.acquire(blocking=False):
            return 0
        try:
            with connections.db() as conn:
                rows = conn.execute(
                    "SELECT m.id, m.name, m.description, m.body, m.norm_hash FROM memories m "
                    "WHERE NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.id = m.id AND "
                    "e.model = %s AND e.norm_hash = m.norm_hash) LIMIT %s",
                    (embedder.name, most)).fetchall()
                if len(rows) < most:
                    self._complete = started
                if not rows:
                    return 0
                vectors = embedder.embed([vector_text(r["name"], r["description"], r["body"])
                                          for r in rows])
                # One statement per memory, each its own transaction: it locks one row.
                cur = conn.cursor()
                cur.executemany(self._sql(
                    "INSERT INTO embeddings (id, model, norm_hash, vector) "
                    "SELECT id, %s, norm_hash, %s::{pgvector}.vector FROM memories WHERE id = %s "
                    "AND name = %s AND description = %s AND norm_hash = %s FOR SHARE "
                    "ON CONFLICT (id) DO UPDATE SET model = EXCLUDED.model, "
                    "norm_hash = EXCLUDED.norm_hash, vector = EXCLUDED.vector"),
                    [(embedder.name, _literal(v), r["id"], r["name"], r["description"],
                      r["norm_hash"]) for r, v in zip(rows, vectors, strict=True)])
            return len(rows)
        except DatabaseError as exc:
            warn("memdir: vectors not filled (%s); search uses the words", exc.message)
            return 0
        finally:
            _filling.release()

    def nearest(self, conn: Conn, query: str, where: str, params: Sequence[Any]) -> list[
            tuple[Memory, float]]:
        """The memories nearest to ``query`` that pass the filters, with their cosine
        similarity, best first: of the nearest POOL × 2, those at or above the similarity
        floor, POOL at most (the pool of :mod:`memdir.postgres_search`'s rank fusion; the
        SQLite index fuses scores over :data:`memdir.semantic.SEMANTIC_POOL`)."""
        embedder = self.embedder
        assert embedder is not None and self.pgvector is not None
        target = _literal(embedder.embed([query])[0])
        dim = sql.Literal(embedder.dim)
        # The expression of the HNSW index (postgres_schema), so the planner can use it.
        distance = self._sql("(e.vector::{pgvector}.vector({dim})) OPERATOR({pgvector}.<=>) "
                             "%s::{pgvector}.vector({dim})", dim=dim)
        query_sql = self._sql(
            "WITH near AS (SELECT e.id, {distance} AS distance FROM embeddings e "
            "JOIN memories m ON m.id = e.id WHERE {pgvector}.vector_dims(e.vector) = {dim} "
            "AND e.model = %s AND e.norm_hash = m.norm_hash AND {where} "
            "ORDER BY distance LIMIT %s) "
            "SELECT {columns}, near.distance FROM memories JOIN near USING (id) "
            "WHERE near.distance <= %s ORDER BY near.distance, id LIMIT %s",
            distance=distance, dim=dim, where=sql.SQL(where), columns=sql.SQL(COLUMNS))
        if self.pgvector.hnsw and conn not in self._tuned:
            # The index yields ef_search rows at most (default 40): as many as are asked.
            conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(POOL * 2)))
            self._tuned.add(conn)
        rows = conn.execute(query_sql, [target, embedder.name, *params, POOL * 2,
                                        1.0 - SIMILARITY_FLOOR, POOL]).fetchall()
        return [(memory_from_row(r), 1.0 - float(r["distance"])) for r in rows]
