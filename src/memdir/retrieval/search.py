"""Query sanitising, strength, ranking and path globs.

Invariants:
- :func:`fts_query` turns *any* string into a valid FTS5 query or None: every token is a
  quoted phrase made only of word characters, joined with OR, so no input can raise an FTS5
  syntax error (checked by a fuzz test).
- Strength (seed 002, :mod:`memdir.core.strength`, re-exported here) is in [0, 1]: type weight ×
  relevance × decay × a saturating boost from uses and shows.
- Ranking is on the score scale (:mod:`memdir.retrieval.scale`): BM25 relative to the query's ideal
  BM25 (:func:`idf_total`, from the FTS table's own statistics), saturated into [0, 1], then
  strength as a bounded exponent; in one query the order is BM25 × the strength factor's, so
  an old but exact match still beats a fresh weak one.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from memdir.core.errors import InvalidMemoryError
from memdir.core.index import BM25_WEIGHTS, USAGE_COLUMNS, row_to_memory
from memdir.core.model import Hit, Memory
from memdir.core.strength import (
    HALF_LIFE_DAYS,
    TEMPORARY_HALF_LIFE_DAYS,
    strength,
    strength_of,
    type_factors,
)
from memdir.retrieval.scale import ideal_bm25, lexical_evidence, scored, strength_factor

if TYPE_CHECKING:
    from memdir.core.index import Index
    from memdir.core.store import MemoryDir

__all__ = [
    "HALF_LIFE_DAYS",
    "OVERFETCH",
    "RANKED_CAP",
    "STOPWORDS",
    "TEMPORARY_HALF_LIFE_DAYS",
    "best_matches",
    "bm25_of",
    "fts_query",
    "glob_matches",
    "idf_total",
    "list_memories",
    "own_words",
    "pool_of",
    "query_terms",
    "rank_factor",
    "ranked_matches",
    "run_search",
    "strength",
    "strength_of",
    "type_factors",
]

MAX_QUERY_TOKENS = 32

_TOKEN = re.compile(r"\w+", re.UNICODE)
# NLTK's English stop words plus contraction fragments: measured on REALTALK and MADial-Bench
# (bench/quality.py), dropping them from queries gains about a point of recall over a shorter
# list. Queries are ORs of terms, so a stop word can only add noise.
STOPWORDS = frozenset("""
a about above after again against all am an and any are aren as at be because been before
being below between both but by can couldn could d did didn do does doesn doing don down during
each few for from further had hadn has hasn have haven having he her here hers herself him
himself his how i if in into is isn it its itself just ll m ma me mightn more most mustn my
myself needn no nor not now o of off on once only or other our ours ourselves out over own re s
same shan she should shouldn so some such t than that the their theirs them themselves then
there these they this those through to too under until up ve very was wasn we were weren what
when where which while who whom why will with won would wouldn y you your yours yourself
yourselves also get got im ive dont
""".split())


def _variants(token: str) -> list[str]:
    """Surface forms whose Porter stems differ although the words are one family.

    Porter turns a final 'y' into 'i' ("deploy" -> "deploi") but strips "-ment" after that
    step ("deployments" -> "deploy"), so "deploy" would never find "Deployments". Asking for
    both forms restores the match in both directions.
    """
    out = [token]
    if token.endswith("y") and len(token) > 3:
        out.append(token + "ment")
    for suffix in ("ments", "ment"):
        if token.endswith(suffix) and len(token) > len(suffix) + 3:
            out.append(token[: -len(suffix)])
            break
    return out


def query_terms(text: str) -> list[tuple[str, ...]]:
    """The query's words (stop words dropped unless nothing else is left), each as the tuple
    of surface forms searched for it (:func:`_variants`): one FTS5 phrase per form."""
    tokens: list[str] = []
    for raw in _TOKEN.findall(text.lower()):
        token = raw.strip("_")
        if token and token not in tokens:
            tokens.append(token)
    content = [t for t in tokens if t not in STOPWORDS]
    return [tuple(_variants(t)) for t in (content or tokens)[:MAX_QUERY_TOKENS]]


def fts_query(text: str) -> str | None:
    """A safe FTS5 query for free text: an OR of quoted tokens; None when nothing is left."""
    terms = dict.fromkeys(v for forms in query_terms(text) for v in forms)
    return " OR ".join(f'"{t}"' for t in terms) if terms else None


def rank_factor(strength_value: float) -> float:
    """The bounded factor strength applies to a match: 0.6 (dead) .. 1.0 (strong); see
    :func:`memdir.retrieval.scale.scored`."""
    return strength_factor(strength_value)


def _fts_rows(conn: sqlite3.Connection, table: str) -> int:
    """The rows of an FTS5 table as its bm25() counts them: the first varint of its averages
    record (``<table>_data`` id 1), read in O(1); a plain count if that cannot be read."""
    row = conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    blob = bytes(row[0]) if row and row[0] is not None else b""
    value = 0
    for n, byte in enumerate(blob[:9]):  # SQLite's varint: 7 bits a byte, big-endian
        if n == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def idf_total(conn: sqlite3.Connection, query: str, table: str = "memories_fts") -> float:
    """The BM25 of an ideal match of ``query`` in FTS5 ``table``
    (:func:`memdir.retrieval.scale.ideal_bm25`): each searched form's row count, one count a
    form."""
    terms = query_terms(query)
    if not terms:
        return 0.0
    rows = _fts_rows(conn, table)
    counts = [[int(conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?",
                                (f'"{form}"',)).fetchone()[0]) for form in forms]
              for forms in terms]
    return ideal_bm25(rows, counts)


def bm25_of(conn: sqlite3.Connection, fts: str, keys: Sequence[tuple[str, str]]) -> dict[
        tuple[str, str], float]:
    """The weighted BM25 match (higher is better) of the given (dir, file) memories that
    match ``fts``; the others are left out."""
    if not keys:
        return {}
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    values = ",".join("(?, ?)" for _ in keys)
    return {(r[0], r[1]): -float(r[2]) for r in conn.execute(
        f"WITH wanted (dir, file) AS (VALUES {values}) "
        f"SELECT m.dir, m.file, bm25(memories_fts, {weights}) FROM wanted w "
        "JOIN memories m ON m.dir = w.dir AND m.file = w.file "
        "JOIN memories_fts ON memories_fts.rowid = m.rowid WHERE memories_fts MATCH ?",
        [*(part for key in keys for part in key), fts])}


#: The columns of a memory's own words and its search context. A search asked for by a
#: person counts a match in ``dates`` (the memory's days as words: "what did we decide in
#: March"); recall, which searches whatever a prompt says, does not (``dates=False``): "ship
#: it on Friday" must not inject every memory written on a Friday.
OWN_COLUMNS = "{name description body tags paths context}"


def own_words(fts: str) -> str:
    """``fts`` restricted to a memory's own words and search context (:data:`OWN_COLUMNS`):
    one FTS5 query both leaves out the memories that match only in their dates and scores
    the others without their date words."""
    return f"{OWN_COLUMNS} : ({fts})"


@lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def glob_matches(globs: Iterable[str], files: Iterable[str]) -> bool:
    """True when any file path is covered by any glob (``**`` spans directories)."""
    paths = [f.replace("\\", "/").removeprefix("./") for f in files]
    for glob in globs:
        regex = _glob_regex(glob.removeprefix("./"))
        if any(regex.match(p) for p in paths):
            return True
    return False


def _type_and_tag_filters(where: list[str], params: list[Any], types: Sequence[str],
                          tags: Sequence[str] | None) -> None:
    """Add the SQL conditions (and their parameters) for a type list and a tag list."""
    if types:
        where.append(f"m.type IN ({','.join('?' * len(types))})")
        params.extend(types)
    if tags:
        where.append(f"EXISTS (SELECT 1 FROM json_each(m.tags) WHERE value IN "
                     f"({','.join('?' * len(tags))}))")
        params.extend(tags)


# FTS5 ranks this many candidates per wanted row on its own before they are joined to their
# memories rows and filtered: joining every match to its wide row before sorting was most of a
# search for a common word (10k memories: p50 2.7 -> 1.6 ms for the query).
OVERFETCH = 5


def best_matches(conn: sqlite3.Connection, fts: str, dirs: Sequence[MemoryDir], *,
                 types: Sequence[str], tags: Sequence[str] | None, include_archived: bool,
                 limit: int, whole: bool = True) -> list[sqlite3.Row]:
    """The ``limit`` best BM25 matches of ``fts`` in ``dirs`` passing the filters, best first
    (ties by file name), each with ``rank``, the weighted BM25 (lower is better): whole rows
    with their usage counters, or with ``whole=False`` only ``dir``, ``file``, ``rowid``,
    ``id`` and ``body``.

    FTS5 ranks OVERFETCH × ``limit`` matches alone first; only when the filters (another
    project's directory, archived, a type or a tag) reject so many that fewer than ``limit``
    remain while FTS5 had more does the query run again over every match. So the result is
    the plain join's (up to the order of exactly equal BM25 scores at the first cut).
    """
    where = [f"m.dir IN ({','.join('?' * len(dirs))})"]
    params: list[Any] = [d.key for d in dirs]
    if not include_archived:
        where.append("m.status = 'active'")
    _type_and_tag_filters(where, params, types, tags)
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    ranked = (f"SELECT rowid, bm25(memories_fts, {weights}) AS rank FROM memories_fts "
              "WHERE memories_fts MATCH ? ORDER BY rank")
    columns = f"m.*, {USAGE_COLUMNS}" if whole else "m.dir, m.file, m.rowid, m.id, m.body"
    usage = "LEFT JOIN usage u ON u.dir = m.dir AND u.id = m.id " if whole else ""

    def run(cap: str) -> list[sqlite3.Row]:
        return conn.execute(
            f"SELECT {columns}, f.rank AS rank FROM ({ranked}{cap}) f "
            f"JOIN memories m ON m.rowid = f.rowid {usage}"
            f"WHERE {' AND '.join(where)} ORDER BY f.rank, m.file LIMIT {int(limit)}",
            [fts, *params],
        ).fetchall()

    first = int(limit) * OVERFETCH
    rows = run(f" LIMIT {first}")
    if len(rows) < limit:
        matched = conn.execute("SELECT count(*) FROM (SELECT 1 FROM memories_fts "
                               "WHERE memories_fts MATCH ? LIMIT ?)", (fts, first)).fetchone()
        if matched[0] >= first:  # FTS5 had more than it ranked: rank them all
            rows = run("")
    return rows


# How many matches one ranking pass returns to Python (:func:`ranked_matches`): every match of
# a 10k store's commonest query words, a bounded cost at 100k.
RANKED_CAP = 4000


def ranked_matches(conn: sqlite3.Connection, fts: str) -> list[tuple[int, float]]:
    """(rowid, weighted BM25: lower is better) of the matches of ``fts``, best first, at most
    :data:`RANKED_CAP`: one FTS5 pass that both picks a pool and scores any other memory
    later (:func:`pool_of`), instead of one query for each."""
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    return conn.execute(
        f"SELECT rowid, bm25(memories_fts, {weights}) AS rank FROM memories_fts "
        f"WHERE memories_fts MATCH ? ORDER BY rank LIMIT {RANKED_CAP}", (fts,)).fetchall()


def pool_of(conn: sqlite3.Connection, fts: str, ranked: Sequence[tuple[int, float]],
            dirs: Sequence[MemoryDir], *, types: Sequence[str], tags: Sequence[str] | None,
            include_archived: bool, limit: int) -> list[tuple[str, str, int, float]]:
    """The ``limit`` best matches of ``fts`` that pass the filters, as (dir, file, rowid,
    BM25), best first, ties by file name, as :func:`best_matches` gives them: from
    ``ranked`` (its :func:`ranked_matches`), or where that pass was cut short before the pool
    was whole, from :func:`best_matches` itself."""
    where = [f"m.dir IN ({','.join('?' * len(dirs))})"]
    params: list[Any] = [d.key for d in dirs]
    if not include_archived:
        where.append("m.status = 'active'")
    _type_and_tag_filters(where, params, types, tags)
    found: list[tuple[str, str, int, float]] = []
    at, step = 0, max(int(limit) * OVERFETCH, 1)
    while at < len(ranked):
        chunk = ranked[at:at + step]
        at += len(chunk)
        rank = dict(chunk)
        found += [(r[1], r[2], r[0], rank[r[0]]) for r in conn.execute(
            f"SELECT m.rowid, m.dir, m.file FROM memories m WHERE m.rowid IN "
            f"({','.join('?' * len(chunk))}) AND {' AND '.join(where)}",
            [*rank, *params])]
        # Enough once the next match ranks below the last kept one (no tie left out).
        if len(found) >= limit and (at >= len(ranked) or ranked[at][1] > sorted(
                f[3] for f in found)[int(limit) - 1]):
            break
        step *= 2
    found.sort(key=lambda f: (f[3], f[1]))
    if len(ranked) >= RANKED_CAP and (len(found) < limit or found[int(limit) - 1][3]
                                      >= ranked[-1][1]):
        # The pass was cut short where the pool needs more (or a tie may go on): every match.
        return [(r["dir"], r["file"], r["rowid"], r["rank"]) for r in best_matches(
            conn, fts, dirs, types=types, tags=tags, include_archived=include_archived,
            limit=limit, whole=False)]
    return found[:int(limit)]


def run_search(conn: sqlite3.Connection, query: str, dirs: Sequence[MemoryDir], *,
               types: Sequence[str], tags: Sequence[str] | None, include_archived: bool,
               paths: Sequence[str] | None, limit: int, at: datetime,
               dates: bool = True) -> list[Hit]:
    """BM25 candidates from FTS5, scored on the scale (lexical evidence, then strength). With
    ``paths``, the globs filter the candidates in Python, so the pool grows (four times at a
    go) until ``limit`` pass or every match has been looked at. ``dates=False``: a memory
    matching only in its date words is no hit, and its date words add nothing to its match
    (:data:`OWN_COLUMNS`)."""
    fts = fts_query(query)
    if fts is None or not dirs:
        return []
    if not dates:
        fts = own_words(fts)
    ideal = idf_total(conn, query)
    pool = max(limit * 4, 40) if not paths else max(limit * 20, 200)
    taxonomies = {d.key: d.taxonomy for d in dirs}
    while True:
        rows = best_matches(conn, fts, dirs, types=types, tags=tags,
                            include_archived=include_archived, limit=pool)
        hits = []
        for row in rows:
            memory = row_to_memory(row)
            if paths and not glob_matches(memory.paths, paths):
                continue
            match = lexical_evidence(-float(row["rank"]), ideal)
            power = strength(memory, taxonomies.get(row["dir"]), at)
            hits.append(Hit(memory, scored(match, power), match, power))
        if not paths or len(hits) >= limit or len(rows) < pool:
            break
        pool *= 4
    hits.sort(key=lambda h: (-h.score, h.memory.file))
    return hits[:limit]


def list_memories(index: Index, dirs: Sequence[MemoryDir], *, types: Sequence[str],
                  tags: Sequence[str] | None, status: str, paths: Sequence[str] | None,
                  limit: int | None, order: str) -> list[Memory]:
    """Memories of ``dirs`` matching the filters (canonical ``types``), in one order."""
    if not dirs:
        return []
    where = [f"m.dir IN ({','.join('?' * len(dirs))})"]
    params: list[Any] = [d.key for d in dirs]
    if status != "all":
        if status not in ("active", "archived"):
            raise InvalidMemoryError(f"unknown status {status!r}",
                                     "use active, archived or all")
        where.append("m.status = ?")
        params.append(status)
    _type_and_tag_filters(where, params, types, tags)
    orders = {"relevance": "m.relevance DESC, m.updated DESC",
              "recent": "m.created DESC, m.rowid DESC, m.updated DESC",
              "updated": "m.updated DESC", "name": "m.name"}
    if order not in orders:
        raise InvalidMemoryError(f"unknown order {order!r}", f"use one of {', '.join(orders)}")
    tail = f"ORDER BY {orders[order]}, m.file"
    if limit is not None and not paths:
        tail += f" LIMIT {int(limit)}"
    found = index.select(" AND ".join(where), params, tail)
    if paths:
        found = [m for m in found if glob_matches(m.paths, paths)][:limit]
    return found
