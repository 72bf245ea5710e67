"""Ranking active memories by strength inside SQLite, for session-start context (layers B
and C) and ``memdir stats``' histogram.

:func:`memdir.core.strength.strength` written as one SQL expression (type weight × relevance ×
half-life decay from the last update or access × the bounded boost of uses and shows), so
SQLite ranks a large store in C, and Python sees only the best ``POOL`` rows. It does not
even compute every memory's strength: each row carries a time-free ``strength_key``
(:func:`memdir.core.index.strength_key_sql`) in an index, with strength = weight × 2 ** (key − now /
90) for the usual half-life, so the strongest are read in key order (:func:`_strongest`).

Invariants: the SQL gives the same value as ``strength()`` for every memory
(``tests/test_context.py``); the pool is exactly the ``POOL`` strongest, as if every strength
had been computed (``tests/test_ranking.py``), memories dated in the future included; only
active memories of the directories asked for are ranked; a memory whose ``paths`` globs cover
a file at hand is multiplied by ``PATH_BOOST`` wherever it ranks.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memdir.core.index import KEY_HALF_LIFE_DAYS
from memdir.core.strength import HALF_LIFE_DAYS, TEMPORARY_HALF_LIFE_DAYS, boost_sql
from memdir.core.taxonomy import TypeSpec
from memdir.retrieval.search import glob_matches

if TYPE_CHECKING:
    from memdir.core.store import MemoryDir

__all__ = ["JOIN", "PATH_BOOST", "POOL", "Ranked", "Ranking", "active_strengths",
           "active_where", "types_of"]

PATH_BOOST = 1.5
POOL = 400  # candidates ranked per layer; more never fit an injection budget
_OTHER_WEIGHT = 0.7  # a type the taxonomy does not know (a hand-edited file)


def active_where(dirs: Sequence[MemoryDir]) -> tuple[str, list[Any]]:
    return (f"m.dir IN ({','.join('?' * len(dirs))}) AND m.status = 'active'",
            [d.key for d in dirs])


JOIN = "FROM memories m LEFT JOIN usage u ON u.dir = m.dir AND u.id = m.id"
# The same rows read in key order (status, then strength key: the strongest first).
_BY_KEY = JOIN.replace("memories m", "memories m INDEXED BY memories_strength_key")


def types_of(dirs: Sequence[MemoryDir], test: Callable[[TypeSpec], bool]) -> tuple[str, list[Any]]:
    """An SQL condition: the memory's type (in its directory's taxonomy) passes ``test``."""
    if len({d.taxonomy.preset for d in dirs}) == 1:  # the usual case: no need to test m.dir
        names = [t.name for t in dirs[0].taxonomy.types if test(t)]
        return (f"m.type IN ({','.join('?' * len(names))})" if names else "0"), names
    parts, params = [], []
    for d in dirs:
        names = [t.name for t in d.taxonomy.types if test(t)]
        if names:
            parts.append(f"(m.dir = ? AND m.type IN ({','.join('?' * len(names))}))")
            params.extend([d.key, *names])
    return (f"({' OR '.join(parts)})" if parts else "0"), params


def _weighs(weight: float) -> Callable[[TypeSpec], bool]:
    return lambda spec: spec.weight == weight


def _strength_sql(dirs: Sequence[MemoryDir], at: datetime) -> tuple[str, list[Any]]:
    """search.strength() as one SQL expression, so SQLite ranks a large store in C."""
    weights, params = [], []
    for weight in sorted({t.weight for d in dirs for t in d.taxonomy.types}):
        cond, cparams = types_of(dirs, _weighs(weight))
        weights.append(f"WHEN {cond} THEN {weight!r}")
        params.extend(cparams)
    weight_sql = (f"(CASE {' '.join(weights)} ELSE {_OTHER_WEIGHT!r} END)" if weights
                  else repr(_OTHER_WEIGHT))
    temporary, tparams = types_of(dirs, lambda t: t.temporary)
    boost = boost_sql("COALESCE(u.access_count, 0)",
                      "max(0, m.reinforced) + COALESCE(u.used_count, 0)")
    expr = (f"{weight_sql} * m.relevance * pow(0.5, max(0.0, ? - max(m.updated_jd, "
            f"COALESCE(julianday(u.last_accessed), 0))) / (CASE WHEN {temporary} THEN "
            f"{TEMPORARY_HALF_LIFE_DAYS} ELSE {HALF_LIFE_DAYS} END)) * {boost}")
    return expr, [*params, _julian(at), *tparams]


def active_strengths(conn: sqlite3.Connection, dirs: Sequence[MemoryDir],
                     at: datetime) -> list[float]:
    """The strength of every active memory of ``dirs`` (``memdir stats``' histogram)."""
    if not dirs:
        return []
    where, params = active_where(dirs)
    expr, sparams = _strength_sql(dirs, at)
    return [float(r[0]) for r in conn.execute(f"SELECT {expr} {JOIN} WHERE {where}",
                                              [*sparams, *params])]


Ranked = list[tuple[int, float, bool]]


def _query(expr: str, where: str, procedural: bool, tail: str, source: str = JOIN) -> str:
    """(rowid, strength, proven) of the memories matching ``where``, then ``tail``."""
    if not procedural:  # as it is: wrapped in a sub-query, SQLite takes 2 ms longer at 10k
        return f"SELECT m.rowid, {expr} AS s, 0 {source} WHERE {where}{tail}"
    inner = f"SELECT m.rowid AS rid, {expr} AS s {source} WHERE {where}{tail}"
    # Whether a procedure is proven lives in its metadata, in the wide row: read it for the
    # best POOL only, so that ranking them stays on the covering index.
    # CAST: a count written as text ("0") would otherwise compare greater than any number.
    return (f"SELECT t.rid, t.s, "
            f"CAST(COALESCE(json_extract(p.meta, '$.success_count'), 0) AS REAL) > 0 "
            f"FROM ({inner}) t JOIN memories p ON p.rowid = t.rid")


def _ranked(conn: sqlite3.Connection, dirs: Sequence[MemoryDir], at: datetime,
            paths: Sequence[str] | None) -> tuple[Ranked, Ranked]:
    """(rowid, strength × path boost, proven) of active memories, strongest first, at most
    ``POOL`` each of the other types (layer B) and of the procedural ones (layer C).

    SQLite computes each strength once (the two queries split the rows by type) and keeps
    the best with a bounded top-k sort; only then does Python look at rows."""
    where, params = active_where(dirs)
    kind, kparams = types_of(dirs, lambda t: t.layer == "procedural")
    expr, sparams = _strength_sql(dirs, at)
    out: list[Ranked] = []
    for procedural in (False, True):
        where_kind = f"{where} AND {'' if procedural else 'NOT '}{kind}"
        args = [*sparams, *params, *kparams]
        found = _strongest(conn, dirs, at, expr, where_kind, args, procedural)
        boosted: set[int] = set()
        if paths:  # memories about the files at hand may rank anywhere: find them all
            candidates = conn.execute(
                f"SELECT m.rowid, m.paths FROM memories m WHERE {where} AND m.paths != '[]' "
                f"AND {'' if procedural else 'NOT '}{kind}", [*params, *kparams]).fetchall()
            boosted = {r for r, globs in candidates if glob_matches(json.loads(globs), paths)}
            missing = [r for r in boosted if r not in found]
            if missing:
                found.update({row[0]: row for row in conn.execute(
                    _query(expr, where_kind, procedural,
                           f" AND m.rowid IN ({','.join('?' * len(missing))})"),
                    [*args, *missing])})
        ranked = [(rowid, float(value) * (PATH_BOOST if rowid in boosted else 1.0),
                   bool(is_proven)) for rowid, value, is_proven in found.values()]
        ranked.sort(key=lambda t: (-t[1], t[0]))
        out.append(ranked)
    return out[0], out[1]


def _strongest(conn: sqlite3.Connection, dirs: Sequence[MemoryDir], at: datetime, expr: str,
               where: str, args: list[Any], procedural: bool) -> dict[int, Any]:
    """The ``POOL`` strongest memories matching ``where`` (rowid -> (rowid, strength,
    proven)): exactly those that computing every strength would keep.

    Memories of types with the key's half-life are read in key order. The first ``POOL``
    give a floor: the weakest of them, ``s_min``, is at most the pool's last strength. Every
    memory's strength is at most ``max_weight × 2 ** (key − now / 90)`` (equal unless it is
    dated in the future), so no memory whose key is below ``log2(s_min / max_weight) + now / 90``
    can be in the pool: the second query computes the strength of only those above (a few
    hundred more at 10k memories). Temporary types (another half-life) are computed in full,
    as is everything when fewer than ``POOL`` memories match or the floor is 0."""
    temporary, tparams = types_of(dirs, lambda t: t.temporary)
    pool = f" ORDER BY s DESC, m.rowid LIMIT {POOL}"
    found = {} if temporary == "0" else {row[0]: row for row in conn.execute(
        _query(expr, f"{where} AND {temporary}", procedural, pool), [*args, *tparams])}
    ranked = f"{where} AND NOT {temporary}"
    weakest, count = conn.execute(
        f"SELECT min(s), count(*) FROM (SELECT {expr} AS s {_BY_KEY} WHERE {ranked} "
        f"ORDER BY m.strength_key DESC LIMIT {POOL})", [*args, *tparams]).fetchone()
    if count < POOL or not weakest or weakest <= 0:
        rows = conn.execute(_query(expr, ranked, procedural, pool), [*args, *tparams])
    else:
        heaviest = max([_OTHER_WEIGHT, *(t.weight for d in dirs for t in d.taxonomy.types)])
        # Less a hair: the key and the strength are computed apart and may differ in the
        # last bits, and a memory exactly at the floor belongs in.
        floor = math.log2(weakest / heaviest) + _julian(at) / KEY_HALF_LIFE_DAYS - 1e-9
        rows = conn.execute(_query(expr, f"{ranked} AND m.strength_key >= ?", procedural, pool,
                                   _BY_KEY), [*args, *tparams, floor])
    found.update({row[0]: row for row in rows})
    if len(found) > POOL:  # temporary and other types together: the strongest of both
        best = sorted(found.values(), key=lambda r: (-float(r[1]), r[0]))[:POOL]
        found = {row[0]: row for row in best}
    return found


class Ranking:
    """:func:`_ranked`, computed on first use: when layer A fills the budget, never."""

    def __init__(self, conn: sqlite3.Connection, dirs: Sequence[MemoryDir], at: datetime,
                 paths: Sequence[str] | None) -> None:
        self._args = (conn, dirs, at, paths)
        self._result: tuple[Ranked, Ranked] | None = None

    def _get(self) -> tuple[Ranked, Ranked]:
        if self._result is None:
            self._result = _ranked(*self._args)
        return self._result

    def other(self) -> Ranked:
        return self._get()[0]

    def procedures(self) -> Ranked:
        return self._get()[1]

    def has_procedures(self) -> bool:
        """Whether any active procedure exists: one indexed query, no ranking."""
        conn, dirs, _, _ = self._args
        where, params = active_where(dirs)
        kind, kparams = types_of(dirs, lambda t: t.layer == "procedural")
        return conn.execute(f"SELECT 1 FROM memories m WHERE {where} AND {kind} LIMIT 1",
                            [*params, *kparams]).fetchone() is not None


def _julian(at: datetime) -> float:
    return at.timestamp() / 86400.0 + 2440587.5
