"""Query sanitising, strength, ranking and path globs.

Invariants:
- :func:`fts_query` turns *any* string into a valid FTS5 query or None: every token is a
  quoted phrase made only of word characters, joined with OR, so no input can raise an FTS5
  syntax error (checked by a fuzz test).
- Strength (seed 002) = type weight × relevance × decay × reinforcement, where decay halves
  every 90 days since the last access or reinforcement (30 days for temporary types) and
  reinforcement grows with the logarithm of explicit reinforcements plus accesses.
- Ranking multiplies BM25 match quality by a *bounded* strength factor in [0.75, 1.25], so an
  old but exact match still beats a fresh weak one.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from memdir.errors import InvalidMemoryError
from memdir.index import BM25_WEIGHTS, row_to_memory
from memdir.model import Hit, Memory, now
from memdir.taxonomy import Taxonomy

if TYPE_CHECKING:
    from memdir.index import Index
    from memdir.store import MemoryDir

__all__ = [
    "HALF_LIFE_DAYS",
    "OVERFETCH",
    "STOPWORDS",
    "best_matches",
    "fts_query",
    "glob_matches",
    "list_memories",
    "rank_factor",
    "run_search",
    "strength",
    "strength_of",
    "type_factors",
]

HALF_LIFE_DAYS = 90.0
TEMPORARY_HALF_LIFE_DAYS = 30.0
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


def fts_query(text: str) -> str | None:
    """A safe FTS5 query for free text: an OR of quoted tokens; None when nothing is left."""
    tokens: list[str] = []
    for raw in _TOKEN.findall(text.lower()):
        token = raw.strip("_")
        if token and token not in tokens:
            tokens.append(token)
    content = [t for t in tokens if t not in STOPWORDS]
    chosen = (content or tokens)[:MAX_QUERY_TOKENS]
    if not chosen:
        return None
    terms = dict.fromkeys(v for t in chosen for v in _variants(t))
    return " OR ".join(f'"{t}"' for t in terms)


def type_factors(taxonomy: Taxonomy | None, type_name: str) -> tuple[float, float]:
    """(type weight, decay half-life in days) of a type; unknown types get modest defaults."""
    spec = taxonomy.lookup(type_name) if taxonomy else None
    weight = spec.weight if spec else 0.7
    return weight, TEMPORARY_HALF_LIFE_DAYS if spec and spec.temporary else HALF_LIFE_DAYS


def strength_of(weight: float, half_life: float, relevance: float, days: float,
                uses: int) -> float:
    """The strength formula on plain numbers: ``days`` since the last access or
    reinforcement, ``uses`` = explicit reinforcements + accesses."""
    decay = 0.5 ** (max(0.0, days) / half_life)
    return float(weight * relevance * decay * (1.0 + 0.25 * math.log1p(max(0, uses))))


def strength(memory: Memory, taxonomy: Taxonomy | None, at: datetime | None = None) -> float:
    weight, half_life = type_factors(taxonomy, memory.type)
    anchor = memory.updated
    if memory.last_accessed and memory.last_accessed > anchor:
        anchor = memory.last_accessed
    days = ((at or now()) - anchor).total_seconds() / 86400.0
    return strength_of(weight, half_life, memory.relevance, days,
                       memory.reinforced + memory.access_count)


def rank_factor(strength_value: float) -> float:
    """The bounded multiplier strength applies to match quality: 0.75 (dead) .. 1.25 (strong)."""
    return 0.75 + 0.5 * min(max(strength_value, 0.0), 1.0)


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
    with their usage counters, or with ``whole=False`` only ``dir`` and ``file``.

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
    columns = "m.*, u.access_count, u.last_accessed" if whole else "m.dir, m.file"
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


def run_search(conn: sqlite3.Connection, query: str, dirs: Sequence[MemoryDir], *,
               types: Sequence[str], tags: Sequence[str] | None, include_archived: bool,
               paths: Sequence[str] | None, limit: int, at: datetime) -> list[Hit]:
    """BM25 candidates from FTS5, re-ranked by match × bounded strength factor. With
    ``paths``, the globs filter the candidates in Python, so the pool grows (four times at a
    go) until ``limit`` pass or every match has been looked at."""
    fts = fts_query(query)
    if fts is None or not dirs:
        return []
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
            match = -float(row["rank"])
            power = strength(memory, taxonomies.get(row["dir"]), at)
            hits.append(Hit(memory, match * rank_factor(power), match, power))
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
