"""Directory fingerprints: how reconcile knows, from one listing and one ``stat`` per file,
that a memory directory has not changed since the index last matched it, and how memdir's
own writes carry the fingerprint forward so that they do not count as changes.

A fingerprint is the directory's mtime (read before the listing), the number of memory files
and the sums of their mtimes and sizes: adding, removing or renaming a file changes the
directory's mtime, editing one changes the sums. Saved with it in ``dir_state`` is a checksum
of the file names, which only carrying forward reads.

Invariants:
- A fingerprint is saved only for a listing the index was found to match (reconcile compares
  first), or carried forward from such a one by exactly what one write transaction wrote.
- Carrying forward never absorbs a change made by another program. The new fingerprint is the
  saved one plus this transaction's own files, and it is saved only if a fresh listing has
  exactly the expected names (a rename, an addition or a removal by anyone else shows there),
  with the directory's mtime read before that listing (anything later changes the mtime). An
  edit in place by another program changes the sums of mtimes and sizes away from the carried
  ones, so the next reconcile compares as usual. Without a saved fingerprint nothing is
  carried: the next reconcile compares every row, as it always may.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

from memdir.files import is_memory_file, scan_dir

__all__ = ["SAVE", "Change", "State", "carry", "names_sum", "scan"]

State = tuple[int, int]  # a file's (mtime_ns, size)
Change = tuple[State | None, State]  # a written file's state before (None: created), after

SAVE = "INSERT OR REPLACE INTO dir_state (dir, fingerprint, names) VALUES (?, ?, ?)"


def names_sum(names: Iterable[str]) -> int:
    """An order-independent checksum of file names. Unlike the sums of mtimes and sizes it
    changes when a file is renamed (``mv`` keeps both)."""
    from zlib import crc32  # only when a fingerprint is saved or carried, never on a read

    return sum(crc32(name.encode("utf-8", "surrogateescape")) for name in names)


def _format(dir_mtime: int, count: int, mtimes: int, sizes: int) -> str:
    return f"{dir_mtime}:{count}:{mtimes}:{sizes}"


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


def carry(conn: sqlite3.Connection, key: str, path: Path,
          written: Mapping[str, Change]) -> bool:
    """After this transaction wrote ``written`` (file name -> state before and after) into the
    directory: save the fingerprint the directory now has if nobody else changed it. True if
    saved. Call it inside the write transaction, after the transaction's last file write
    (``MEMORY.md`` included), so that the fingerprint commits or rolls back with the rows."""
    row = conn.execute("SELECT fingerprint, names FROM dir_state WHERE dir = ?",
                       (key,)).fetchone()
    if row is None or row[1] is None:
        return False
    try:
        _, count, mtimes, sizes = (int(part) for part in str(row[0]).split(":"))
    except ValueError:
        return False
    names = int(row[1])
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
        listed = [name for name in os.listdir(path) if is_memory_file(name)]
    except OSError:
        return False
    if len(listed) != count or names_sum(listed) != names:
        return False  # another program added, removed or renamed a file meanwhile
    conn.execute(SAVE, (key, _format(dir_mtime, count, mtimes, sizes), names))
    return True
