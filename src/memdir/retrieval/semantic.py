"""Semantic retrieval: hybrid search over the memory vectors of the index (DESIGN §4).

The vectors themselves (how a memory's text is embedded, filling them, the cached matrix)
live in :mod:`memdir.retrieval.vector_index`; they are filled in the background
(:mod:`memdir.retrieval.vector_worker`), never by a search. :func:`vector_text`, :data:`BATCH` and
:func:`fill_vectors` are re-exported here for the modules that import them from this one.

Hybrid search takes the best BM25 matches and the nearest vectors (above a similarity floor),
and scores their union on the score scale (:func:`memdir.retrieval.hybrid.fuse_scores`,
:mod:`memdir.retrieval.scale`): lexical and semantic evidence, each absolute, then strength. The
cosine of a BM25 match comes from the same pass over the vector matrix that finds the nearest ones
(a memory not embedded yet has none: it is matched on its words alone); a vector neighbour
outside the BM25 pool gets its own BM25 (:func:`memdir.retrieval.search.bm25_of`), so its evidence
does not depend on the pool. The BM25 pool is the best ``LEXICAL_POOL`` by BM25 alone (strength
applies once, in the fusion), with the filters in its SQL; path globs are matched after
loading, so with them the pool comes from :func:`memdir.retrieval.search.run_search`, which takes a
larger one.

Invariants:
- numpy and the model are only touched through :mod:`memdir.retrieval.embed`, imported lazily:
without
  the extra, nothing here is reached and search is FTS alone.
- The query's embedding is the only model call of a search.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from memdir.core.index import USAGE_COLUMNS, Index, row_to_memory
from memdir.core.model import Hit, Memory
from memdir.retrieval.hybrid import LEXICAL_WEIGHT, fuse_scores
from memdir.retrieval.scale import SIMILARITY_FLOOR as SIMILARITY_FLOOR
from memdir.retrieval.scale import lexical_evidence
from memdir.retrieval.search import (
    RANKED_CAP,
    bm25_of,
    fts_query,
    glob_matches,
    idf_total,
    own_words,
    pool_of,
    ranked_matches,
    run_search,
    strength,
)
from memdir.retrieval.vector_index import BATCH, fill_vectors, vector_matrix, vector_text

if TYPE_CHECKING:
    from memdir.core.store import MemoryDir
    from memdir.retrieval.embed import Embedder

__all__ = ["BATCH", "LEXICAL_POOL", "SEMANTIC_POOL", "SIMILARITY_FLOOR", "fill_vectors",
           "hybrid_search", "vector_text"]

# Candidates of the score fusion, chosen with bench/quality.py (25 + 25: a point of REALTALK
# Recall@10 better than 25 + 50, the same on MADial-Bench, and fewer memories to load).
LEXICAL_POOL = 25  # best BM25 matches
SEMANTIC_POOL = 25  # nearest vectors at or above the similarity floor


def _load(index: Index, keys: Sequence[tuple[str, str]],
          rowids: dict[tuple[str, str], int]) -> dict[tuple[str, str], Memory]:
    """Memories by (dir, file), in one query; their index rows go to ``rowids``."""
    if not keys:
        return {}
    values = ",".join("(?, ?)" for _ in keys)
    rows = index.conn.execute(
        f"WITH wanted (dir, file) AS (VALUES {values}) "
        f"SELECT m.rowid AS row_id, m.*, {USAGE_COLUMNS} FROM wanted w "
        "JOIN memories m ON m.dir = w.dir AND m.file = w.file "
        "LEFT JOIN usage u ON u.dir = m.dir AND u.id = m.id",
        [part for key in keys for part in key]).fetchall()
    rowids.update({(row["dir"], row["file"]): row["row_id"] for row in rows})
    return {(row["dir"], row["file"]): row_to_memory(row) for row in rows}


def _where(memory: Memory) -> tuple[str, str]:
    return (str(memory.path.parent), memory.path.name) if memory.path else ("", memory.id)


def hybrid_search(index: Index, dirs: Sequence[MemoryDir], embedder: Embedder, query: str, *,
                  types: Sequence[str], tags: Sequence[str] | None, include_archived: bool,
                  paths: Sequence[str] | None, limit: int, at: datetime,
                  dates: bool = True) -> list[Hit]:
    """The best BM25 matches and nearest vectors, on the score scale
    (:mod:`memdir.retrieval.scale`); same filters as search. ``dates=False``: a match only in a
    memory's date words is no lexical evidence (:data:`memdir.retrieval.search.OWN_COLUMNS`)."""
    from memdir.retrieval.embed import cosine_scores, top_k

    if not dirs or not query.strip():
        return []
    # No filling here: the vectors that exist count, the rest rank by BM25 alone until the
    # background worker (memdir.retrieval.vector_worker) has embedded them.
    from memdir.retrieval.vector_worker import embed_aside

    vector = embed_aside(embedder, query)  # the model runs while the SQL below does
    memories: dict[tuple[str, str], Memory] = {}
    rowids: dict[tuple[str, str], int] = {}
    ideal = idf_total(index.conn, query)
    fts = fts_query(query)
    if fts is not None and not dates:
        fts = own_words(fts)
    if paths:  # globs filter after loading: run_search takes a pool large enough for them
        hits = run_search(index.conn, query, dirs, types=types, tags=tags,
                          include_archived=include_archived, paths=paths,
                          limit=max(LEXICAL_POOL, limit), at=at, dates=dates)
        memories = {_where(h.memory): h.memory for h in hits}
        words = {_where(h.memory): h.match for h in hits}
        ranked: list[tuple[int, float]] = []
        complete = False  # the neighbours' words: asked of FTS5 below
    elif fts is not None:  # one ranking pass: the pool now, the neighbours' words later
        ranked = ranked_matches(index.conn, fts)
        complete = len(ranked) < RANKED_CAP
        words = {(d, f): lexical_evidence(-bm25, ideal) for d, f, _, bm25 in pool_of(
            index.conn, fts, ranked, dirs, types=types, tags=tags,
            include_archived=include_archived, limit=max(LEXICAL_POOL, limit))}
    else:
        ranked, words, complete = [], {}, True
    names, matrix, rows = vector_matrix(index, [d.key for d in dirs], embedder)
    scores = cosine_scores(vector(), matrix) if names else None
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
                                      if k not in memories], rowids))
        semantic += [k for k in chunk if k in memories and allowed(memories[k])]
        wanted = []
    candidates = list(dict.fromkeys(k for k in [*words, *semantic] if k in memories))
    if fts is not None:  # neighbours' own word matches, wherever they rank by BM25
        others = [k for k in candidates if k not in words]
        rank = dict(ranked)
        found = {k: rank[rowids[k]] for k in others if rowids.get(k) in rank}
        if not complete:  # matches the pass did not return: those ask FTS5 themselves
            found.update({k: -bm25 for k, bm25 in bm25_of(
                index.conn, fts, [k for k in others if k not in found]).items()})
        words.update({k: lexical_evidence(-bm25, ideal) for k, bm25 in found.items()})
    # A memory without a vector yet (the worker has not reached it) has no cosine: words alone.
    cosines = {} if scores is None else {
        key: float(scores[rows[key]]) for key in candidates if key in rows}
    power = {key: strength(memories[key], taxonomies.get(key[0]), at) for key in candidates}
    fused = fuse_scores(candidates, words, cosines, power, lexical_weight=LEXICAL_WEIGHT,
                        limit=limit)
    return [Hit(memories[key], score, match, power[key]) for key, score, match in fused]
