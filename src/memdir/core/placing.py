"""Placing new memories in a directory: a free file name and id for each, exact duplicates
turned into reinforcements, the files written and their index rows upserted.

Invariants:
- One index write transaction per call (``BEGIN IMMEDIATE`` serialises writers across
  processes), so names, ids and duplicates are decided under the lock and two processes
  never pick the same file name.
- A memory's file is complete on disk before its row is upserted. If anything fails, the
  transaction rolls back and every file this call created is removed: files and index agree.
- A new file never replaces anything: it is placed with a hard link, which fails if another
  program (or another home sharing a team directory) created the name after the listing;
  the call then stores nothing and says so (DuplicateNameError), and rollback removes only
  the files this call itself created.
- Duplicates (same body after :func:`memdir.core.store.normalise`: case, whitespace, trailing
  punctuation, quotes) within the batch or already in the directory reinforce one memory,
  whose file is written once with the final count.
- A batch of ``BULK`` memories or more looks its names, ids and duplicates up with one query
  each instead of one per memory, and adds its FTS5 rows in one statement. The files of a
  batch (of 2 or more) are flushed by one ``sync()`` at the end, not one ``fsync()`` each.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memdir.core import fingerprint as fp
from memdir.core.errors import MemdirError
from memdir.core.files import atomic_write, new_id
from memdir.core.index import Index, memory_to_row
from memdir.core.listing import regenerate_index, touching
from memdir.core.markdown import render
from memdir.core.model import Memory
from memdir.core.new_files import NewFiles
from memdir.core.paths import safe_join
from memdir.core.private import strip_private_memory
from memdir.core.store import (
    MemoryDir,
    file_name,
    first_free,
    load_file,
    name_base,
    name_taken,
    norm_hash,
)

__all__ = ["BULK", "write_new"]

BULK = 32  # from this many memories on, lookups and FTS5 rows are per batch
_CHUNK = 500  # values per IN (...) list, well under SQLite's limit of bound parameters


@dataclass(frozen=True)
class _Placed:
    """A memory to write (a new file, or an existing one reinforced) and its body's hash."""
    memory: Memory
    digest: str

    @property
    def path(self) -> Path:
        assert self.memory.path is not None  # set by _plan for every memory it places
        return self.memory.path


class _Directory:
    """What a directory already holds, as far as placing new memories needs to know.

    For a small call each question is one indexed query; for a batch the answers for all of
    its memories are loaded up front (the directory's file names, as listed on disk, so that
    files the index does not know are never overwritten; the ids and body hashes the batch
    asks about)."""

    def __init__(self, conn: sqlite3.Connection, mdir: MemoryDir, memories: Sequence[Memory],
                 digests: Sequence[str]):
        self.conn, self.mdir = conn, mdir
        self.names: set[str] = set()  # taken by this call (and, for a batch, by anything)
        self.ids: set[str] = set()  # taken by this call, or found in the index
        self.asked: set[str] | None = None  # ids already looked up (a batch)
        self.fresh: list[str] = []  # drawn ids among them, not yet handed out
        self.files: dict[str, str] | None = None  # body hash -> file (a batch)
        if len(memories) < BULK:
            return
        key = mdir.key
        # The disk's names only: a name the index still lists but the disk no longer holds
        # is free (its row is stale, and the upsert of the new file replaces it), and reading
        # every row's name would cost more than the listing (100k memories: 300 ms).
        self.names.update(os.listdir(mdir.path))
        # Ids for the memories that have none are drawn now and looked up with the batch's
        # own: 40 random bits can collide in a large store (birthday bound: about once in 200
        # loads of 100k), so each is checked, but not with one query per memory.
        self.fresh = [new_id() for m in memories if not m.id]
        self.asked = {m.id for m in memories if m.id}.union(self.fresh)
        for chunk in _chunks(sorted(self.asked)):
            self.ids.update(r[0] for r in conn.execute(
                f"SELECT id FROM memories WHERE dir = ? AND id IN ({_marks(chunk)})",
                (key, *chunk)))
        self.files = {}
        for chunk in _chunks(sorted(set(digests))):
            # Active first, so setdefault keeps an active file over an archived one.
            for digest, file in conn.execute(
                    f"SELECT norm_hash, file FROM memories WHERE dir = ? AND norm_hash IN "
                    f"({_marks(chunk)}) ORDER BY status = 'active' DESC, file", (key, *chunk)):
                self.files.setdefault(digest, file)

    def duplicate_of(self, digest: str) -> str | None:
        """The file of a memory of the directory with this body hash, if any."""
        if self.files is not None:
            return self.files.get(digest)
        row = self.conn.execute(
            "SELECT file FROM memories WHERE dir = ? AND norm_hash = ? "
            "ORDER BY status = 'active' DESC LIMIT 1", (self.mdir.key, digest)).fetchone()
        return None if row is None else str(row[0])

    def free_name(self, memory: Memory) -> str:
        if self.asked is None:
            name = file_name(self.conn, self.mdir, memory, self.names)
        else:  # self.names holds every name of the directory already
            name = first_free(name_base(memory), self.names.__contains__)
        self.names.add(name)
        return name

    def free_id(self, wanted: str) -> str:
        """``wanted`` if no other memory of the directory has it, else a fresh random id."""
        mid = wanted or (self.fresh.pop() if self.fresh else "")
        while not mid or mid in self.ids or (
                (self.asked is None or mid not in self.asked) and self.conn.execute(
                    "SELECT 1 FROM memories WHERE dir = ? AND id = ?",
                    (self.mdir.key, mid)).fetchone()):
            mid = new_id()
        self.ids.add(mid)
        return mid


