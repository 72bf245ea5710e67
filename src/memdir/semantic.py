"""Semantic retrieval: memory vectors in the index, and hybrid search over them (DESIGN §4).

A memory's vector encodes its name, description and body; it is stored per file with the
``norm_hash`` of the body it was computed from, so an edited memory is embedded again and an
unchanged one never is. Vectors are filled in batches: after ``store_many``, by ``memdir
reindex --embeddings``, and lazily before a semantic search for whatever is missing.

Hybrid search takes the best BM25 matches and the nearest vectors (above a similarity floor),
and scores their union on the score scale (:func:`memdir.hybrid.fuse_scores`,
:mod:`memdir.scale`): lexical and semantic evidence, each absolute, then strength. The cosine
of a BM25 match comes from the same pass over the vector matrix that finds the nearest ones
(a memory not embedded yet has none: it is matched on its words alone); a vector neighbour
outside the BM25 pool gets its own BM25 (:func:`memdir.search.bm25_of`), so its evidence does
not depend on the pool. The BM25 pool is the best ``LEXICAL_POOL`` by BM25 alone (strength
applies once, in the fusion), with the filters in its SQL; path globs are matched after
loading, so with them the pool comes from :func:`memdir.search.run_search`, which takes a
larger one.

Invariants:
- numpy and the model are only touched through :mod:`memdir.embed`, imported lazily: without
  the extra, nothing here is reached and search is FTS alone.
- The vector matrix of a set of directories is cached per process and rebuilt when the
  embeddings change (their count and the highest write sequence number).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memdir.hybrid import LEXICAL_WEIGHT, fuse_scores
from memdir.index import Index, row_to_memory
from memdir.model import Hit, Memory
from memdir.scale import SIMILARITY_FLOOR as SIMILARITY_FLOOR
from memdir.scale import lexical_evidence
from memdir.search import (
    best_matches,
    bm25_of,
    fts_query,
    glob_matches,
    idf_total,
    own_matches,
    run_search,
    strength,
)

if TYPE_CHECKING:
    from memdir.embed import Embedder
    from memdir.store import MemoryDir

__all__ = ["LEXICAL_POOL", "POOL", "SEMANTIC_POOL", "fill_vectors", "hybrid_search",
           "vector_text"]

# Candidates of the score fusion, chosen with bench/quality.py (25 + 25: a point of REALTALK
# Recall@10 better than 25 + 50, the same on MADial-Bench, and fewer memories to load).
LEXICAL_POOL = 25  # best BM25 matches
SEMANTIC_POOL = 25  # nearest vectors at or above the similarity floor
# The PostgreSQL store's rank fusion (memdir.postgres_search) still uses these two: POOL // 2
# tsvector matches and POOL nearest vectors, fused by reciprocal rank.
POOL = 50
SEMANTIC_WEIGHT = 1.0
BATCH = 64
Progress = Callable[[int, int], None]

_cache: dict[tuple[Any, ...], tuple[list[tuple[str, str]], Any, dict[tuple[str, str], int]]] = {}
_cache_lock = threading.Lock()
_filled: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # directories -> their state when filled


def vector_text(name: str, description: str, body: str) -> str:
    parts = [name]
    if description and description != name:
        parts.append(description)
    if body and body != description:
        parts.append(body[:2000])
    return "\n".join(parts)


def fill_vectors(index: Index, dirs: Sequence[MemoryDir], embedder: Embedder,
                 progress: Progress | None = None, most: int | None = None) -> int:
    """Embed the memories of ``dirs`` whose vector is missing or stale (at most ``most`` of
    them, a batch at a time); returns how many."""
    from memdir.embed import to_blob

    if not dirs:
        return 0
    marks = ",".join("?" * len(dirs))
    keys = [d.key for d in dirs]
    # Unchanged rows since the last fill of these directories: nothing to look for. (Any
    # write changes a row's mtime_ns or the count; the scan below is what this saves.)
    state = (str(index.path), tuple(keys), embedder.name, *index.conn.execute(
        f"SELECT COUNT(*), COALESCE(MAX(rowid), 0), TOTAL(mtime_ns) FROM memories "
        f"WHERE dir IN ({marks})", keys).fetchone())
    if _filled.get(state[:3]) == state:
        return 0
    rows = index.conn.execute(
        "SELECT m.dir, m.file, m.norm_hash, m.name, m.description, m.body FROM memories m "
        "LEFT JOIN embeddings e ON e.dir = m.dir AND e.file = m.file "
        f"WHERE m.dir IN ({marks}) AND (e.norm_hash IS NULL OR e.norm_hash != m.norm_hash "
        "OR e.model != ?)", [*keys, embedder.name]).fetchall()
    complete = most is None or len(rows) <= most
    rows = rows if most is None else rows[:most]
    done = 0
    for start in range(0, len(rows), BATCH):
        chunk = rows[start:start + BATCH]
        vectors = embedder.embed([vector_text(r[3], r[4], r[5]) for r in chunk])
        with index.write() as conn:
            seq = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM embeddings").fetchone()[0]
            conn.executemany(
                "INSERT OR REPLACE INTO embeddings (dir, file, model, norm_hash, vector, seq) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(r[0], r[1], embedder.name, r[2], to_blob(v), seq + n + 1)
                 for n, (r, v) in enumerate(zip(chunk, vectors, strict=True))])
        done += len(chunk)
        if progress:
            progress(done, len(rows))
    with index.write() as conn:  # vectors of files that are gone
        conn.execute(
            f"DELETE FROM embeddings WHERE dir IN ({marks}) AND NOT EXISTS (SELECT 1 FROM "
            "memories m WHERE m.dir = embeddings.dir AND m.file = embeddings.file)", keys)
    if complete:
        _filled[state[:3]] = state
    return done


def _matrix(index: Index, keys: Sequence[str], embedder: Embedder) -> tuple[
        list[tuple[str, str]], Any, dict[tuple[str, str], int]]:
    """(the (dir, file) of each row, the vector matrix, the row of each (dir, file))."""
    from memdir.embed import stack_blobs

    marks = ",".join("?" * len(keys))
    version = index.conn.execute(
        f"SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM embeddings WHERE dir IN ({marks}) "
        "AND model = ?", [*keys, embedder.name]).fetchone()
    cache_key = (str(index.path), tuple(keys), embedder.name, version[0], version[1])
    with _cache_lock:
        if cache_key in _cache:
            return _cache[cache_key]
    rows = index.conn.execute(
        f"SELECT dir, file, vector FROM embeddings WHERE dir IN ({marks}) AND model = ? "
        "ORDER BY dir, file", [*keys, embedder.name]).fetchall()
    names = [(r[0], r[1]) for r in rows]
    entry = (names, stack_blobs([r[2] for r in rows], embedder.dim),
             {name: n for n, name in enumerate(names)})
    with _cache_lock:
        for old in [k for k in _cache if k[:3] == cache_key[:3]]:
            del _cache[old]
        _cache[cache_key] = entry
    return entry


def _load(index: Index, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Memory]:
    """Memories by (dir, file), in one query."""
    if not keys:
        return {}
    values = ",".join("(?, ?)" for _ in keys)
    rows = index.conn.execute(
        f"WITH wanted (dir, file) AS (VALUES {values}) "
        "SELECT m.*, u.access_count, u.last_accessed FROM wanted w "
        "JOIN memories m ON m.dir = w.dir AND m.file = w.file "
        "LEFT JOIN usage u ON u.dir = m.dir AND u.id = m.id",
        [part for key in keys for part in key]).fetchall()
    return {(row["dir"], row["file"]): row_to_memory(row) for row in rows}


def _where(memory: Memory) -> tuple[str, str]:
    return (str(memory.path.parent), memory.path.name) if memory.path else ("", memory.id)


def _lexical(index: Index, query: str, dirs: Sequence[MemoryDir], *, types: Sequence[str],
             tags: Sequence[str] | None, include_archived: bool,
             limit: int, dates: bool) -> dict[tuple[str, str], float]:
    """The ``limit`` best BM25 matches as (dir, file) -> BM25 match (higher is better), the
    same query and filters as :func:`memdir.search.run_search` without a path filter, but
    neither loaded nor re-ranked: strength applies once, in the fusion."""
    fts = fts_query(query)
    if fts is None:
        return {}
    rows = best_matches(index.conn, fts, dirs, types=types, tags=tags,
                        include_archived=include_archived, limit=limit, whole=False)
    own = None if dates else own_matches(index.conn, fts, [(row[0], row[1]) for row in rows])
    return {(row[0], row[1]): -float(row[2]) for row in rows
            if own is None or (row[0], row[1]) in own}


def hybrid_search(index: Index, dirs: Sequence[MemoryDir], embedder: Embedder, query: str, *,
                  types: Sequence[str], tags: Sequence[str] | None, include_archived: bool,
                  paths: Sequence[str] | None, limit: int, at: datetime,
                  dates: bool = True) -> list[Hit]:
    """The best BM25 matches and nearest vectors, on the score scale (:mod:`memdir.scale`);
    same filters as search. ``dates=False``: a match only in a memory's date words is no
    lexical evidence (:data:`memdir.search.OWN_COLUMNS`)."""
    from memdir.embed import cosine_scores, top_k

    if not dirs or not query.strip():
        return []
    # One batch at most: a search never waits for a whole store to be embedded (the rest is
    # filled by later searches, the daemon's idle time, or reindex --embeddings).
    fill_vectors(index, dirs, embedder, most=BATCH)
    memories: dict[tuple[str, str], Memory] = {}
    ideal = idf_total(index.conn, query)
    if paths:  # globs filter after loading: run_search takes a pool large enough for them
        hits = run_search(index.conn, query, dirs, types=types, tags=tags,
                          include_archived=include_archived, paths=paths,
                          limit=max(LEXICAL_POOL, limit), at=at, dates=dates)
        memories = {_where(h.memory): h.memory for h in hits}
        words = {_where(h.memory): h.match for h in hits}
    else:
        words = {key: lexical_evidence(bm25, ideal) for key, bm25 in _lexical(
            index, query, dirs, types=types, tags=tags, include_archived=include_archived,
            limit=max(LEXICAL_POOL, limit), dates=dates).items()}
    names, matrix, rows = _matrix(index, [d.key for d in dirs], embedder)
    scores = cosine_scores(embedder.embed([query])[0], matrix) if names else None
    nearest = top_k(scores, SEMANTIC_POOL * 2) if scores is not None else []
    # Below the floor a vector neighbour is noise, not meaning: it is no candidate.
    semantic_keys = [names[row] for row, score in nearest if score >= SIMILARITY_FLOOR]
    taxonomies = {d.key: d.taxonomy for d in dirs}

    def allowed(memory: Memory) -> bool:
        if memory.status != "active" and not include_archived:
            return False
        if types and memory.type not in types:
            return False
        if tags and not set(tags) & set(memory.tags):
            return False
        return not paths or glob_matches(memory.paths, paths)

    # One query loads the BM25 matches and the nearest SEMANTIC_POOL; further neighbours are
    # loaded only when the filters rejected some of those.
    semantic: list[tuple[str, str]] = []
    wanted, start = list(words), 0
    while (len(semantic) < SEMANTIC_POOL and start < len(semantic_keys)) or wanted:
        chunk = semantic_keys[start:start + SEMANTIC_POOL - len(semantic)]
        start += len(chunk)
        memories.update(_load(index, [k for k in dict.fromkeys([*wanted, *chunk])
                                      if k not in memories]))
        semantic += [k for k in chunk if k in memories and allowed(memories[k])]
        wanted = []
    candidates = list(dict.fromkeys(k for k in [*words, *semantic] if k in memories))
    fts = fts_query(query)
    if fts is not None:  # neighbours' own word matches, wherever they rank by BM25
        others = [k for k in candidates if k not in words]
        own = None if dates else own_matches(index.conn, fts, others)
        words.update({key: lexical_evidence(bm25, ideal) for key, bm25 in bm25_of(
            index.conn, fts, others).items() if own is None or key in own})
    # A memory without a vector yet (filled by a later search) has no cosine: words alone.
    cosines = {} if scores is None else {
        key: float(scores[rows[key]]) for key in candidates if key in rows}
    power = {key: strength(memories[key], taxonomies.get(key[0]), at) for key in candidates}
    fused = fuse_scores(candidates, words, cosines, power, lexical_weight=LEXICAL_WEIGHT,
                        limit=limit)
    return [Hit(memories[key], score, match, power[key]) for key, score, match in fused]
