"""Lexical evidence in the PostgreSQL store: FTS5's BM25, computed from the tsvectors, on the
score scale of :mod:`memdir.retrieval.scale`.

The SQLite index measures a memory's word evidence as its weighted BM25 (FTS5's ``bm25()``
with :data:`memdir.core.index.BM25_WEIGHTS`) over the BM25 of an ideal match (every query word
once, at average length). PostgreSQL has no BM25 (``ts_rank_cd`` has no idf and no fixed
scale), so this module computes FTS5's formula in Python for the candidates, from what
PostgreSQL holds::

    bm25 = Σ over phrases  idf(n) × f × (k1 + 1) / (f + k1 × (1 - b + b × |D| / avgdl))

with k1 = 1.2, b = 0.75, one phrase per searched form (:func:`memdir.retrieval.search.query_terms`,
the phrases of :func:`memdir.retrieval.search.fts_query`), and then ``r = bm25 / ideal`` through
:func:`memdir.retrieval.scale.ideal_bm25` and :func:`memdir.retrieval.scale.lexical_evidence`, as
the SQLite index does.

Exactly as FTS5: the formula and its constants; idf (:func:`memdir.retrieval.scale.idf`) from the
table's row count N and each form's row count n (rows whose ``search`` holds the phrase,
``phraseto_tsquery('english', form)``, the tsquery the candidates were found with); the
weighted frequency ``f`` = Σ column weight × hits, where a hit's column is read from its
tsvector weight and position: A is the name, C the body, B splits at the end of the
description's positions (description before, tags after), D at the end of the paths'
(paths before, search context and date words after, which share one weight), and the
date words from the context at the end of the context's positions. As in the SQLite index
(:data:`memdir.retrieval.search.OWN_COLUMNS`), with ``dates=False`` (recall) a memory that matches
only in its date words has no evidence.

Approximated: the stemmer (PostgreSQL's Snowball English, FTS5's Porter) and the tokens
(PostgreSQL keeps a path as one word, splits "well-known" into three); the row's length
``|D|`` is its tsvector's highest position, which counts stop words as FTS5 does but not
those that end a segment (name, description and tags, body, the rest); ``avgdl``, the mean
of those lengths over the table (over a random sample of ``AVERAGE_SAMPLE`` rows in a larger
table), is cached per database and schema and read again after ``AVERAGE_TTL`` seconds or
once the row count moved by more than 1% (a few new rows barely move a mean). Two forms of
one word that PostgreSQL stems alike (``deploy`` / ``deployment``, apart in Porter) count
once, as the one phrase FTS5 finds in the memory. Positions stop at 16,383 (PostgreSQL's
limit).

Invariants:
- A memory's evidence depends only on the memory, the query and the table's statistics
  (N, each form's n, the average length), never on the other candidates (the scale's
  comparability).
- Every form is matched through PostgreSQL's own parser (``to_tsvector`` and
  ``phraseto_tsquery``, ``'english'``): any input is safe, and a form PostgreSQL drops as a
  stop word matches nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from memdir.core.index import BM25_WEIGHTS
from memdir.retrieval.scale import ideal_bm25, idf, lexical_evidence
from memdir.retrieval.search import query_terms
from memdir.team.postgres_conn import Conn

__all__ = ["AVERAGE_SAMPLE", "AVERAGE_TTL", "K1", "WEIGHTS", "B", "bm25", "word_evidence"]

K1, B = 1.2, 0.75  # FTS5's bm25() constants
#: The FTS5 column weights of the SQLite index (memories_fts's column order).
WEIGHTS = dict(zip(("name", "description", "body", "tags", "paths", "context", "dates"),
                   BM25_WEIGHTS, strict=True))
#: Seconds a table's average length is reused (see the module docstring).
AVERAGE_TTL = 60.0

_averages: dict[tuple[str, str], tuple[int, float, float]] = {}  # -> (rows, avgdl, read at)
_averages_lock = threading.Lock()

_MAX_POSITION = "(SELECT coalesce(max(p), 0) FROM unnest(to_tsvector('english', {})) u, " \
    "unnest(u.positions) p)"
# Per candidate: its length and segment ends, the query's lexemes it holds (positions and
# weights), and only where B or D holds one, where the description and the paths end.
_CANDIDATES = f"""
SELECT m.id, s.length, s.name_end, s.body_end, h.hits,
    CASE WHEN h.b THEN {_MAX_POSITION.format("m.description")} END AS description_end,
    CASE WHEN h.d THEN {_MAX_POSITION.format("array_to_string(m.paths, ' ')")} END AS paths_end,
    CASE WHEN h.d THEN {_MAX_POSITION.format("array_to_string(m.paths, ' ') || ' ' || m.context")}
        END AS context_end
FROM memories m,
LATERAL (SELECT coalesce(max(x.p), 0) AS length,
                coalesce(max(x.p) FILTER (WHERE x.w = 'A'), 0) AS name_end,
                coalesce(max(x.p) FILTER (WHERE x.w <> 'D'), 0) AS body_end
         FROM unnest(m.search) u, unnest(u.positions, u.weights) AS x(p, w)) s,
LATERAL (SELECT json_agg(json_build_array(u.lexeme, u.positions, u.weights)) AS hits,
                bool_or('B' = ANY(u.weights)) AS b, bool_or('D' = ANY(u.weights)) AS d
         FROM unnest(m.search) u WHERE u.lexeme = ANY(%s::text[])) h
