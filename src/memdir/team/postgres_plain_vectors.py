"""Meaning search in the PostgreSQL store without pgvector: vectors as float32 bytes in the
``plain_vectors`` table (:mod:`memdir.team.postgres_schema`), ranked in the server process with
numpy.

The vectors of a schema are held as one matrix per process (:class:`Matrix`), shared by
every store of that schema (the team server opens one per thread). Each search first asks for
the highest ``seq`` (an index lookup) and, when it grew, reads only the rows above the highest
seen (every write of a vector draws a new ``seq``). At most every :data:`CHECK_INTERVAL` a
search also compares the count and the sum of the ``seq`` values with the matrix's (a scan:
~5 ms at 10k) and, when they differ (a vector deleted by its stale trigger or with its
memory, or a write that committed after a higher ``seq`` was read), reads the (id, seq) pairs
alone and drops or fetches what differs; the same check tells whether memories lack a vector.
So a search at 10k memories reads 15 MB once per process, not per search; a brute-force
cosine over the matrix costs ~1 ms.

Invariants:
- A vector counts only for the text it was computed from: the nearest are loaded with an SQL
  check that the row with that ``seq`` still exists with the memory's ``norm_hash``, and a
  BM25 match's cosine is taken only where the same holds. A matrix a step behind the table
  can miss a vector, never return a stale one.
- The nearest pass the search's filters in SQL: the rows at or above
  :data:`memdir.retrieval.semantic.SIMILARITY_FLOOR` are looked at best first, in growing chunks,
  until
  :data:`memdir.retrieval.semantic.SEMANTIC_POOL` pass or none are left.
- Vectors of another model, or of another size, are never compared with the query.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memdir.core.model import Memory
from memdir.retrieval.semantic import SEMANTIC_POOL, SIMILARITY_FLOOR
from memdir.team.postgres_conn import COLUMNS, Conn, memory_from_row

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from memdir.retrieval.embed import Embedder

__all__ = ["Matrix", "PlainMeaning", "matrix_for"]

CHECK_INTERVAL = 2.0  # seconds between a search's full checks of the matrix

_TOP = "SELECT COALESCE(max(seq), 0) AS top FROM plain_vectors WHERE model = %s"
_STATE = ("SELECT count(*) AS n, COALESCE(sum(seq), 0)::text AS total, "
          "(SELECT count(*) FROM memories) AS memories FROM plain_vectors WHERE model = %s")
_NEAR = (f"SELECT {COLUMNS}, near.score FROM memories "
         "JOIN unnest(%s::text[], %s::bigint[], %s::float8[]) AS near(id, seq, score) "
         "USING (id) WHERE EXISTS (SELECT 1 FROM plain_vectors v WHERE v.id = memories.id "
         "AND v.seq = near.seq AND v.norm_hash = memories.norm_hash) AND {where} "
         "ORDER BY near.score DESC, id")
_CURRENT = ("SELECT v.id, v.seq FROM plain_vectors v JOIN memories m ON m.id = v.id "
            "WHERE v.id = ANY(%s::text[]) AND v.model = %s AND v.norm_hash = m.norm_hash")


class Matrix:
    """The vectors of one schema and model in this process, kept in step with the table.
    Every method runs under :attr:`lock`."""

    def __init__(self, model: str, dim: int) -> None:
        import numpy as np

        self.model, self.dim = model, dim
        self.lock = threading.Lock()
        self.ids: list[str] = []
        self.row: dict[str, int] = {}
        self.vectors = np.zeros((0, dim), dtype=np.float32)  # capacity rows; size used
        self.seqs = np.zeros(0, dtype=np.int64)  # 0: the slot holds no current vector
        self.size = 0
        self.top = 0  # the highest seq read
        self.count = 0  # slots with a vector
        self.total = 0  # sum of their seqs
        self.checked = float("-inf")  # time.monotonic() of the last full check

    def _put(self, key: str, seq: int, blob: bytes) -> None:
        import numpy as np

        if len(blob) != 4 * self.dim:
            self._drop(key)
            return
        slot = self.row.get(key)
        if slot is None:
            if self.size == len(self.seqs):  # doubling: appends cost O(1) amortised
                capacity = max(256, 2 * len(self.seqs))
                vectors = np.zeros((capacity, self.dim), dtype=np.float32)
                vectors[:self.size] = self.vectors[:self.size]
                seqs = np.zeros(capacity, dtype=np.int64)
                seqs[:self.size] = self.seqs[:self.size]
                self.vectors, self.seqs = vectors, seqs
            slot = self.row[key] = self.size
            self.ids.append(key)
            self.size += 1
        old = int(self.seqs[slot])
        if old:
            self.count, self.total = self.count - 1, self.total - old
        self.vectors[slot] = np.frombuffer(blob, dtype="<f4")
        self.seqs[slot] = seq
        self.count, self.total = self.count + 1, self.total + seq
        self.top = max(self.top, seq)

    def _load(self, rows: Sequence[Any]) -> None:
        """The first read of a process: every row at once, in one copy."""
        import numpy as np

        from memdir.retrieval.embed import stack_blobs

        self.ids = [r["id"] for r in rows]
        self.row = {key: n for n, key in enumerate(self.ids)}
        self.vectors = stack_blobs([bytes(r["vector"]) for r in rows], self.dim)
        self.seqs = np.array([int(r["seq"]) for r in rows], dtype=np.int64)
        self.size = self.count = len(rows)
        self.total = int(self.seqs.sum())
        self.top = max(self.top, int(self.seqs.max())) if rows else self.top

    def _drop(self, key: str) -> None:
        slot = self.row.get(key)
        if slot is not None and self.seqs[slot]:
            self.count, self.total = self.count - 1, self.total - int(self.seqs[slot])
            self.seqs[slot] = 0

    def refresh(self, conn: Conn) -> bool:
        """Bring the matrix up to date with the table (the full check at most every
        CHECK_INTERVAL); whether that check found memories without a vector."""
        top = conn.execute(_TOP, (self.model,)).fetchone()
        if top is not None and int(top["top"]) > self.top:
            rows = conn.execute("SELECT id, seq, vector FROM plain_vectors WHERE model = %s "
                                "AND seq > %s ORDER BY seq", (self.model, self.top)).fetchall()
            if self.size == 0:
                self._load([r for r in rows if len(r["vector"]) == 4 * self.dim])
            else:
                for r in rows:
                    self._put(r["id"], int(r["seq"]), bytes(r["vector"]))
        started = time.monotonic()
        if started - self.checked < CHECK_INTERVAL:
            return False
        self.checked = started
        state = conn.execute(_STATE, (self.model,)).fetchone()
        assert state is not None
        if (int(state["n"]), int(state["total"])) != (self.count, self.total):
            self._reconcile(conn)
        return int(state["memories"]) > int(state["n"])

    def _reconcile(self, conn: Conn) -> None:
        """Drop what the table no longer has, fetch what was missed (ids and seqs read)."""
        current = {r["id"]: int(r["seq"]) for r in conn.execute(
            "SELECT id, seq FROM plain_vectors WHERE model = %s", (self.model,))}
        for key in self.ids:
            if key not in current:
                self._drop(key)
        missed = [key for key, seq in current.items()
                  if (slot := self.row.get(key)) is None or int(self.seqs[slot]) != seq]
        if missed:
            for r in conn.execute("SELECT id, seq, vector FROM plain_vectors WHERE model = %s "
                                  "AND id = ANY(%s::text[])", (self.model, missed)):
                self._put(r["id"], int(r["seq"]), bytes(r["vector"]))
        if self.size > 1024 and self.count < self.size // 2:  # mostly dead slots: compact
            self._compact()

    def _compact(self) -> None:
        live = [n for n in range(self.size) if self.seqs[n]]
        self.ids = [self.ids[n] for n in live]
        self.row = {key: n for n, key in enumerate(self.ids)}
        self.vectors, self.seqs = self.vectors[live].copy(), self.seqs[live].copy()
        self.size = len(live)

    def scores(self, query: Any) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
        """The cosine of every slot to the (unit-length) query, -inf where no vector, and a
        copy of the seqs (the search goes on outside the lock)."""
        import numpy as np

        from memdir.retrieval.embed import cosine_scores

        scores = cosine_scores(query, self.vectors[:self.size])
        seqs = self.seqs[:self.size].copy()
        scores[seqs == 0] = -np.inf
        return scores, seqs


_matrices: dict[tuple[str, str, str], Matrix] = {}
_matrices_lock = threading.Lock()


def matrix_for(dsn: str, schema: str, embedder: Embedder) -> Matrix:
    """The process's matrix of a schema's vectors of ``embedder``'s model."""
    key = (dsn, schema, embedder.name)
    with _matrices_lock:
        found = _matrices.get(key)
        if found is None or found.dim != embedder.dim:
            found = _matrices[key] = Matrix(embedder.name, embedder.dim)
        return found


