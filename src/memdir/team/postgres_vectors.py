"""Vectors in the PostgreSQL store: where they live, who writes them, and how a search scores
them (DESIGN §4).

The same meaning search as the SQLite index (:mod:`memdir.retrieval.semantic`: the same model,
vector text, similarity floor and pools). With pgvector the vectors are in the ``embeddings`` table
and the nearest are found by its cosine distance (:class:`PgvectorMeaning`); without it they
are float32 bytes in ``plain_vectors``, ranked in this process with numpy
(:mod:`memdir.team.postgres_plain_vectors`). :mod:`memdir.team.postgres_search` fuses them with the
words.

Invariants:
- Vectors are on when the store was not opened with ``semantic=False`` nor under
  ``MEMDIR_SEMANTIC=0`` and the ``embed`` extra is installed
  (:func:`memdir.retrieval.vectors.semantic_wanted`), pgvector or not. Otherwise nothing here reads
  or writes a vector and search is the tsvector alone.
- No write and no search embeds a memory: writes wake the process's background worker
  (:mod:`memdir.team.postgres_worker`), which embeds what lacks a vector in batches; a search
  that sees memories without one wakes it too. The query's embedding is the only model call
  on the search path, and until the model is loaded (in the worker, when the first store
  opens) searches rank by words alone.
- A vector counts only for the text it was computed from: the tables' stale triggers delete
  it when the memory's name, description or body change, and a search compares only vectors
  whose ``norm_hash`` is the memory's.
- With pgvector, the cosine ranking has the search's filters (types, scopes, tags, status) in
  its SQL; of the nearest :data:`~memdir.retrieval.semantic.SEMANTIC_POOL` × 2 (``hnsw.ef_search``
  is raised to that many on each connection: the index yields no more), those below
  :data:`~memdir.retrieval.semantic.SIMILARITY_FLOOR` are dropped, as in the SQLite index.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from psycopg import sql

from memdir.core.model import Memory
from memdir.retrieval.semantic import SEMANTIC_POOL, SIMILARITY_FLOOR
from memdir.retrieval.vectors import semantic_wanted
from memdir.team.postgres_conn import COLUMNS, Conn, memory_from_row
from memdir.team.postgres_worker import (
    VectorTable,
    fill_batch,
    load_model,
    loaded_model,
    release_worker,
    worker_for,
)

if TYPE_CHECKING:
    from memdir.retrieval.embed import Embedder
    from memdir.team.postgres_conn import Connections
    from memdir.team.postgres_schema import Pgvector
    from memdir.team.postgres_worker import Worker

__all__ = ["Embeddings", "Meaning", "PgvectorMeaning"]


def _literal(vector: Any) -> str:
    """A vector as pgvector's text input (float32 values round-trip exactly)."""
    return "[" + ",".join(map(str, vector.tolist())) + "]"


def _blob(vector: Any) -> bytes:
    from memdir.retrieval.embed import to_blob

    return to_blob(vector)


class Meaning(Protocol):
    """One search's cosine scores: the nearest memories passing the filters, and the cosine
    of given memories (those with a current vector)."""

    missing: bool  # some memories have no vector: the worker is woken

    def nearest(self, where: str, params: Sequence[Any]) -> list[tuple[Memory, float]]: ...

    def cosines(self, ids: Sequence[str]) -> dict[str, float]: ...


