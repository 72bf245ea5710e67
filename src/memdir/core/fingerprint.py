"""Directory fingerprints: how reconcile knows, from one listing and one ``stat`` per file,
that a memory directory has not changed since the index last matched it, and how memdir's
own writes carry the fingerprint forward so that they do not count as changes.

A fingerprint is the directory's mtime (read before the listing), the number of memory files
and the sums of their mtimes and sizes: adding, removing or renaming a file changes the
directory's mtime, editing one changes the sums. Saved with it in ``dir_state``: a checksum
of the file names, a generation (bumped by every save and every :func:`forget`) and the time
it was saved.

Invariants:
- The saved row describes the index rows of the directory. It is saved only for a listing
  the index was found to match (reconcile compares first), or carried forward from such a
  row by exactly what one write transaction wrote. Every other transaction that changes a
  directory's rows or files (update, delete, reindex, a write that cannot carry) calls
  :func:`forget` in the same transaction, so no later carry builds on a row that no longer
  describes the index (it would stamp an old state with a fresh directory mtime).
- Carrying forward never absorbs a change made by another program. The new fingerprint is the
  saved one plus this transaction's own files, and it is saved only if a fresh listing has
  exactly the expected names (a rename, an addition or a removal by anyone else shows there).
  An edit in place by another program changes the sums of mtimes and sizes away from the
  carried ones, so the next reconcile compares as usual.
- A reconcile that compared without the write lock saves only if the generation it read
  before scanning is still the saved one (:func:`save_unless_changed`): a write committed in
  between makes it skip the save instead of overwriting a newer row with an older listing.
- Racy fingerprints: with coarse timestamps (kernels before 6.13, FAT, NFS) a rename in the
  same clock tick as the fingerprint's reading leaves the directory's mtime, the count and the
  sums as they were. A saved fingerprint whose directory mtime is within ``RACY_NS`` of its
  save time is therefore also checked against the names checksum (:func:`trusted`), and is
  saved again once the directory is older than that. An edit in place in the same tick as
  the file's last write that keeps its size stays invisible, as to any mtime-based check.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from memdir.core import files
from memdir.core.files import is_memory_file, scan_dir

__all__ = ["RACY_NS", "Change", "Saved", "State", "carry", "forget", "load", "matches",
           "names_sum", "probe", "save", "save_unless_changed", "scan", "settled", "trusted"]

State = tuple[int, int]  # a file's (mtime_ns, size)
Change = tuple[State | None, State]  # a written file's state before (None: created), after

# Two seconds: FAT's mtime resolution, the coarsest a memory directory is likely to live on.
RACY_NS = 2_000_000_000

_SAVE = ("INSERT INTO dir_state (dir, fingerprint, names, gen, saved_ns) VALUES (?, ?, ?, 1, ?) "
        "ON CONFLICT (dir) DO UPDATE SET fingerprint = excluded.fingerprint, "
        "names = excluded.names, gen = dir_state.gen + 1, saved_ns = excluded.saved_ns")
_FORGET = ("INSERT INTO dir_state (dir, fingerprint, names, gen, saved_ns) "
           "VALUES (?, '', NULL, 1, 0) ON CONFLICT (dir) DO UPDATE SET fingerprint = '', "
           "names = NULL, gen = dir_state.gen + 1, saved_ns = 0")


@dataclass(frozen=True)
class Saved:
    """A directory's row in ``dir_state``."""

    fingerprint: str
    names: int | None
    gen: int
    saved_ns: int

    @property
    def racy(self) -> bool:
        """Whether the directory may have changed in the same clock tick as the reading."""
        return _dir_mtime(self.fingerprint) >= self.saved_ns - RACY_NS


def load(conn: sqlite3.Connection, key: str) -> Saved | None:
    row = conn.execute("SELECT fingerprint, names, gen, saved_ns FROM dir_state WHERE dir = ?",
                       (key,)).fetchone()
    if row is None:
        return None
    return Saved(str(row[0]), None if row[1] is None else int(row[1]), int(row[2]), int(row[3]))


def save(conn: sqlite3.Connection, key: str, fingerprint: str, names: int) -> None:
    """Save a fingerprint, in a transaction that holds the write lock."""
    conn.execute(_SAVE, (key, fingerprint, names, time.time_ns()))


def save_unless_changed(key: str, fingerprint: str, names: int,
                        expect: Saved | None) -> tuple[str, tuple[object, ...]]:
    """The statement (and its parameters) that saves a fingerprint without the write lock held
    while it was taken: only if the row is still ``expect`` (None: still absent), so a write
    committed since ``expect`` was read keeps its own row."""
    if expect is None:
        return ("INSERT OR IGNORE INTO dir_state (dir, fingerprint, names, gen, saved_ns) "
                "VALUES (?, ?, ?, 1, ?)", (key, fingerprint, names, time.time_ns()))
    return ("UPDATE dir_state SET fingerprint = ?, names = ?, gen = gen + 1, saved_ns = ? "
            "WHERE dir = ? AND gen = ?", (fingerprint, names, time.time_ns(), key, expect.gen))


