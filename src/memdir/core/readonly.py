"""A read-only home: memories are read from the files when the index cannot be written.

A home on a read-only mount, one whose permissions were taken away, or a sandbox that lets
an agent read but not write: search, list, context, recall and the agent's hooks still work.

Invariants:
- Whether the home is read-only is decided once per :class:`~memdir.core.index.Index`, before
  its first connection (:func:`writable`): the index, its WAL files and its folder must all
  be writable, else nothing in the home is written, not even a lock file.
- The index on disk is opened read-only (``mode=ro``; ``immutable=1`` when not even the WAL's
  shared-memory file can be created) and used only if it is current: every schema migration
  applied and its rows matching the files' names, sizes and mtimes. Otherwise the reads use
  an index in memory, built from the files (at most :data:`MAX_FILES` of them) and kept in
  step with them as a writable home's index is.
- No write reaches the home: usage counters and other best-effort writes are skipped, and
  every write (store, update, reindex...) fails with ReadOnlyHomeError before it touches a
  file. MEMORY.md is not regenerated.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from memdir.core import fingerprint as fp
from memdir.core.errors import warn
from memdir.core.index_schema import MIGRATIONS, migrate

if TYPE_CHECKING:
    from memdir.core.index import Index
    from memdir.core.store import MemoryDir

__all__ = ["MAX_FILES", "connection", "memory", "sync", "writable"]

MAX_FILES = 50_000  # files an in-memory index holds, over all directories


def writable(path: Path) -> bool:
    """Whether the index at ``path`` can be written: it, its WAL files (where they exist) and
    its folder (or the nearest folder that exists, where the home is yet to be made)."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not os.access(folder, os.W_OK):
        return False
    return all(os.access(p, os.W_OK) for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"))
               if p.exists())


def _open(path: Path) -> sqlite3.Connection | None:
    if not path.is_file():
        return None
    base = "file:" + quote(str(path.resolve()))
    for uri in (f"{base}?mode=ro", f"{base}?immutable=1"):
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        try:
            done = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
        except sqlite3.Error:
            conn.close()
            continue
        if done != len(MIGRATIONS):
            conn.close()
            return None
        return conn
    return None


def connection(path: Path) -> tuple[sqlite3.Connection, bool]:
    """For a home that cannot be written: the index on disk read-only if it can be opened,
    else an empty index in memory; and whether it is the one in memory."""
    conn = _open(path)
    if conn is not None:
        return conn, False
    return memory(), True


def memory() -> sqlite3.Connection:
    """An empty index in memory, with the current schema."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    migrate(conn)
    return conn


def _current(conn: sqlite3.Connection, dirs: Sequence[MemoryDir]) -> bool:
    from memdir.core.store import _diff

    try:
        for mdir in dirs:
            _, disk = fp.scan(mdir.path)
            changed, gone = _diff(conn, mdir, disk)
            if changed or gone:
                return False
    except sqlite3.Error:
        return False
    return True


def sync(index: Index, dirs: Sequence[MemoryDir]) -> bool:
    """Reads on a read-only home: keep using the index on disk while it matches the files,
    else load the files into the in-memory index (the changes since the last call). True if
    the rows changed."""
    if not index.in_memory:
        if _current(index.conn, dirs):
            return False
        index.use_memory()
    from memdir.core.store import _apply, _diff

    conn = index.conn
    budget = MAX_FILES - conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    changed_any = False
    conn.execute("BEGIN")
    try:
        for mdir in dirs:
            _, disk = fp.scan(mdir.path)
            changed, gone = _diff(conn, mdir, disk)
            for name in gone:
                conn.execute("DELETE FROM memories WHERE dir = ? AND file = ?", (mdir.key, name))
                conn.execute("DELETE FROM broken WHERE dir = ? AND file = ?", (mdir.key, name))
            budget += len(gone)
            if len(changed) > budget:
                warn("memdir: the home is read-only and %s holds more memory files than the "
                     "%d read into memory; %d are left out (hint: make the home writable so "
                     "that its index can be used)", mdir.path, MAX_FILES, len(changed) - budget)
                changed = changed[:max(budget, 0)]
            budget -= len(changed)
            _apply(index, conn, mdir, changed)
            changed_any = changed_any or bool(changed or gone)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return changed_any