class Embeddings:
    """The vectors of one :class:`~memdir.team.postgres.PostgresStore` (see the module docstring).
    ``embedder``: a model to use instead of the process's (tests count its calls)."""

    def __init__(self, connections: Connections, pgvector: Pgvector | None,
                 semantic: bool | None, embedder: Embedder | None = None) -> None:
        self.connections, self.pgvector = connections, pgvector
        self._given = embedder
        self._on = semantic is not False if embedder is not None else semantic_wanted(semantic)
        self._tuned: weakref.WeakSet[Conn] = weakref.WeakSet()  # hnsw.ef_search set there
        if pgvector is None:
            self.table = VectorTable("plain_vectors", sql.SQL("%s"), _blob, renumber=True)
        else:
            self.table = VectorTable("embeddings", sql.SQL("%s::{}.vector").format(
                sql.Identifier(pgvector.schema)), _literal, renumber=False)
        self._worker: Worker | None = None
        if self._on:
            self._worker = worker_for(connections.dsn, connections.schema, self.table,
                                      embedder)

    @property
    def on(self) -> bool:
        """Whether this store has vectors and searches by meaning as well as words."""
        if self._on and self._given is None:
            done, model = loaded_model()
            if done and model is None:  # a broken install: warned once, words only
                self._on = False
                self.close()
        return self._on

    @property
    def model(self) -> Embedder | None:
        """The model if it is loaded (never waits for it); None while vectors are off."""
        if not self.on:
            return None
        return self._given or loaded_model()[1]

    @property
    def worker(self) -> Worker | None:
        return self._worker

    def wrote(self) -> None:
        """After a committed write: the worker looks for memories to embed."""
        if self._worker is not None:
            self._worker.wake()

    def embed_memories(self) -> int:
        """Embed every memory that lacks a vector now, the caller waiting (loads the model
        if needed); how many were embedded. 0 when vectors are off."""
        embedder = (self._given or load_model()) if self._on else None
        if embedder is None:
            return 0
        done = 0
        while True:
            with self.connections.db() as conn:
                count = fill_batch(conn, self.table, embedder)
            if not count:
                return done
            done += count

    def meaning(self, conn: Conn, query: Any, embedder: Embedder) -> Meaning:
        """The cosine scores of one search (``query``: its unit-length vector)."""
        found: Meaning
        if self.pgvector is None:
            from memdir.team.postgres_plain_vectors import PlainMeaning, matrix_for

            found = PlainMeaning(conn, matrix_for(self.connections.dsn,
                                                  self.connections.schema, embedder), query)
        else:
            if self.pgvector.hnsw and conn not in self._tuned:
                # The index yields ef_search rows at most (default 40): as many as are asked.
                conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(
                    sql.Literal(SEMANTIC_POOL * 2)))
                self._tuned.add(conn)
            found = PgvectorMeaning(conn, self.pgvector, embedder, query)
        if found.missing and self._worker is not None:
            self._worker.wake(search=True)
        return found

    def close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            release_worker(worker)


class PgvectorMeaning:
    """One search's cosine scores from pgvector (see the module docstring)."""

    def __init__(self, conn: Conn, pgvector: Pgvector, embedder: Embedder, query: Any) -> None:
        self._conn, self._pgvector, self._embedder = conn, pgvector, embedder
        self._target = _literal(query)
        row = conn.execute("SELECT (SELECT count(*) FROM memories) > (SELECT count(*) FROM "
                           "embeddings WHERE model = %s) AS missing", (embedder.name,)).fetchone()
        self.missing = bool(row and row["missing"])

    def _sql(self, text: str, **names: Any) -> sql.Composed:
        return sql.SQL(text).format(pgvector=sql.Identifier(self._pgvector.schema),
                                    dim=sql.Literal(self._embedder.dim), **names)

    def nearest(self, where: str, params: Sequence[Any]) -> list[tuple[Memory, float]]:
        """The memories nearest to the query that pass the filters, with their cosine
        similarity, best first: of the nearest SEMANTIC_POOL × 2, those at or above the
        similarity floor, SEMANTIC_POOL at most."""
        # The expression of the HNSW index (postgres_schema), so the planner can use it.
        distance = self._sql("(e.vector::{pgvector}.vector({dim})) OPERATOR({pgvector}.<=>) "
                             "%s::{pgvector}.vector({dim})")
        query_sql = self._sql(
            "WITH near AS (SELECT e.id, {distance} AS distance FROM embeddings e "
            "JOIN memories m ON m.id = e.id WHERE {pgvector}.vector_dims(e.vector) = {dim} "
            "AND e.model = %s AND e.norm_hash = m.norm_hash AND {where} "
            "ORDER BY distance LIMIT %s) "
            "SELECT {columns}, near.distance FROM memories JOIN near USING (id) "
            "WHERE near.distance <= %s ORDER BY near.distance, id LIMIT %s",
            distance=distance, where=sql.SQL(where), columns=sql.SQL(COLUMNS))
        rows = self._conn.execute(query_sql, [
            self._target, self._embedder.name, *params, SEMANTIC_POOL * 2,
            1.0 - SIMILARITY_FLOOR, SEMANTIC_POOL]).fetchall()
        return [(memory_from_row(r), 1.0 - float(r["distance"])) for r in rows]

    def cosines(self, ids: Sequence[str]) -> dict[str, float]:
        """The cosine of each memory that has a current vector."""
        if not ids:
            return {}
        rows = self._conn.execute(self._sql(
            "SELECT e.id, e.vector OPERATOR({pgvector}.<=>) %s::{pgvector}.vector AS distance "
            "FROM embeddings e JOIN memories m ON m.id = e.id WHERE e.id = ANY(%s::text[]) "
            "AND e.model = %s AND e.norm_hash = m.norm_hash AND "
            "{pgvector}.vector_dims(e.vector) = {dim}"),
            (self._target, list(ids), self._embedder.name)).fetchall()
        return {r["id"]: 1.0 - float(r["distance"]) for r in rows}
