"""The SQLite index: connection settings, schema migrations, rows <-> memories, usage counters.

Invariants:
- One function (:func:`connect`) configures every connection: WAL, ``busy_timeout``,
  ``synchronous=NORMAL``, foreign keys. Writes go through :meth:`Index.write`, which opens
  ``BEGIN IMMEDIATE`` so concurrent writers queue instead of failing mid-transaction.
- Schema changes are named, ordered migrations (:mod:`memdir.core.index_schema`), applied when a
  connection is first opened.
- The ``memories`` table and its FTS5 mirror are derived from the files and can be rebuilt at
  any time. FTS5 also indexes each memory's search context and its days as words
  (:func:`memdir.core.model.date_words` of ``created`` and ``date``), which nothing shows. The
  ``usage`` table is not derived: it is keyed by (directory, memory id) so it survives a
  rebuild, a rename and a reclassify. It counts what was *shown* (``access_count``,
  ``last_accessed``: every read that returned the memory) apart from what was *used*
  (``used_count``, ``last_used``: sessions whose agent drew on it, :mod:`memdir.capture.uses`).
- Updating usage never fails a read: it uses a short lock wait; counts that cannot be written
  then are queued in a file of the home (:mod:`memdir.core.usage_queue`) and applied by the next
  write transaction that commits, in any process.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from memdir.core import readonly, usage_queue
from memdir.core.errors import IndexBusyError, IndexCorruptError, ReadOnlyHomeError, note, warn
from memdir.core.index_schema import math_functions, migrate
from memdir.core.listing import index_line
from memdir.core.meta_json import decode_meta, encode_meta, finite
from memdir.core.model import Memory, Scope, date_words, format_time, now, parse_time
from memdir.core.private import strip_private_memory
from memdir.core.strength import boost_sql

__all__ = ["BM25_WEIGHTS", "KEY_HALF_LIFE_DAYS", "MEMORY_COLUMNS", "USAGE_COLUMNS", "Index",
           "busy_timeout_ms", "connect", "set_deadline", "strength_key_sql"]

BUSY_TIMEOUT_MS = 30_000
USAGE_TIMEOUT_MS = 100
# Pages SQLite may keep in memory per connection (KiB; allocated only as pages are read). The
# default 2 MiB is smaller than the pages one bulk write dirties at 10k+ memories (six indexes
# and FTS5): SQLite then spills dirty pages to the WAL mid-transaction and writes them again
# later. 32 MiB: inserting 20,000 rows in one transaction, 1.8 -> 0.6 s of kernel time.
CACHE_KIB = 32 * 1024
DEFER_FTS_ROWS = 32  # from this many inserts on, a write adds its FTS5 rows in one statement
_FTS_COLUMNS = "name, description, body, tags, paths, context, dates"
# name, description, body, tags, paths: description and name weigh most (DESIGN §4); the
# search context and the date words below the body (they help find a memory, they are not
# what it says; bench/quality.py measured the choice).
BM25_WEIGHTS = (6.0, 8.0, 1.0, 4.0, 2.0, 0.5, 0.5)

MEMORY_COLUMNS = (
    "dir", "file", "scope", "id", "name", "description", "type", "body", "relevance", "tags",
    "paths", "source", "created", "updated", "reinforced", "status", "superseded_by", "meta",
    "norm_hash", "mtime_ns", "size", "index_line", "context", "date", "dates",
)
# updated_jd (the strength ranking's number) is computed by SQLite from the updated text the
# row carries, so that it cannot disagree with julianday(updated).
#
# strength_key: a memory's strength with the time it is read at taken out, so that the
# strongest memories are read from an index (memories_strength_key) instead of computing every
# memory's strength at every session start (memdir.retrieval.ranking). For a memory last updated or
# accessed at Julian day t, before now: strength = weight(type) × 2 ** (key − now / 90), where
#   key = log2(relevance × boost(access_count, reinforced + used_count)) + t / 90
# (memdir.core.strength's formula, for the usual 90-day half-life; NULL at relevance 0). SQLite
# computes it in the one statement that writes a row, and when usage changes it
# (:meth:`Index.touch`, :mod:`memdir.capture.uses`, the usage queue).
KEY_HALF_LIFE_DAYS = 90.0
_USAGE_OF = "(SELECT {column} FROM usage WHERE dir = {dir} AND id = {id})"
#: The usage counters read with a memory's row (``u`` is the usage table joined to it).
USAGE_COLUMNS = "u.access_count, u.last_accessed, u.used_count, u.last_used"


def strength_key_sql(dir: str, id: str, relevance: str, reinforced: str, updated_jd: str) -> str:
    """The strength key of one row as SQL, from SQL expressions for its columns (and its
    usage)."""
    uses = f"max(0, {reinforced})"
    counted = _USAGE_OF.format(column=boost_sql("access_count", f"{uses} + used_count"),
                               dir=dir, id=id)
    seen = f"COALESCE({_USAGE_OF.format(column='julianday(last_accessed)', dir=dir, id=id)}, 0)"
    return (f"log2({relevance} * COALESCE({counted}, {boost_sql('0', uses)})) + "
            f"max({updated_jd}, {seen}) / {KEY_HALF_LIFE_DAYS!r}")


def _param(column: str) -> str:
    return f"?{MEMORY_COLUMNS.index(column) + 1}"


_UPSERT = (
    f"INSERT INTO memories ({', '.join(MEMORY_COLUMNS)}, updated_jd, strength_key) "
    f"VALUES ({', '.join('?' * len(MEMORY_COLUMNS))}, julianday({_param('updated')}), "
    + strength_key_sql(_param("dir"), _param("id"), _param("relevance"), _param("reinforced"),
               f"julianday({_param('updated')})")
    + ") ON CONFLICT (dir, file) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}"
                for c in (*MEMORY_COLUMNS[2:], "updated_jd", "strength_key")))
_REKEY = ("UPDATE memories SET strength_key = "
          + strength_key_sql("memories.dir", "memories.id", "relevance", "reinforced",
                             "updated_jd")
          + " WHERE dir = ? AND id = ?")

# A time.monotonic() value by which this process must be done waiting for the write lock
# (None: wait up to BUSY_TIMEOUT_MS). Hook processes set it: the alarm that enforces their
# time limit cannot interrupt SQLite's busy wait, which would hold a hook for 30 s.
_deadline: float | None = None


def set_deadline(at: float | None) -> None:
    """Cap every wait for the index's write lock at ``at`` (``time.monotonic()``), or lift
    the cap (None). Waits past it end in IndexBusyError."""
    global _deadline
    _deadline = at


def busy_timeout_ms() -> int:
    """How long the next wait for the write lock may last, in milliseconds."""
    if _deadline is None:
        return BUSY_TIMEOUT_MS
    return max(0, min(BUSY_TIMEOUT_MS, int((_deadline - time.monotonic()) * 1000)))


def connect(path: Path) -> sqlite3.Connection:
    """Open the index with memdir's settings. The only place a connection is configured."""
    path.parent.mkdir(parents=True, exist_ok=True)
    wait_ms = busy_timeout_ms()
    conn = sqlite3.connect(path, timeout=wait_ms / 1000, isolation_level=None,
                           check_same_thread=False)
    conn.row_factory = sqlite3.Row
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        try:
            conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            conn.execute("PRAGMA foreign_keys = ON")
            math_functions(conn)
            return conn
        except sqlite3.OperationalError as exc:
            # Opening while another process checkpoints or recovers the WAL can answer
            # "locked" without consulting the busy handler: that is contention, not damage.
            locked = "locked" in str(exc)
            if locked and time.monotonic() < deadline:
                time.sleep(0.02)
                continue
            conn.close()
            if locked:
                raise IndexBusyError(f"the index {path} stayed locked: {exc}") from None
            raise IndexCorruptError(f"cannot open the index {path}: {exc}") from None
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise IndexCorruptError(f"cannot open the index {path}: {exc}") from None


