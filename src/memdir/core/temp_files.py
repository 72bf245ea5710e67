"""Temp files memdir leaves behind when a writer is killed, found and removed.

memdir names its temp files ``.<name>.<pid>.<8 hex>.tmp`` (:func:`memdir.core.files.atomic_write`,
:class:`memdir.core.new_files.NewFiles`) in a memory directory and its ``index/`` and ``logs/``
folders, and ``.consolidate-lock.<pid>`` in the home (:mod:`memdir.upkeep.dream`). Such a file
whose writer is gone stays forever: nothing else ever removes it.

Invariants:
- Only files memdir names so, regular files (never a symlink or a folder), in those folders
  (no recursion) are ever considered; anything else is never touched.
- One is stale when its pid is not a live process or it is older than ``STALE_SECONDS``
  (one hour, against pid reuse). It is removed only once also older than ``GRACE_SECONDS``:
  a writer in another pid namespace (a container sharing the home) is never cut off
  mid-write.
- Write commands sweep: consolidate, dream, undo and reindex always, the others (store,
  update...) at most once per ``SWEEP_EVERY`` seconds per home (one ``stat`` otherwise).
  ``doctor`` lists the stale ones and removes nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

__all__ = ["GRACE_SECONDS", "STALE_SECONDS", "SWEEP_EVERY", "TempFile", "alive", "stale_temps",
           "sweep", "sweep_due"]

STALE_SECONDS = 3600.0
GRACE_SECONDS = 60.0
SWEEP_EVERY = 600.0
_TEMP = re.compile(r"\..+\.(\d{1,10})\.[0-9a-f]{8}\.tmp\Z", re.DOTALL)
_LOCK_TEMP = re.compile(r"\.consolidate-lock\.(\d{1,10})\Z")
_MARKER = ".temp-sweep"  # in the home: its mtime is the last sweep


@dataclass(frozen=True)
class TempFile:
    path: Path
    pid: int
    age: float  # seconds since its last change
    alive: bool  # whether its writer's pid is a live process here

    @property
    def stale(self) -> bool:
        return not self.alive or self.age >= STALE_SECONDS

    @property
    def removable(self) -> bool:
        return self.stale and self.age >= GRACE_SECONDS


def alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's live process (or a pid this system cannot hold)
    return True


def _folders(dirs: Iterable[Path], home: Path | None) -> list[tuple[Path, re.Pattern[str]]]:
    out = [(folder, _TEMP) for d in dirs for folder in (d, d / "index", d / "logs")]
    return out + ([(home, _LOCK_TEMP)] if home is not None else [])


def stale_temps(dirs: Iterable[Path], home: Path | None = None,
                now: float | None = None) -> list[TempFile]:
    """memdir's own temp files in the memory directories ``dirs`` (and the home) whose writer
    is gone or that are older than an hour."""
    now = time.time() if now is None else now
    found = []
    for folder, pattern in _folders(dirs, home):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            match = pattern.match(name)
            if match is None:
                continue
            try:
                st = os.lstat(folder / name)
            except OSError:
                continue
            if not S_ISREG(st.st_mode):
                continue
            pid = int(match.group(1))
            temp = TempFile(folder / name, pid, now - st.st_mtime, alive(pid))
            if temp.stale:
                found.append(temp)
    return found


def sweep(dirs: Iterable[Path], home: Path) -> list[Path]:
    """Remove the stale temp files that are past the grace period; those removed. Never
    raises: a file that cannot be removed stays, and doctor still lists it."""
    removed = []
    for temp in stale_temps(dirs, home):
        if temp.removable:
            with contextlib.suppress(OSError):
                os.unlink(temp.path)
                removed.append(temp.path)
    with contextlib.suppress(OSError):
        (home / _MARKER).touch()
    return removed


def sweep_due(home: Path) -> bool:
    """Whether no sweep ran in the last ``SWEEP_EVERY`` seconds (one ``stat``)."""
    try:
        return time.time() - os.stat(home / _MARKER).st_mtime >= SWEEP_EVERY
    except OSError:
        return True
