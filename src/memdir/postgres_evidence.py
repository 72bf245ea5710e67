"""Lexical evidence in the PostgreSQL store, on the score scale of :mod:`memdir.scale`.

The SQLite index measures a memory's word evidence as its BM25 over the BM25 of an ideal
match (every query word once, at average length). PostgreSQL has no BM25 (``ts_rank_cd``
has no idf and no fixed scale), so this store measures the nearest thing it can compute
exactly: the idf-weighted share of the query's words the memory holds,
``r = Σ idf(word held) / Σ idf(word)``, with the same words (:func:`memdir.search.query_terms`,
each word counted once with its rarest form present), FTS5's idf formula over this table's
row counts (:func:`memdir.scale.idf`), and the same saturation
(:func:`memdir.scale.lexical_evidence`). A memory holding every query word once at average
length has ``r = 1`` in both stores, so both put the same memories on top of the same data;
what PostgreSQL cannot see is term frequency and length (a word said three times counts
once).

Invariants:
- A memory's evidence depends only on the memory, the query and the table's word counts,
  never on the other candidates (the scale's comparability).
- Every word form is matched through ``plainto_tsquery('english', form)``: any input is
  safe, and a form PostgreSQL drops as a stop word matches nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from memdir.postgres_conn import Conn
from memdir.scale import idf, lexical_evidence
from memdir.search import query_terms

__all__ = ["word_evidence"]


def _count(conn: Conn, query: str, params: Sequence[str]) -> int:
    row = conn.execute(query, params).fetchone()
    return int(row["n"]) if row else 0


def word_evidence(conn: Conn, query: str, ids: Sequence[str]) -> dict[str, float]:
    """The lexical evidence of each memory of ``ids`` for ``query`` (0 when it holds none
    of the query's words)."""
    terms = query_terms(query)
    wanted = list(dict.fromkeys(ids))
    if not terms or not wanted:
        return dict.fromkeys(wanted, 0.0)
    forms = list(dict.fromkeys(form for word in terms for form in word))
    rows = _count(conn, "SELECT count(*) AS n FROM memories", ())
    held = {form: _count(conn, "SELECT count(*) AS n FROM memories WHERE search @@ "
                         "plainto_tsquery('english', %s)", (form,)) for form in forms}
    tests = ", ".join(f"search @@ plainto_tsquery('english', %s) AS f{n}"
                      for n in range(len(forms)))
    has = {row["id"]: [bool(row[f"f{n}"]) for n in range(len(forms))] for row in conn.execute(
        f"SELECT id, {tests} FROM memories WHERE id = ANY(%s::text[])",
        [*forms, wanted]).fetchall()}
    position = {form: n for n, form in enumerate(forms)}
    ideal = 0.0
    weights: list[list[tuple[int, float]]] = []
    for word in terms:
        present = [(position[f], idf(rows, held[f])) for f in word if held[f] > 0]
        ideal += max(w for _, w in present) if present else idf(rows, 0)
        weights.append(present)
    out: dict[str, float] = {}
    for key in wanted:
        flags = has.get(key)
        if flags is None:
            out[key] = 0.0
            continue
        # Each word once, with the rarest of its forms this memory holds.
        matched = sum(max((w for n, w in word if flags[n]), default=0.0) for word in weights)
        out[key] = lexical_evidence(matched, ideal)
    return out
