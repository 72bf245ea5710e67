"""The index's schema: named, ordered migrations (:mod:`memdir.core.index_migrations`), applied
once each and recorded in ``schema_migrations``, and the SQL functions they and the index use.

Invariants:
- A migration is never edited once released: a change to the schema is a new migration at
  the end, so every index, however old, reaches the same schema.
- Migrations run in one ``BEGIN IMMEDIATE`` transaction: two processes opening an old index
  at once apply them once, and a failure leaves the index as it was.
- Rows of ``memories`` are derived from the files; a migration may drop them (the next
  reconcile rebuilds them) but never the ``usage`` table, which is not derived.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

from memdir.core.index_migrations import MIGRATIONS
from memdir.core.model import format_time, now

__all__ = ["MIGRATIONS", "math_functions", "migrate", "statements"]


def _log(base: float | None) -> Callable[[Any], float | None]:
    def log(x: Any) -> float | None:  # as SQLite's: NULL outside the domain
        if x is None or float(x) <= 0:
            return None
        return math.log(float(x)) if base is None else math.log(float(x), base)
    return log


def _exp(x: Any) -> float | None:
    if x is None:
        return None
    try:
        return math.exp(float(x))
    except OverflowError:
        return math.inf


def math_functions(conn: sqlite3.Connection) -> None:
    """SQLite builds without the math functions (the strength key, the ranking and the
    migrations that compute them) get Python ones: the same results, slower."""
    try:
        conn.execute("SELECT pow(2, 3), ln(2), log2(2), exp(1)").fetchone()
    except sqlite3.OperationalError:
        conn.create_function("pow", 2, lambda a, b: float(a) ** float(b), deterministic=True)
        conn.create_function("ln", 1, _log(None), deterministic=True)
        conn.create_function("log2", 1, _log(2.0), deterministic=True)
        conn.create_function("exp", 1, _exp, deterministic=True)


def _norm_hash_v1(body: str) -> str:
    """norm_hash before migration 21: case and whitespace folded only."""
    import hashlib

    return hashlib.sha1(" ".join(body.lower().split()).encode("utf-8")).hexdigest()


def statements(sql: str) -> Iterator[str]:
    """Split a script into complete statements (trigger bodies contain ';' themselves)."""
    buffer = ""
    for line in sql.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""


def migrate(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied TEXT NOT NULL)"
    )
    done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
    if len(done) == len(MIGRATIONS):
        return
    from memdir.core.listing import index_line  # listing's lines are the rows': not at the top
    from memdir.core.store import norm_hash  # store imports the index: here, not at the top

    math_functions(conn)
    conn.create_function("memdir_norm_hash", 1, norm_hash, deterministic=True)
    conn.create_function("memdir_index_line", 4, index_line, deterministic=True)
    conn.create_function("memdir_norm_hash_v1", 1, _norm_hash_v1, deterministic=True)
    conn.execute("BEGIN IMMEDIATE")
    try:
        done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
        for version, (name, sql) in enumerate(MIGRATIONS, start=1):
            if version in done:
                continue
            for statement in statements(sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                (version, name, format_time(now())),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