class PlainMeaning:
    """One search's view of the plain vectors: the query scored against every vector once."""

    def __init__(self, conn: Conn, matrix: Matrix, query: Any) -> None:
        with matrix.lock:
            self.missing = matrix.refresh(conn)
            self._scores, self._seqs = matrix.scores(query)
            # No copies: slots are only appended to (a compaction makes new objects), so
            # these stay right for the slots scored here.
            self._ids, self._row = matrix.ids, matrix.row
        self._conn, self._model = conn, matrix.model

    def nearest(self, where: str, params: Sequence[Any]) -> list[tuple[Memory, float]]:
        """The memories nearest to the query that pass the filters, with their cosine, best
        first: at or above the similarity floor, SEMANTIC_POOL at most."""
        import numpy as np

        scores = self._scores
        above = np.flatnonzero(scores >= SIMILARITY_FLOOR)
        order = above[np.lexsort((above, -scores[above]))]
        found: list[tuple[Memory, float]] = []
        start, chunk = 0, 2 * SEMANTIC_POOL
        query = _NEAR.replace("{where}", where)
        while len(found) < SEMANTIC_POOL and start < len(order):
            rows = order[start:start + chunk]
            start, chunk = start + len(rows), chunk * 4
            got = self._conn.execute(query, [
                [self._ids[n] for n in rows], [int(self._seqs[n]) for n in rows],
                [float(scores[n]) for n in rows], *params]).fetchall()
            found += [(memory_from_row(r), float(r["score"])) for r in got]
        return found[:SEMANTIC_POOL]

    def cosines(self, ids: Sequence[str]) -> dict[str, float]:
        """The cosine of each memory whose current vector the matrix holds."""
        if not ids:
            return {}
        out: dict[str, float] = {}
        for r in self._conn.execute(_CURRENT, (list(ids), self._model)):
            slot = self._row.get(r["id"])
            if slot is not None and slot < len(self._seqs) and \
                    int(self._seqs[slot]) == int(r["seq"]):
                out[r["id"]] = float(self._scores[slot])
        return out