def settled(fingerprint: str) -> bool:
    """Whether the directory's last change is older than the coarsest clock tick."""
    return _dir_mtime(fingerprint) < time.time_ns() - RACY_NS


def forget(conn: sqlite3.Connection, key: str) -> None:
    """This transaction changed the directory without carrying its fingerprint: the next
    reconcile compares every row (and no carry builds on the old row)."""
    conn.execute(_FORGET, (key,))


def names_sum(names: Iterable[str]) -> int:
    """An order-independent checksum of file names. Unlike the sums of mtimes and sizes it
    changes when a file is renamed (``mv`` keeps both)."""
    from zlib import crc32  # only when a fingerprint is saved, carried or racy

    return sum(crc32(name.encode("utf-8", "surrogateescape")) for name in names)


def _format(dir_mtime: int, count: int, mtimes: int, sizes: int) -> str:
    return f"{dir_mtime}:{count}:{mtimes}:{sizes}"


def _dir_mtime(fingerprint: str) -> int:
    head = fingerprint.partition(":")[0]
    return int(head) if head.lstrip("-").isdigit() else 0


def scan(path: Path) -> tuple[str, dict[str, State]]:
    """The directory's memory files and their fingerprint."""
    try:
        dir_mtime = os.stat(path).st_mtime_ns
    except OSError:
        dir_mtime = 0
    disk = scan_dir(path)
    mtimes = sum(state[0] for state in disk.values())
    sizes = sum(state[1] for state in disk.values())
    return _format(dir_mtime, len(disk), mtimes, sizes), disk


def probe(path: Path) -> tuple[str, int] | None:
    """The directory's fingerprint and names checksum, as :func:`scan` and :func:`names_sum`
    give them, without listing its files: what reconcile checks first, since a directory
    has almost never changed since the last command. In C, the ``stat`` calls split between
    two threads (at 10,000 files 12 ms instead of 21). None where the C part is not built,
    or the directory cannot be opened: then :func:`scan` tells."""
    if files.native is None or os.stat not in os.supports_dir_fd:
        return None
    try:
        dir_mtime = os.stat(path).st_mtime_ns
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None
    try:
        count, mtimes, sizes, names = files.native.fingerprint(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _format(dir_mtime, count, mtimes, sizes), names


def matches(saved: Saved | None, fingerprint: str, names: int) -> bool:
    """:func:`trusted`, for a :func:`probe`: the fingerprint is the saved one and, if that is
    racy, so is the names checksum."""
    if saved is None or saved.fingerprint != fingerprint:
        return False
    return not saved.racy or saved.names == names


def trusted(saved: Saved | None, fingerprint: str, disk: Mapping[str, State]) -> bool:
    """Whether the index is known to match the scanned directory: the saved fingerprint is the
    scanned one and, if it is racy, the file names are the saved ones too."""
    if saved is None or saved.fingerprint != fingerprint:
        return False
    return not saved.racy or saved.names == names_sum(disk)


def carry(conn: sqlite3.Connection, key: str, path: Path,
          written: Mapping[str, Change]) -> bool:
    """After this transaction wrote ``written`` (file name -> state before and after) into the
    directory: save the fingerprint the directory now has if nobody else changed it, else
    :func:`forget` the saved one. True if saved. Call it inside the write transaction, after
    the transaction's last file write (``MEMORY.md`` included), so that the fingerprint
    commits or rolls back with the rows."""
    saved = load(conn, key)
    if saved is None or saved.names is None or not saved.fingerprint:
        forget(conn, key)
        return False
    try:
        _, count, mtimes, sizes = (int(part) for part in saved.fingerprint.split(":"))
    except ValueError:
        forget(conn, key)
        return False
    names = saved.names
    new_names = []
    for name, (before, after) in written.items():
        if before is None:
            count += 1
            new_names.append(name)
        else:
            mtimes -= before[0]
            sizes -= before[1]
        mtimes += after[0]
        sizes += after[1]
    names += names_sum(new_names)
    try:
        dir_mtime = os.stat(path).st_mtime_ns
        listed, listed_sum = _listed(path)
    except OSError:
        forget(conn, key)
        return False
    if listed != count or listed_sum != names:
        forget(conn, key)  # another program added, removed or renamed a file meanwhile
        return False
    save(conn, key, _format(dir_mtime, count, mtimes, sizes), names)
    return True


def _listed(path: Path) -> tuple[int, int]:
    """The number of memory file names listed in ``path`` now, and their :func:`names_sum`
    (in C where built: at 100k files the Python loop took 0.1-0.2 s of every write)."""
    if files.native is not None and os.stat in os.supports_dir_fd:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            return files.native.names_sum(fd)
        finally:
            os.close(fd)
    listed = [name for name in os.listdir(path) if is_memory_file(name)]
    return len(listed), names_sum(listed)
