"""Connections to the PostgreSQL store, and its rows as Memory values.

Invariants:
- One connection per thread (``threading.local``), in autocommit mode with explicit
  transactions, ``search_path`` set to the store's schema and the time zone to UTC. The HTTP
  server's thread pool is bounded, so the number of connections is too; ``close`` closes
  every one of them. A connection found closed or broken is replaced on its next use, so a
  database restart costs one failed call, not the process.
- Driver errors never leave :meth:`Connections.db`: a value PostgreSQL cannot hold (a NUL
  byte) becomes :class:`InvalidMemoryError`, anything else :class:`DatabaseError` with a hint.
  Error messages and stats show the connection string without its password (:func:`redact`).
- Rows and memories convert one way each (:func:`memory_from_row`, :func:`row_values`);
  ``meta`` is JSON with dates tagged exactly as the SQLite index tags them, so a memory read
  back equals the memory written.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import DictRow, dict_row

from memdir.core.errors import DatabaseError, InvalidMemoryError
from memdir.core.meta_json import decode_meta, encode_meta
from memdir.core.model import Memory, Scope
from memdir.core.store import norm_hash

__all__ = ["COLUMNS", "WRITTEN", "Conn", "Connections", "memory_from_row", "redact",
           "row_values"]

Conn = psycopg.Connection[DictRow]

# What a SELECT returns for a memory (meta as text: decoded with the index's date tags).
COLUMNS = ("id, name, description, type, body, scope, relevance, tags, paths, source, "
           "created, updated, reinforced, status, superseded_by, meta::text AS meta, "
           "access_count, last_accessed, context, date, used_count, last_used")
# What a write sets, in the order of row_values().
WRITTEN = ("id", "name", "description", "type", "body", "scope", "relevance", "tags",
           "paths", "source", "created", "updated", "reinforced", "status", "superseded_by",
           "meta", "access_count", "last_accessed", "norm_hash", "context", "date",
           "used_count", "last_used")


def redact(dsn: str) -> str:
    """The connection string without its password (for stats, logs and error messages)."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "(unparseable connection string)"
    params.pop("password", None)
    if "://" not in dsn:
        return make_conninfo("", **params)
    user = f"{params.pop('user')}@" if params.get("user") else ""
    where = f"{params.pop('host', '')}" + (f":{params.pop('port')}" if "port" in params else "")
    return f"postgresql://{user}{where}/{params.pop('dbname', '')}"


def _utc(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC) if value is not None else None


def memory_from_row(row: DictRow) -> Memory:
    return Memory(
        id=row["id"], name=row["name"], description=row["description"], type=row["type"],
        body=row["body"], scope=cast(Scope, row["scope"]), relevance=row["relevance"],
        tags=tuple(row["tags"]), paths=tuple(row["paths"]), source=row["source"],
        created=row["created"].astimezone(UTC), updated=row["updated"].astimezone(UTC),
        reinforced=row["reinforced"], status=row["status"], superseded_by=row["superseded_by"],
        meta=json.loads(row["meta"], object_hook=decode_meta),
        access_count=row["access_count"], last_accessed=_utc(row["last_accessed"]),
        context=row.get("context") or "", date=row.get("date"),
        used_count=row.get("used_count") or 0, last_used=_utc(row.get("last_used")))


def row_values(m: Memory) -> tuple[Any, ...]:
    """The values of :data:`WRITTEN` for a memory."""
    meta = json.dumps(dict(m.meta), default=encode_meta)
    return (m.id, m.name, m.description, m.type, m.body, m.scope, m.relevance, list(m.tags),
            list(m.paths), m.source, m.created, m.updated, m.reinforced, m.status,
            m.superseded_by, meta, m.access_count, m.last_accessed, norm_hash(m.body),
            m.context, m.date, m.used_count, m.last_used)


class Connections:
    """The connections of one store: one per thread, all closed together."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn, self.schema = dsn, schema
        self._local = threading.local()
        self._all: list[Conn] = []
        self._lock = threading.Lock()

    def _conn(self) -> Conn:
        conn: Conn | None = getattr(self._local, "conn", None)
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        try:
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=10,
                                   row_factory=dict_row)
        except psycopg.Error as exc:
            raise DatabaseError(f"cannot connect to PostgreSQL at {redact(self.dsn)}: "
                                f"{str(exc).strip()}") from None
        with self._lock:
            self._all.append(conn)
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        conn.execute("SET TIME ZONE 'UTC'")
        self._local.conn = conn
        return conn

    @contextlib.contextmanager
    def db(self) -> Iterator[Conn]:
        """This thread's connection; driver errors become memdir errors."""
        try:
            yield self._conn()
        except psycopg.DataError as exc:
            raise InvalidMemoryError(f"the database refused a value: {str(exc).strip()}",
                                     "remove control characters (NUL bytes) from the text"
                                     ) from None
        except psycopg.Error as exc:
            raise DatabaseError(f"PostgreSQL at {redact(self.dsn)} failed: "
                                f"{str(exc).strip()}") from None

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(psycopg.Error):
                conn.close()