def _read_settings(conn: sqlite3.Connection) -> sqlite3.Connection:
    """memdir's settings for a connection that is never written through (a read-only home's
    index, read-only or in memory: memdir.core.readonly)."""
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms()}")
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    math_functions(conn)
    return conn


def memory_to_row(memory: Memory, directory: str, norm_hash: str, mtime_ns: int,
                  size: int) -> tuple[Any, ...]:
    """The index row of a memory: never a ``<private>`` span (a hand-written file may hold
    one), so nothing that reads the index can show it."""
    memory = strip_private_memory(memory)
    return (
        directory, memory.file, memory.scope, memory.id, memory.name, memory.description,
        memory.type, memory.body, memory.relevance, json.dumps(list(memory.tags)),
        json.dumps(list(memory.paths)), memory.source, format_time(memory.created),
        format_time(memory.updated), memory.reinforced, memory.status, memory.superseded_by,
        json.dumps(finite(dict(memory.meta)), default=encode_meta), norm_hash, mtime_ns, size,
        index_line(memory.name, memory.file, memory.type, memory.description),
        memory.context, memory.date.isoformat() if memory.date else None,
        date_words(memory.created, memory.date),
    )


_dir_path = lru_cache(maxsize=256)(Path)  # a directory's Path, parsed once