WHERE m.id = ANY(%s::text[]) AND h.hits IS NOT NULL
"""
_AVERAGE = ("SELECT coalesce(avg((SELECT max(p) FROM unnest(search) u, unnest(u.positions) p)),"
            " 0) AS avgdl FROM memories{}")
#: Rows whose lengths the average is read from at most: a larger table is sampled (the mean
#: of 2,000 lengths is within about 1% of the table's; a full scan costs ~270 ms at 10k).
AVERAGE_SAMPLE = 2000

Phrase = tuple[tuple[int, str], ...]  # (offset from the first token, lexeme), in order


def bm25(frequencies: Sequence[float], idfs: Sequence[float], length: float,
         avgdl: float) -> float:
    """FTS5's bm25 (higher is better) of a row of ``length`` tokens given each phrase's
    weighted frequency and idf."""
    norm = K1 * (1 - B + B * length / avgdl) if avgdl > 0 else K1
    return sum(w * f * (K1 + 1) / (f + norm) for f, w in zip(frequencies, idfs, strict=True)
               if f > 0)


def _statistics(conn: Conn, forms: Sequence[str]) -> tuple[int, str, list[Phrase], list[int]]:
    """N, the schema, and each form as PostgreSQL parses it (its lexemes with their offsets;
    empty: stop words) with its row count, in one round trip."""
    parts = ", ".join(
        f"(SELECT json_agg(json_build_array(p, u.lexeme)) FROM unnest(to_tsvector('english', "
        f"%s)) u, unnest(u.positions) p) AS l{n}, (SELECT count(*) FROM memories WHERE search "
        f"@@ phraseto_tsquery('english', %s)) AS f{n}" for n in range(len(forms)))
    row = conn.execute(f"SELECT (SELECT count(*) FROM memories) AS n, current_schema() AS s, "
                       f"{parts}", [f for form in forms for f in (form, form)]).fetchone()
    assert row is not None
    phrases = []
    for n in range(len(forms)):
        tokens = sorted((int(p), str(lexeme)) for p, lexeme in row[f"l{n}"] or [])
        phrases.append(tuple((p - tokens[0][0], lexeme) for p, lexeme in tokens))
    return (int(row["n"]), str(row["s"]), phrases,
            [int(row[f"f{n}"]) for n in range(len(forms))])


def _average_length(conn: Conn, schema: str, rows: int) -> float:
    key = (conn.info.dsn, schema)
    cached = _averages.get(key)
    if cached is not None:
        known, avgdl, read = cached
        if time.monotonic() - read < AVERAGE_TTL and abs(rows - known) <= known // 100:
            return avgdl
    sample = (f" TABLESAMPLE BERNOULLI ({100.0 * AVERAGE_SAMPLE / rows:.6f}) REPEATABLE (0)"
              if rows > AVERAGE_SAMPLE else "")
    row = conn.execute(_AVERAGE.format(sample)).fetchone()
    avgdl = float(row["avgdl"]) if row else 0.0
    with _averages_lock:
        _averages[key] = (rows, avgdl, time.monotonic())
    return avgdl


def _column(letter: str, position: int, row: dict[str, Any]) -> str:
    """The FTS5 column a tsvector entry (weight letter, position) comes from."""
    if letter == "A":
        return "name"
    if letter == "C":
        return "body"
    if letter == "B":
        inside = position <= row["name_end"] + (row["description_end"] or 0)
        return "description" if inside else "tags"
    if position <= row["body_end"] + (row["paths_end"] or 0):
        return "paths"
    return "context" if position <= row["body_end"] + (row["context_end"] or 0) else "dates"


def _frequency(phrase: Phrase, entries: dict[str, dict[int, str]],
               row: dict[str, Any]) -> tuple[float, bool]:
    """Σ column weight × hits of ``phrase`` (each hit counted in its first token's column),
    and whether a hit is in the memory's own words or context, not only in its dates."""
    (_, first), rest = phrase[0], phrase[1:]
    total, own = 0.0, False
    for position, letter in entries.get(first, {}).items():
        if all(position + offset in entries.get(lexeme, {}) for offset, lexeme in rest):
            column = _column(letter, position, row)
            total += WEIGHTS[column]
            own = own or column != "dates"
    return total, own


def word_evidence(conn: Conn, query: str, ids: Sequence[str], *,
                  dates: bool = True) -> dict[str, float]:
    """The lexical evidence of each memory of ``ids`` for ``query`` (0 when it holds none
    of the query's words, or with ``dates=False`` when it holds them only in its dates)."""
    terms = query_terms(query)
    wanted = list(dict.fromkeys(ids))
    out = dict.fromkeys(wanted, 0.0)
    if not terms or not wanted:
        return out
    forms = list(dict.fromkeys(form for word in terms for form in word))  # fts_query's phrases
    rows, schema, parsed, counts = _statistics(conn, forms)
    held = dict(zip(forms, counts, strict=True))
    ideal = ideal_bm25(rows, [[held[form] for form in word] for word in terms])
    # One phrase per distinct parse: forms PostgreSQL stems alike find the same tokens.
    phrases: dict[Phrase, float] = {}
    for phrase, count in zip(parsed, counts, strict=True):
        if phrase:  # a stop word matches nothing
            phrases.setdefault(phrase, idf(rows, count))
    if not phrases or ideal <= 0:
        return out
    avgdl = _average_length(conn, schema, rows)
    lexemes = sorted({lexeme for phrase in phrases for _, lexeme in phrase})
    for row in conn.execute(_CANDIDATES, [lexemes, wanted]).fetchall():
        entries = {lexeme: dict(zip(positions, letters, strict=True))
                   for lexeme, positions, letters in row["hits"]}
        found = [_frequency(phrase, entries, row) for phrase in phrases]
        if not dates and not any(own for _, own in found):  # only its dates matched
            continue
        score = bm25([f for f, _ in found], list(phrases.values()), float(row["length"]), avgdl)
        out[row["id"]] = lexical_evidence(score, ideal)
    return out
