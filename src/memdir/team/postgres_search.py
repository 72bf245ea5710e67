"""Search in the PostgreSQL store: the filters, the tsvector ranking, and the hybrid of words
and meaning.

Words: any input becomes a tsquery through :func:`memdir.retrieval.search.fts_query` (quoted word
tokens joined by OR, which ``websearch_to_tsquery`` parses without ever failing); the best
matches by ``ts_rank_cd`` are the candidates, and each is scored on the scale of
:mod:`memdir.retrieval.scale` by its word evidence (:mod:`memdir.team.postgres_evidence`: FTS5's
weighted BM25 over the ideal BM25, computed from its tsvector, as the SQLite index scores it) and
its strength.

Meaning, when the store's vectors are on and the model is loaded
(:mod:`memdir.team.postgres_vectors`): the best :data:`~memdir.retrieval.semantic.LEXICAL_POOL` by
``ts_rank_cd`` and the nearest :data:`~memdir.retrieval.semantic.SEMANTIC_POOL` vectors at or above
the similarity floor, their union scored by :func:`memdir.retrieval.hybrid.fuse_scores` from each
one's word evidence and cosine, exactly as :func:`memdir.retrieval.semantic.hybrid_search` scores
the SQLite index: the same constants, the same scale, so both stores put the same memories on top of
the same data.

Invariants:
- Both rankings apply the same filters, built once by :func:`where_clause` (types resolved
  against the taxonomy, an unknown type, scope or status refused).
- No input makes a search raise: what yields no words ranks by meaning alone, or finds
  nothing.
- A search embeds its query and nothing else (:mod:`memdir.team.postgres_worker` fills the
  vectors); until the model is loaded it ranks by words alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memdir.core.errors import InvalidMemoryError
from memdir.core.model import SCOPES, STATUSES, Hit, Memory, Scope
from memdir.core.taxonomy import Taxonomy
from memdir.retrieval.hybrid import LEXICAL_WEIGHT, fuse_scores
from memdir.retrieval.scale import scored
from memdir.retrieval.search import fts_query, strength
from memdir.retrieval.semantic import LEXICAL_POOL
from memdir.team.postgres_conn import COLUMNS, Conn, memory_from_row
from memdir.team.postgres_evidence import word_evidence

if TYPE_CHECKING:
    from memdir.team.postgres import PostgresStore

__all__ = ["RANK_WEIGHTS", "fts", "hybrid", "search", "where_clause"]

RANK_WEIGHTS = "'{0.1, 0.2, 0.4, 1.0}'::float4[]"  # ts_rank_cd weights of D, C, B, A


def where_clause(taxonomy: Taxonomy, types: Sequence[str] | None,
                 scopes: Sequence[Scope] | None, tags: Sequence[str] | None,
                 status: str) -> tuple[str, list[Any]]:
    """The SQL condition on ``memories`` and its parameters (types resolved, unknown
    refused)."""
    where: list[str] = ["TRUE"]
    params: list[Any] = []
    if status != "all":
        if status not in STATUSES:
            raise InvalidMemoryError(f"unknown status {status!r}",
                                     "use active, archived or all")
        where.append("status = %s")
        params.append(status)
    if types:
        where.append("type = ANY(%s::text[])")
        params.append([taxonomy.resolve(t) for t in types])
    if scopes:
        for scope in scopes:
            if scope not in SCOPES:
                raise InvalidMemoryError(f"unknown scope {scope!r}",
                                         "use user, project or team")
        where.append("scope = ANY(%s::text[])")
        params.append(list(scopes))
    if tags:
        where.append("tags && %s::text[]")
        params.append(list(tags))
    return " AND ".join(where), params


def search(store: PostgresStore, query: str, *, limit: int, types: Sequence[str] | None,
           scopes: Sequence[Scope] | None, tags: Sequence[str] | None,
           include_archived: bool, dates: bool = True) -> list[Hit]:
    """The best ``limit`` hits for ``query`` (no access counted: the caller does)."""
    if not isinstance(limit, int) or limit < 1:
        raise InvalidMemoryError(f"limit must be at least 1, not {limit!r}")
    where, params = where_clause(store.taxonomy, types, scopes, tags,
                                 "all" if include_archived else "active")
    text = query if isinstance(query, str) else ""  # the API may hand over anything
    if not text.strip():
        return []
    if store.embeddings.model is not None:
        return hybrid(store, text, where, params, limit, dates=dates)
    terms = fts_query(text)
    return fts(store, text, terms, where, params, limit, dates=dates) if terms else []


def _matches(conn: Conn, terms: str, where: str, params: Sequence[Any],
             limit: int) -> list[tuple[Memory, float]]:
    """The best ``limit`` memories matching a tsquery and the filters, by match alone."""
    rows = conn.execute(
        f"SELECT {COLUMNS}, ts_rank_cd({RANK_WEIGHTS}, search, q) AS match "
        "FROM memories, websearch_to_tsquery('english', %s) AS q "
        f"WHERE search @@ q AND {where} ORDER BY match DESC, id LIMIT %s",
        [terms, *params, limit]).fetchall()
    return [(memory_from_row(row), float(row["match"])) for row in rows]


def fts(store: PostgresStore, query: str, terms: str, where: str, params: Sequence[Any],
        limit: int, *, dates: bool = True) -> list[Hit]:
    """The best ``limit`` memories matching ``terms`` (the tsquery of ``query``) and the
    filters, by score: their word evidence (:mod:`memdir.team.postgres_evidence`) and strength."""
    with store.connections.db() as conn:
        matches = _matches(conn, terms, where, params, max(limit * 4, 40))
        evidence = word_evidence(conn, query, [m.id for m, _ in matches], dates=dates)
    at = store.clock()
    hits = []
    for memory, _ in matches:
        power = strength(memory, store.taxonomy, at)
        match = evidence[memory.id]
        if match > 0:
            hits.append(Hit(memory, scored(match, power), match, power))
    hits.sort(key=lambda h: (-h.score, h.memory.id))
    return hits[:limit]


def hybrid(store: PostgresStore, query: str, where: str, params: Sequence[Any],
           limit: int, *, dates: bool = True) -> list[Hit]:
    """The tsvector matches and the nearest vectors, scored by their fused word and meaning
    evidence and strength, best first (see the module docstring)."""
    embeddings = store.embeddings
    embedder = embeddings.model
    assert embedder is not None
    vector = embedder.embed([query])[0]  # the one model call of a search
    terms = fts_query(query)
    with store.connections.db() as conn:
        words = _matches(conn, terms, where, params, max(LEXICAL_POOL, limit)) if terms else []
        meaning = embeddings.meaning(conn, vector, embedder)
        near = meaning.nearest(where, params)
        memories = {m.id: m for m, _ in words}
        for memory, _ in near:  # above the similarity floor only: below it is noise
            memories.setdefault(memory.id, memory)
        known = {m.id: cosine for m, cosine in near}
        cosines = {**meaning.cosines([key for key in memories if key not in known]), **known}
        lexical = word_evidence(conn, query, list(memories), dates=dates)
    at = store.clock()
    power = {key: strength(m, store.taxonomy, at) for key, m in memories.items()}
    fused = fuse_scores(list(memories), lexical, cosines, power,
                        lexical_weight=LEXICAL_WEIGHT, limit=limit)
    return [Hit(memories[key], score, match, power[key]) for key, score, match in fused]
