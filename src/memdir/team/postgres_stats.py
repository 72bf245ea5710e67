"""``stats`` of the PostgreSQL store: counts, strength bands and usefulness, in the shape of
the SQLite store's (:class:`memdir.core.model.Stats`, :mod:`memdir.core.usefulness`).

Invariants: strength is :func:`memdir.core.strength.strength_of` on the row's counters, exactly as
the SQLite store's Python and SQL compute it; usefulness is built by
:func:`memdir.core.usefulness.usefulness` from per-memory counts (injections are the rows of
``recall_surfaced`` used or checked), so both stores report one shape.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from memdir.core.model import SCOPES, Stats
from memdir.core.strength import strength_of, type_factors
from memdir.core.usefulness import NEVER_USED_AFTER, Counts, MemoryUse, usefulness
from memdir.team.postgres_conn import redact
from memdir.upkeep.report import STRENGTH_BINS

if TYPE_CHECKING:
    from memdir.team.postgres import PostgresStore

__all__ = ["stats"]


def stats(store: PostgresStore) -> Stats:
    with store.connections.db() as conn:
        rows = conn.execute(
            "SELECT m.id, m.name, m.type, m.scope, m.status, m.relevance, m.reinforced, "
            "m.access_count, m.used_count, GREATEST(m.updated, COALESCE(m.last_accessed, "
            "m.updated)) AS anchor, COALESCE(s.n, 0) AS injected FROM memories m LEFT JOIN "
            "(SELECT id, count(*) AS n FROM recall_surfaced WHERE used IS NOT NULL OR "
            "checked = 1 GROUP BY id) s ON s.id = m.id"
        ).fetchall()
    at = store.clock()
    bands = {label: 0 for _, label in STRENGTH_BINS}
    for r in rows:
        if r["status"] != "active":
            continue
        weight, half_life = type_factors(store.taxonomy, r["type"])
        value = strength_of(weight, half_life, r["relevance"],
                            (at - r["anchor"]).total_seconds() / 86400.0, r["access_count"],
                            max(0, r["reinforced"]) + r["used_count"])
        bands[next(label for bound, label in STRENGTH_BINS if value < bound)] += 1
    counts = {key: Counter(r[key] for r in rows) for key in ("type", "scope", "status")}
    return Stats(
        total=len(rows),
        by_type=dict(counts["type"].most_common()),
        by_scope=dict(counts["scope"].most_common()),
        by_status=dict(counts["status"].most_common()),
        never_accessed=sum(1 for r in rows if not r["access_count"]), broken_files=0,
        directories={"postgresql": redact(store.dsn)}, index_path=f"postgresql:{store.schema}",
        taxonomy=dict.fromkeys(SCOPES, store.taxonomy.preset), strength=bands,
        usefulness=usefulness(
            [(scope, Counts(sum(r["access_count"] for r in rows if r["scope"] == scope),
                            sum(r["injected"] for r in rows if r["scope"] == scope),
                            sum(r["used_count"] for r in rows if r["scope"] == scope)))
             for scope in counts["scope"]],
            (MemoryUse(r["id"], r["name"], r["type"], r["scope"], r["status"],
                       r["access_count"], r["injected"], r["used_count"],
                       max(0, r["reinforced"])) for r in rows
             if r["used_count"] or r["reinforced"] > 0 or r["injected"] >= NEVER_USED_AFTER)))