def _list(value: str) -> tuple[Any, ...]:
    return () if value == "[]" else tuple(json.loads(value))  # most memories: no tags, paths


def row_to_memory(row: sqlite3.Row) -> Memory:
    keys = row.keys()
    last = row["last_accessed"] if "last_accessed" in keys else None
    meta = row["meta"]
    return Memory(
        id=row["id"], name=row["name"], description=row["description"], type=row["type"],
        body=row["body"], scope=_scope(row["scope"]), relevance=row["relevance"],
        tags=_list(row["tags"]), paths=_list(row["paths"]),
        source=row["source"], created=parse_time(row["created"]) or now(),
        updated=parse_time(row["updated"]) or now(), reinforced=row["reinforced"],
        status=row["status"], superseded_by=row["superseded_by"],
        meta={} if meta == "{}" else json.loads(meta, object_hook=decode_meta),
        path=_dir_path(row["dir"]).joinpath(row["file"]),
        context=row["context"] if "context" in keys else "",
        date=dt.date.fromisoformat(row["date"]) if "date" in keys and row["date"] else None,
        access_count=(row["access_count"] or 0) if "access_count" in keys else 0,
        last_accessed=parse_time(last) if last else None,
        used_count=(row["used_count"] or 0) if "used_count" in keys else 0,
        last_used=parse_time(row["last_used"]) if "last_used" in keys and row["last_used"]
        else None,
    )


def _scope(value: str) -> Scope:
    if value == "user":
        return "user"
    if value == "team":
        return "team"
    return "project"