def _chunks(values: Sequence[str]) -> list[Sequence[str]]:
    return [values[n:n + _CHUNK] for n in range(0, len(values), _CHUNK)]


def _marks(values: Sequence[str]) -> str:
    return ",".join("?" * len(values))


def _reinforced(mdir: MemoryDir, file: str, when: Memory, digest: str) -> Memory | None:
    """A duplicate's file re-read, with one more reinforcement. None if it is unusable or no
    longer holds that body: edited since it was indexed, it is left alone (the next reconcile
    indexes the edit) and the memory is stored as a new one."""
    try:
        current = load_file(mdir, file)
    except (OSError, MemdirError):
        return None
    if norm_hash(current.body) != digest:
        return None
    # memdir writes no <private> span (one written by hand was never indexed nor shown).
    return strip_private_memory(current).replace(
        reinforced=current.reinforced + 1, updated=when.updated, status="active",
        tags=tuple(dict.fromkeys((*current.tags, *when.tags))),
        relevance=max(current.relevance, when.relevance),
        context=current.context or when.context, date=current.date or when.date,
    )


def _plan(conn: sqlite3.Connection, mdir: MemoryDir, memories: Sequence[Memory],
          created: list[Path]) -> tuple[list[_Placed], list[int]]:
    """What to write (each file once) and, for each input memory, which of those it became."""
    digests = [norm_hash(m.body) for m in memories]
    held = _Directory(conn, mdir, memories, digests)
    real_base = os.path.realpath(mdir.path)
    placed: list[_Placed] = []
    slots: list[int] = []
    by_digest: dict[str, int] = {}
    for memory, digest in zip(memories, digests, strict=True):
        slot = by_digest.get(digest)
        if slot is not None:  # a duplicate within the batch: counted before anything is written
            first = placed[slot].memory
            placed[slot] = _Placed(first.replace(reinforced=first.reinforced + 1), digest)
            slots.append(slot)
            continue
        file = held.duplicate_of(digest)
        again = None if file is None else _reinforced(mdir, file, memory, digest)
        if again is None:
            path = safe_join(mdir.path, held.free_name(memory), real_base=real_base,
                             exclusive=True)
            again = memory.replace(id=held.free_id(memory.id), path=path, scope=mdir.scope)
            created.append(path)
        by_digest[digest] = len(placed)
        slots.append(len(placed))
        placed.append(_Placed(again, digest))
    return placed, slots


def _row(mdir: MemoryDir, placed: _Placed, st: os.stat_result) -> tuple[object, ...]:
    return memory_to_row(placed.memory, mdir.key, placed.digest, st.st_mtime_ns, st.st_size)


def _write(folder: NewFiles, placed: _Placed, new: set[str], written: list[Path], *,
           fsync: bool) -> os.stat_result:
    """One file of a transaction: a new one only if its name is still free (else
    :func:`memdir.core.store.name_taken`); ``written`` collects the new files this call really
    created."""
    data = render(placed.memory).encode("utf-8")
    if placed.path.name not in new:
        return atomic_write(placed.path, data, fsync=fsync)
    try:
        st = folder.create(placed.path.name, data, fsync=fsync)
    except FileExistsError:
        raise name_taken(placed.path) from None
    written.append(placed.path)
    return st


def _states(conn: sqlite3.Connection, mdir: MemoryDir,
            files: Sequence[str]) -> dict[str, fp.State]:
    """The index's (mtime_ns, size) of files about to be rewritten (reinforced duplicates)."""
    states: dict[str, fp.State] = {}
    for name in files:
        row = conn.execute("SELECT mtime_ns, size FROM memories WHERE dir = ? AND file = ?",
                           (mdir.key, name)).fetchone()
        if row is not None:
            states[name] = (int(row[0]), int(row[1]))
    return states


def write_new(index: Index, mdir: MemoryDir, memories: Sequence[Memory]) -> list[Memory]:
    """Store new memories in one transaction; exact duplicates reinforce instead."""
    mdir.path.mkdir(parents=True, exist_ok=True)
    created: list[Path] = []
    written: list[Path] = []  # the new files this call really created (rollback's list)
    bulk = len(memories) > 1
    try:
        with index.write() as conn, NewFiles(mdir.path) as folder:
            placed, slots = _plan(conn, mdir, memories, created)
            new = {path.name for path in created}
            rewritten = [p.path.name for p in placed if p.path.name not in new]
            before = _states(conn, mdir, rewritten)
            # Every file is complete on disk before its row is written. (Writing them from
            # threads does not pay: on ext4 creating files in one directory is serialised,
            # and a thread back from the kernel waits for the GIL up to 5 ms.)
            stats = [_write(folder, p, new, written, fsync=not bulk) for p in placed]
            rows = [_row(mdir, p, st) for p, st in zip(placed, stats, strict=True)]
            touched = touching(conn, mdir, {p.memory.type for p in placed})
            if len(placed) >= BULK:
                with index.deferred_fts(conn, len(new)):
                    index.upsert_many(conn, rows)
            else:
                index.upsert_many(conn, rows)
            after = [(st.st_mtime_ns, st.st_size) for st in stats]
            if bulk:
                os.sync()  # one flush for the whole batch instead of one fsync() per file
            regenerate_index(conn, mdir, touched)
            if len(before) == len(rewritten):
                fp.carry(conn, mdir.key, mdir.path, {
                    p.path.name: (before.get(p.path.name), state)
                    for p, state in zip(placed, after, strict=True)})
            else:  # a row vanished meanwhile: let reconcile compare
                fp.forget(conn, mdir.key)
    except BaseException:
        # The transaction rolled back: take back the files this call created (only those: a
        # file another program put under a planned name stays).
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink()
        raise
    return [placed[slot].memory for slot in slots]
