"""The write-ahead journal of a consolidation plan: the before-image of every file the plan
touches, on disk before the file is touched, so that a plan killed half-way can be undone.

A plan's journal is ``$MEMDIR_HOME/history/<plan-id>/before.jsonl``: one JSON line per file,
``{"dir", "real", "file"}`` (the memory directory, its real path then, the file relative to
it) and the file as it was: ``"text"`` (UTF-8), ``"b64"`` (other bytes), ``"link"`` (a
symlink's target) or ``"absent": true`` (the plan creates it); for a file the plan creates,
each write adds a line ``{"dir", "real", "file", "made"}`` with the SHA-256 of what is
written.

Invariants:
- While a journal is active (:func:`recording`, per thread and task: a ``ContextVar``) every
  write memdir makes to a file (:func:`memdir.core.files.atomic_write`, a new file of
  :class:`memdir.core.new_files.NewFiles`, an unlink of the store) first calls :func:`before_write`,
  which appends that file's before-image and fsyncs it, once per file. So the journal holds
  every file the plan changed, whatever code path changed it (a gathered memory that
  reinforces an existing one, ``logs/.consumed.json``, ``MEMORY.md``...).
- The first line for a file wins: it is the state before the plan. A torn last line (a kill
  mid-append) is skipped: its file was not touched yet.
- Before-images are read with a bound (:data:`MAX_IMAGE`) and never through a symlink; a
  journal is read back through :mod:`memdir.core.safe_open` (bounded, not through a symlink).
- Test-only: ``MEMDIR_TEST_PAUSE_AFTER=N`` makes a plan pause (sleep, after saying so on
  stderr) once N files were written, with the next file's before-image already journalled:
  the tests kill the process there to check that undo recovers from a kill at any point.
  :func:`memdir.upkeep.history.undo_last` pauses the same way after N files restored.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from stat import S_ISLNK, S_ISREG
from typing import Any

__all__ = ["JOURNAL_FILE", "MAX_IMAGE", "Journal", "before_write", "pause", "pause_after",
           "read_journal", "recording"]

JOURNAL_FILE = "before.jsonl"
MAX_IMAGE = 8 * 1024 * 1024  # a memory file is a few KB; past this, no before-image is taken
_PAUSE_ENV = "MEMDIR_TEST_PAUSE_AFTER"

_active: ContextVar[Journal | None] = ContextVar("memdir_journal", default=None)


class Journal:
    """The open journal of one plan being applied."""

    def __init__(self, folder: Path, roots: Sequence[Path]) -> None:
        self.folder = folder
        self.roots = [(str(r), os.path.realpath(r)) for r in roots]
        self.seen: set[str] = set()
        self.created: set[str] = set()  # files absent before the plan
        self.touches = 0
        self.pause_after = pause_after()
        folder.mkdir(parents=True, exist_ok=True)
        self.fh = open(folder / JOURNAL_FILE, "ab")  # noqa: SIM115 (closed by recording())

    def record(self, paths: Iterable[Path]) -> None:
        """Journal the before-image of each path not journalled yet, with one fsync."""
        self._write([self._entry(path) for path in paths if str(path) not in self.seen])

    def note(self, path: Path, data: bytes | None = None) -> None:
        """A file is about to be written (with ``data``) or removed: journal it first."""
        lines = [] if str(path) in self.seen else [self._entry(path)]
        if data is not None and str(path) in self.created:
            import hashlib  # only while a plan runs: kept off the start path

            # What the plan writes to a file it creates: undo removes the file only while it
            # still holds one of these, never a file another program put at that name.
            lines.append(self._line({**self._where(path),
                                     "made": hashlib.sha256(data).hexdigest()}))
        self._write(lines)
        self.touches += 1
        if self.touches == self.pause_after + 1:
            pause(self.pause_after)

    def _write(self, lines: list[bytes]) -> None:
        if lines:
            self.fh.write(b"".join(lines))
            self.fh.flush()
            os.fsync(self.fh.fileno())

    def _where(self, path: Path) -> dict[str, str]:
        where = str(path)
        for root, real in self.roots:
            if where.startswith(root + os.sep):
                return {"dir": root, "real": real, "file": where[len(root) + 1:]}
        return {"dir": str(path.parent), "real": os.path.realpath(path.parent),
                "file": path.name}

    def _entry(self, path: Path) -> bytes:
        self.seen.add(str(path))
        image = _image(path)
        if image.get("absent"):
            self.created.add(str(path))
        return self._line({**self._where(path), **image})

    @staticmethod
    def _line(record: dict[str, Any]) -> bytes:
        return (json.dumps(record) + "\n").encode("ascii")  # any name, even undecodable

    def close(self) -> None:
        self.fh.close()


def _image(path: Path) -> dict[str, Any]:
    """A file as it is now, never read through a symlink and never past MAX_IMAGE."""
    from memdir.core.errors import MemoryFileError

    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return {"absent": True}
    if S_ISLNK(mode):
        return {"link": os.readlink(path)}
    if not S_ISREG(mode):
        raise MemoryFileError(f"{path} is not a regular file, so no copy of it can be kept "
                              "for undo; nothing further was changed",
                              "move it out of the memory directory, then run the command "
                              "again")
    # O_NONBLOCK: a FIFO swapped in since the lstat is refused by fstat, not waited on.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        if not S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise MemoryFileError(f"{path} is not a regular file, so no copy of it can be "
                                  "kept for undo; nothing further was changed",
                                  "move it out of the memory directory, then run the "
                                  "command again")
        data = fh.read(MAX_IMAGE + 1)
    if len(data) > MAX_IMAGE:
        raise MemoryFileError(f"{path} is over {MAX_IMAGE // 2**20} MiB, too large to keep a "
                              "copy of for undo; nothing further was changed",
                              "shorten the file or move it out of the memory directory, then "
                              "run the command again")
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        import base64

        return {"b64": base64.b64encode(data).decode("ascii")}


def pause_after() -> int:
    """``MEMDIR_TEST_PAUSE_AFTER`` (test-only), -1 when unset."""
    value = os.environ.get(_PAUSE_ENV, "")
    return int(value) if value.isdigit() else -1


def pause(files: int) -> None:
    """Test-only: say so on stderr and sleep, for a test to kill the process here."""
    sys.stderr.write(f"memdir: {_PAUSE_ENV} reached after {files} files; pausing\n")
    sys.stderr.flush()
    time.sleep(3600)


def before_write(path: Path, data: bytes | None = None) -> None:
    """Called before every file write (``data``) or removal of memdir: journals the file when
    a plan is recording."""
    journal = _active.get()
    if journal is not None:
        journal.note(path, data)


@contextlib.contextmanager
def recording(folder: Path, roots: Sequence[Path],
              first: Iterable[Path] = ()) -> Iterator[Journal]:
    """Open a plan's journal, write the before-images of ``first`` (one fsync), and journal
    every file written inside the block."""
    journal = Journal(folder, roots)
    try:
        journal.record(list(first))
        token = _active.set(journal)
        try:
            yield journal
        finally:
            _active.reset(token)
    finally:
        journal.close()


def read_journal(folder: Path) -> list[dict[str, Any]]:
    """The journalled files of a plan, first image of each, in the order they were touched."""
    from memdir.core.safe_open import PLAN_JOURNAL, read_file

    try:  # bounded, never through a symlink or from a FIFO: the home may have been edited
        lines = read_file(folder / JOURNAL_FILE, PLAN_JOURNAL).splitlines()
    except FileNotFoundError:
        return []
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # torn by a kill mid-append: that file was not touched yet
        if not (isinstance(entry, dict) and isinstance(entry.get("dir"), str)
                and isinstance(entry.get("file"), str)):
            continue
        first = out.setdefault((entry["dir"], entry["file"]), {**entry, "made": []})
        if isinstance(entry.get("made"), str):
            first["made"].append(entry["made"])
    return list(out.values())