class Index:
    """The index database of one home. Cheap to create; connects on first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        # A home that cannot be written (memdir.core.readonly): decided at the first connection.
        self.read_only = False
        self.in_memory = False  # read-only, and the rows are in memory, read from the files

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None and (self.read_only or not readonly.writable(self.path)):
            if not self.read_only:
                warn("memdir: %s cannot be written: memories are read from the files, and "
                     "nothing is stored or counted (hint: make the folder writable, e.g. "
                     "`chmod -R u+w %s` or a read-write mount, or set MEMDIR_HOME to a "
                     "writable folder)", self.path.parent, self.path.parent)
            self.read_only = True
            conn, self.in_memory = readonly.connection(self.path)
            self._conn = _read_settings(conn)
        if self._conn is None:
            conn = connect(self.path)
            try:
                migrate(conn)
            except sqlite3.DatabaseError as exc:
                conn.close()
                raise IndexCorruptError(f"the index {self.path} is unreadable: {exc}") from None
            self._conn = conn
        return self._conn

    @property
    def queue_path(self) -> Path:
        """Where reads queue the usage counts they could not write (memdir.core.usage_queue)."""
        return self.path.parent / usage_queue.QUEUE_NAME

    def use_memory(self) -> None:
        """A read-only home whose index on disk is out of date: read from an empty index in
        memory from now on (memdir.core.readonly.sync fills it)."""
        self.close()
        self._conn = _read_settings(readonly.memory())
        self.in_memory = True

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextlib.contextmanager
    def write(self, wait_ms: int | None = None) -> Iterator[sqlite3.Connection]:
        """A write transaction: BEGIN IMMEDIATE ... COMMIT, rolled back on any error.
        ``wait_ms``: wait at most this long for the lock (else up to the busy timeout).
        ReadOnlyHomeError, before anything is written, when the home cannot be written."""
        conn = self.conn
        if self.read_only:
            home = self.path.parent
            raise ReadOnlyHomeError(
                f"the memory home {home} cannot be written (a read-only mount, or no write "
                "permission); nothing was changed",
                f"make it writable (`chmod -R u+w {home}`, or mount it read-write), or set "
                "MEMDIR_HOME to a writable folder; reading works meanwhile")
        try:
            if wait_ms is not None or _deadline is not None:
                wait = busy_timeout_ms() if wait_ms is None else min(wait_ms, busy_timeout_ms())
                conn.execute(f"PRAGMA busy_timeout = {wait}")
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise IndexBusyError(f"the index {self.path} stayed locked: {exc}") from None
        try:
            yield conn
            with usage_queue.drained(self.queue_path, conn, _REKEY):  # counts queued by reads
                conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # a failed COMMIT leaves the transaction open, too
                conn.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def deferred_fts(self, conn: sqlite3.Connection, rows: int) -> Iterator[None]:
        """Inside a write transaction, for a block about to insert ``rows`` memories: from
        ``DEFER_FTS_ROWS`` on, the rows it inserts reach FTS5 in one statement at its end
        (half the cost of one FTS5 insert per row), as the block left them. Rows that were
        there before are kept in FTS5 row by row, as always.

        If the block raises, nothing is undone here: the transaction is rolling back, and
        the flag and the pending list go with it (they are never committed)."""
        if rows < DEFER_FTS_ROWS:
            yield
            return
        assert conn.in_transaction, "deferred_fts runs inside Index.write()"
        conn.execute("INSERT INTO fts_deferred (one) VALUES (1)")
        yield
        conn.execute("DELETE FROM fts_deferred")
        conn.execute(f"INSERT INTO memories_fts (rowid, {_FTS_COLUMNS}) "
                     f"SELECT rowid, {_FTS_COLUMNS} FROM memories "
                     "WHERE rowid IN (SELECT row FROM fts_pending)")
        conn.execute("DELETE FROM fts_pending")

    def upsert(self, conn: sqlite3.Connection, row: Sequence[Any]) -> None:
        self.upsert_many(conn, (row,))

    def upsert_many(self, conn: sqlite3.Connection, rows: Iterable[Sequence[Any]]) -> None:
        conn.executemany(_UPSERT, rows)

    def select(self, where: str = "1", params: Sequence[Any] = (), tail: str = "") -> list[Memory]:
        rows = self.conn.execute(
            f"SELECT m.*, {USAGE_COLUMNS} FROM memories m "
            "LEFT JOIN usage u ON u.dir = m.dir AND u.id = m.id "
            f"WHERE {where} {tail}",
            tuple(params),
        ).fetchall()
        return [row_to_memory(r) for r in rows]

    def touch(self, memories: Iterable[Memory]) -> None:
        """Count a retrieval of each memory. Never raises: usage must not fail a read. When
        the index stays locked, the counts are queued for the next write (debug log only:
        a library user's stderr stays quiet)."""
        items = [(str(m.path.parent), m.id) for m in memories if m.path is not None]
        if items and not self.read_only:  # a read-only home counts nothing (memdir.core.readonly)
            stamp = format_time(now())
            failed = self._try_write(
                "INSERT INTO usage (dir, id, access_count, last_accessed) VALUES (?, ?, 1, ?) "
                "ON CONFLICT (dir, id) DO UPDATE SET access_count = access_count + 1, "
                "last_accessed = excluded.last_accessed",
                [(d, i, stamp) for d, i in items],
                then=(_REKEY, items))  # their strength key counts the access
            if failed is not None:
                queued = usage_queue.append(self.queue_path, items, stamp)
                note("memdir: usage counters not updated yet (%s); %s", failed,
                     "queued for the next write" if queued else "lost")

    def count_uses(self, session_id: str, places: Sequence[tuple[str, str]], stamp: str) -> int:
        """Count one use of each memory at ``places`` (directory, id) injected into the session
        and not counted as used in it yet (:mod:`memdir.capture.uses`); how many were counted."""
        counted = 0
        with self.write() as conn:
            for place in places:
                if conn.execute("UPDATE recall_surfaced SET used = ? WHERE session_id = ? AND "
                                "dir = ? AND id = ? AND used IS NULL",
                                (stamp, session_id, *place)).rowcount:
                    conn.execute(
                        "INSERT INTO usage (dir, id, used_count, last_used) VALUES (?, ?, 1, ?) "
                        "ON CONFLICT (dir, id) DO UPDATE SET used_count = used_count + 1, "
                        "last_used = excluded.last_used", (*place, stamp))
                    conn.execute(_REKEY, place)
                    counted += 1
        return counted

    def try_write(self, sql: str, rows: Sequence[Sequence[Any]], what: str, *,
                  then: tuple[str, Sequence[Sequence[Any]]] | None = None) -> bool:
        """A small write on a read path: waits briefly for the lock, logs instead of raising.
        ``then``: a second statement and its rows, in the same transaction."""
        if self.read_only:
            return False  # said once, when the home was found read-only
        failed = self._try_write(sql, rows, then=then)
        if failed is not None:
            warn("memdir: %s (%s); the read succeeded", what, failed)
        return failed is None

    def _try_write(self, sql: str, rows: Sequence[Sequence[Any]], *,
                   then: tuple[str, Sequence[Sequence[Any]]] | None = None) -> Exception | None:
        """The write of :meth:`try_write`; the error that stopped it, or None."""
        conn = self.conn
        try:
            with self.write(wait_ms=USAGE_TIMEOUT_MS) as tx:
                tx.executemany(sql, rows)
                if then is not None:
                    tx.executemany(*then)
            return None
        except (sqlite3.Error, IndexBusyError) as exc:
            return exc
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms()}")
