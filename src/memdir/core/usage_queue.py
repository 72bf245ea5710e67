"""Usage counters that could not be written yet: a small append-only file in the home.

A read counts its retrievals (``usage``: access count, last access: what was *shown*) in a
short write. Uses (``used_count``) are not queued: the stop hook counts them in a write that
waits for the lock (:mod:`memdir.capture.uses`). When
another process holds the index's write lock (a bulk import, a reindex, a long store), that
write gives up after a moment, and the read must not wait. The counts are appended here
instead, one JSON line per read, and whichever process next commits a write transaction on
the index applies them in that transaction (:meth:`memdir.core.index.Index.write`).

Invariants:
- Appends use ``O_APPEND`` (whole lines, never interleaved) under an exclusive ``flock`` on
  the file; so does the drain, which holds it from reading the file through the commit that
  applies it to removing the file. A count is therefore applied exactly once: a commit that
  fails leaves the file as it was, and an append that waited for a drain sees the file
  removed (no links left) and starts a new one.
- The file is bounded (:data:`MAX_BYTES`): past it, further counts are dropped (and logged).
  Usage counters are a ranking signal, not a ledger; a full queue must not fill a disk.
- The file is opened with ``O_NOFOLLOW | O_NONBLOCK`` and used only if ``fstat`` says it is
  a regular file: a symlink planted in its place is never written through, and a FIFO is
  never waited on (it would hang every read and write of the index). Lines that are not
  well-formed (a torn write, a hand edit) are skipped.
- Never raises: usage must not fail a read or a write.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from memdir.core.errors import note

__all__ = ["MAX_BYTES", "QUEUE_NAME", "append", "drained"]

QUEUE_NAME = "usage-pending.jsonl"
MAX_BYTES = 1 << 20  # ~10,000 reads' worth of counts
_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | os.O_NONBLOCK
_NOT_REGULAR = "memdir: %s is not a regular file (a FIFO?): usage counters not %s (remove it)"

_APPLY = (
    "INSERT INTO usage (dir, id, access_count, last_accessed) "
    "SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM memories WHERE dir = ?1 AND id = ?2) "
    "ON CONFLICT (dir, id) DO UPDATE SET access_count = access_count + excluded.access_count, "
    "last_accessed = max(COALESCE(last_accessed, ''), excluded.last_accessed)"
)


def _lock(fd: int) -> None:
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_EX)


def append(path: Path, items: Iterable[tuple[str, str]], stamp: str) -> bool:
    """Queue one read's retrievals (``(directory, memory id)`` pairs, counted at ``stamp``).
    False (logged) when the queue is full or cannot be written."""
    line = (json.dumps({"at": stamp, "items": [list(i) for i in items]},
                       ensure_ascii=True) + "\n").encode()
    for _ in range(3):  # a drain may remove the file between our open and our lock
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _FLAGS, 0o600)
        except OSError as exc:
            note("memdir: usage counters lost: cannot open %s (%s)", path, exc)
            return False
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):  # checked before the lock: flock would wait
                note(_NOT_REGULAR, path, "queued")
                return False
            _lock(fd)
            info = os.fstat(fd)
            if info.st_nlink == 0:
                continue  # drained and removed meanwhile: open the new one
            if info.st_size + len(line) > MAX_BYTES:
                note("memdir: usage counters lost: %s is full (%d bytes)", path, info.st_size)
                return False
            os.write(fd, line)
            return True
        except OSError as exc:
            note("memdir: usage counters lost: cannot write %s (%s)", path, exc)
            return False
        finally:
            os.close(fd)
    return False


def _parse(data: bytes) -> dict[tuple[str, str], tuple[int, str]]:
    """(directory, id) -> (count, latest stamp), from the well-formed lines of ``data``."""
    out: dict[tuple[str, str], tuple[int, str]] = {}
    for raw in data.splitlines():
        try:
            entry = json.loads(raw)
            stamp = entry["at"]
            pairs = [(d, i) for d, i in entry["items"] if isinstance(d, str) and
                     isinstance(i, str)]
        except (ValueError, KeyError, TypeError):
            continue
        if not isinstance(stamp, str):
            continue
        for key in pairs:
            count, last = out.get(key, (0, ""))
            out[key] = (count + 1, max(last, stamp))
    return out


@contextlib.contextmanager
def drained(path: Path, conn: sqlite3.Connection, rekey: str) -> Iterator[None]:
    """Inside a write transaction, just before its COMMIT: apply the queued counts (and
    ``rekey``, the strength key's update, for each memory counted), then let the block
    commit; the queue is removed only once the block has finished without an exception.
    A queue that cannot be read or applied is left for a later write: never fails this one."""
    try:
        fd = os.open(path, os.O_RDWR | _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            note("memdir: %s is a symlink: not read (remove it)", path)
        elif not isinstance(exc, FileNotFoundError):
            note("memdir: queued usage counters not applied (%s)", exc)
        yield
        return
    try:
        applied = _apply(fd, path, conn, rekey)
        yield
        if applied is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            note("memdir: applied %d queued usage counts", applied)
    finally:
        os.close(fd)


def _apply(fd: int, path: Path, conn: sqlite3.Connection, rekey: str) -> int | None:
    """Lock the queue and apply it in the open transaction; how many counts (None: nothing
    to remove, or not applied)."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            note(_NOT_REGULAR, path, "applied")
            return None
        _lock(fd)
        if os.fstat(fd).st_nlink == 0:  # another process drained it first
            return None
        counts = _parse(os.read(fd, MAX_BYTES + 65536))
    except OSError as exc:
        note("memdir: queued usage counters not applied (%s)", exc)
        return None
    if not counts:
        return 0
    conn.execute("SAVEPOINT usage_queue")
    try:
        conn.executemany(_APPLY, [(d, i, n, last) for (d, i), (n, last) in counts.items()])
        conn.executemany(rekey, list(counts))
    except sqlite3.Error as exc:
        conn.execute("ROLLBACK TO usage_queue")
        conn.execute("RELEASE usage_queue")
        note("memdir: queued usage counters in %s not applied (%s)", path, exc)
        return None
    conn.execute("RELEASE usage_queue")
    return len(counts)
