"""Memory vectors in the SQLite index: filling them, counting the missing ones, and the
per-process vector matrix that hybrid search scans (DESIGN §4).

A memory's vector encodes its name, description and body (:func:`vector_text`); it is stored
per file in the ``embeddings`` table with the ``norm_hash`` of the body it was computed from
and a write sequence number ``seq`` (higher for every row written later, and never given
twice, not even after a deletion), so an edited memory is embedded again and an unchanged one
never is. Vectors are filled by
:func:`fill_vectors`: in the background (:mod:`memdir.retrieval.vector_worker`), by ``memdir reindex
--embeddings``, and by the daemon's idle time; a search never fills them.

Invariants:
- numpy and the model are only touched through :mod:`memdir.retrieval.embed`, imported lazily.
- A fill embeds outside any transaction and writes each batch in one short write
  transaction (:meth:`memdir.core.index.Index.write`): a concurrent write waits a few
  milliseconds at most, and a process killed mid-batch leaves the batches before it (vectors
  are derived data: the rest is found missing next time).
- The matrix of a set of directories is cached per process. A search reads the rows' count
  and highest ``seq``; when they moved, only the rows with a higher ``seq`` are read and
  appended (or put in place of the row they replace); it is rebuilt from all rows only when
  the counts do not add up (rows deleted, or replaced by another model's). A snapshot handed
  to a search is never changed afterwards: appends go past its end, replacements to a copy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memdir.core.index import Index

if TYPE_CHECKING:
    import sqlite3

    from memdir.core.store import MemoryDir
    from memdir.retrieval.embed import Embedder

__all__ = ["BATCH", "Matrix", "fill_vectors", "missing_vectors", "vector_matrix",
           "vector_text"]

BATCH = 64  # memories embedded per write transaction by a fill in the foreground
Progress = Callable[[int, int], None]
Key = tuple[str, str]  # (dir, file)
Matrix = tuple[list[Key], Any, dict[Key, int]]  # names, vectors (one row each), row of a name

_filled: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # directories -> their state when filled


def vector_text(name: str, description: str, body: str) -> str:
    parts = [name]
    if description and description != name:
        parts.append(description)
    if body and body != description:
        parts.append(body[:2000])
    return "\n".join(parts)


_MISSING = (
    "FROM memories m LEFT JOIN embeddings e ON e.dir = m.dir AND e.file = m.file "
    "WHERE m.dir IN ({marks}) AND (e.norm_hash IS NULL OR e.norm_hash != m.norm_hash "
    "OR e.model != ?)")


def missing_vectors(conn: sqlite3.Connection, keys: Sequence[str], model: str) -> int:
    """How many memories of the directories ``keys`` have no vector of ``model`` for their
    current text (new, edited, or embedded by another model)."""
    if not keys:
        return 0
    sql = "SELECT COUNT(*) " + _MISSING.format(marks=",".join("?" * len(keys)))
    return int(conn.execute(sql, [*keys, model]).fetchone()[0])


def fill_vectors(index: Index, dirs: Sequence[MemoryDir], embedder: Embedder,
                 progress: Progress | None = None, most: int | None = None, *,
                 batch: int = BATCH, proceed: Callable[[], bool] | None = None) -> int:
    """Embed the memories of ``dirs`` whose vector is missing or stale (at most ``most`` of
    them), ``batch`` at a time; returns how many. ``proceed`` is asked before each batch;
    False stops the fill there (the worker's stop and its yielding to searches)."""
    if not dirs:
        return 0
    marks = ",".join("?" * len(dirs))
    keys = [d.key for d in dirs]
    # Unchanged rows since the last complete fill of these directories: nothing to look for.
    # (Any write changes a row's mtime_ns or the count; the scan below is what this saves.)
    state = (str(index.path), tuple(keys), embedder.name, *index.conn.execute(
        f"SELECT COUNT(*), COALESCE(MAX(rowid), 0), TOTAL(mtime_ns) FROM memories "
        f"WHERE dir IN ({marks})", keys).fetchone())
    if _filled.get(state[:3]) == state:
        return 0
    # Names first, texts a batch at a time: a fill of 10k memories never holds their bodies.
    todo: list[Key] = [(r[0], r[1]) for r in index.conn.execute(
        "SELECT m.dir, m.file " + _MISSING.format(marks=marks), [*keys, embedder.name])]
    complete = most is None or len(todo) <= most
    todo = todo if most is None else todo[:most]
    done = 0
    for start in range(0, len(todo), batch):
        if proceed is not None and not proceed():
            return done
        rows = _texts(index.conn, todo[start:start + batch])
        if rows:
            _write(index, embedder, rows, embedder.embed([vector_text(*r[3:]) for r in rows]))
        done += len(rows)
        if progress:
            progress(start + min(batch, len(todo) - start), len(todo))
    if complete:
        with index.write() as conn:  # vectors of files that are gone
            conn.execute(
                f"DELETE FROM embeddings WHERE dir IN ({marks}) AND NOT EXISTS (SELECT 1 FROM "
                "memories m WHERE m.dir = embeddings.dir AND m.file = embeddings.file)", keys)
        _filled[state[:3]] = state
    return done


def _texts(conn: sqlite3.Connection, keys: Sequence[Key]) -> list[tuple[str, ...]]:
    """(dir, file, norm_hash, name, description, body) of the memories still there."""
    values = ",".join("(?, ?)" for _ in keys)
    return [tuple(r) for r in conn.execute(
        f"WITH wanted (dir, file) AS (VALUES {values}) "
        "SELECT m.dir, m.file, m.norm_hash, m.name, m.description, m.body FROM wanted w "
        "JOIN memories m ON m.dir = w.dir AND m.file = w.file",
        [part for key in keys for part in key])]


def _write(index: Index, embedder: Embedder, rows: Sequence[tuple[str, ...]],
           vectors: Any) -> None:
    from memdir.retrieval.embed import to_blob

    # The norm_hash written is the one the text was read with: a memory edited meanwhile
    # keeps a stale hash, so the next fill embeds it again. A vector another fill wrote
    # meanwhile for the same text is kept as it is (same seq: no matrix row changes).
    with index.write() as conn:
        # Above every seq written before, deleted rows' too (the clock, in microseconds): a
        # matrix cached at some (count, seq) can never meet that pair again with other rows.
        seq = max(time.time_ns() // 1000, conn.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM embeddings").fetchone()[0])
        conn.executemany(
            "INSERT INTO embeddings (dir, file, model, norm_hash, vector, seq) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (dir, file) DO UPDATE SET "
            "model = excluded.model, norm_hash = excluded.norm_hash, "
            "vector = excluded.vector, seq = excluded.seq "
            "WHERE model != excluded.model OR norm_hash != excluded.norm_hash",
            [(r[0], r[1], embedder.name, r[2], to_blob(v), seq + n + 1)
             for n, (r, v) in enumerate(zip(rows, vectors, strict=True))])


# -- the vector matrix -------------------------------------------------------------------------


@dataclass
class _Cached:
    """One cached matrix (mutable, under ``_cache_lock``): ``buffer[:size]`` holds the rows;
    ``count`` and ``seq`` are the table's row count and highest ``seq`` it reflects."""

    names: list[Key]
    rows: dict[Key, int]
    buffer: Any
    size: int
    count: int
    seq: int

    def snapshot(self) -> Matrix:
        return self.names, self.buffer[:self.size], self.rows


_cache: dict[tuple[str, tuple[str, ...], str], _Cached] = {}
_cache_lock = threading.Lock()


def vector_matrix(index: Index, keys: Sequence[str], embedder: Embedder) -> Matrix:
    """(the (dir, file) of each row, the vector matrix, the row of each (dir, file)) of the
    vectors of ``embedder`` in the directories ``keys``; the caller must not change them."""
    marks = ",".join("?" * len(keys))
    where = f"dir IN ({marks}) AND model = ?"
    params = [*keys, embedder.name]
    cache_key = (str(index.path), tuple(keys), embedder.name)
    with _cache_lock:  # one thread updates an entry; the others wait for its result
        # Read under the lock: every entry was made from a reading before this one, so a
        # lower seq than the entry's means rows were deleted, never an older view.
        count, seq = index.conn.execute(
            f"SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM embeddings WHERE {where}",
            params).fetchone()
        entry = _cache.get(cache_key)
        if entry is not None and (entry.count, entry.seq) == (count, seq):
            return entry.snapshot()
        if entry is not None and seq > entry.seq and _append(index, entry, where, params,
                                                             embedder.dim, count, seq):
            return entry.snapshot()
        _cache[cache_key] = entry = _rebuild(index, where, params, embedder.dim)
        return entry.snapshot()


def _rebuild(index: Index, where: str, params: Sequence[Any], dim: int) -> _Cached:
    from memdir.retrieval.embed import stack_blobs

    rows = index.conn.execute(
        f"SELECT dir, file, vector, seq FROM embeddings WHERE {where} ORDER BY dir, file",
        params).fetchall()
    names = [(r[0], r[1]) for r in rows]
    # The count and seq of what was read, not of the query before: the rows may have moved.
    return _Cached(names, {name: n for n, name in enumerate(names)},
                   stack_blobs([r[2] for r in rows], dim), len(rows), len(rows),
                   max((r[3] for r in rows), default=0))


def _append(index: Index, entry: _Cached, where: str, params: Sequence[Any], dim: int,
            count: int, seq: int) -> bool:
    """Bring ``entry`` to (count, seq) from the rows written since its ``seq``; False when
    the rows do not add up to ``count`` (some were deleted): then it must be rebuilt."""
    from memdir.retrieval.embed import grown, stack_blobs

    new = index.conn.execute(
        f"SELECT dir, file, vector FROM embeddings WHERE {where} AND seq > ? AND seq <= ? "
        "ORDER BY seq", [*params, entry.seq, seq]).fetchall()
    latest = {(r[0], r[1]): r[2] for r in new}  # a row written twice: its last vector
    added = [key for key in latest if key not in entry.rows]
    if entry.count + len(added) != count:
        return False
    buffer, size = entry.buffer, entry.size
    replaced = [key for key in latest if key in entry.rows]
    if replaced:  # searches may hold the old rows: change a copy
        buffer = grown(buffer, max(buffer.shape[0], size + len(added)))
        buffer[[entry.rows[k] for k in replaced]] = stack_blobs(
            [latest[k] for k in replaced], dim)
    if added:
        if size + len(added) > buffer.shape[0]:  # room for as many again: appends amortise
            buffer = grown(buffer, 2 * (size + len(added)))
        buffer[size:size + len(added)] = stack_blobs([latest[k] for k in added], dim)
        entry.names = [*entry.names, *added]  # new objects: snapshots keep theirs
        rows = dict(entry.rows)
        rows.update((key, size + n) for n, key in enumerate(added))
        entry.rows = rows
    entry.buffer, entry.size, entry.count, entry.seq = buffer, size + len(added), count, seq
    return True
