"""Opening files in a memory directory: what memdir reads there is data from anyone (a team
directory is whatever was committed), so it is never followed, never waited on and never
read whole without a bound.

Invariants:
- A file is opened with ``O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC``: a symlink at the name fails
  at once (``ELOOP``) and a FIFO opens without waiting for a writer. ``fstat`` on the open
  descriptor then admits only a regular file, so no FIFO, device, socket or directory is
  ever read.
- Every read has a cap (:class:`Cap`, one per kind of file). A file whose ``fstat`` size is
  over it is refused before a byte is read, and at most cap + 1 bytes are read, so a file
  that grows meanwhile is refused too. :func:`read_head` reads a bounded head on purpose.
- What is refused raises :class:`UnsafeFileError` (a missing file: ``FileNotFoundError``),
  and the file is left exactly as it was: nothing here writes, renames or removes.
- A file memdir appends to (the history of plans, the hook log) is opened by
  :func:`open_append` the same way, ``O_CREAT`` included: a symlink or a FIFO planted at the
  name is refused, never appended through or waited on.
- A file memdir did not write is never replaced unless it is a regular file
  (:func:`check_replaceable`), and folders below a memory directory are made or entered only
  if they are real folders (:func:`real_folder`): a symlinked ``logs`` is never written
  through.
- The memory directories of the user and project scopes live in the home, which the user
  controls: the directory itself may be a symlink there. A team directory is vetted by
  :func:`memdir.core.paths.safe_join` (it may not lead outside its repository).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from memdir.core.errors import UnsafeFileError

__all__ = ["AGENT_FILE", "CONFIG_FILE", "CONFLICT_SCAN", "CONSUMED_STATE", "DAILY_LOG",
           "HISTORY_LOG", "IMPORT_FILE", "INDEX_FILE", "MEMORY_FILE", "NOT_REGULAR_FIX",
           "OVERFLOW_PAGE", "PLAN_JOURNAL", "PULL_RECORD", "Cap", "check_replaceable",
           "describe", "open_append", "read_file", "read_head", "read_text", "real_folder",
           "unsafe_entries"]

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CHUNK = 1 << 20  # bytes per read() call: a huge cap never means a huge single allocation


@dataclass(frozen=True)
class Cap:
    """The most bytes memdir reads of one kind of file, and how to fix a file over it."""

    kind: str
    limit: int
    fix: str

    def over(self, size: int) -> str:
        return f"the {self.kind} is {size:,} bytes, over memdir's cap of {self.limit:,}"


MEMORY_FILE = Cap("memory file", 1 << 20,
                  "split it into smaller memories (or remove it): a memory is a short note")
# Generated: 200 lines of ~150 characters. Hand-written ones (an adopted directory) get room.
INDEX_FILE = Cap("MEMORY.md", 1 << 20,
                 "remove it: memdir regenerates MEMORY.md from the memory files")
OVERFLOW_PAGE = Cap("overflow page", 1 << 20,  # 2,000 lines of ~150 characters
                    "remove it: memdir regenerates the index/ pages from the memory files")
DAILY_LOG = Cap("daily log", 16 << 20,
                "move it out of logs/: a day's log is a few hundred short lines")
CONSUMED_STATE = Cap("consumed-state file", 1 << 20,
                     "remove logs/.consumed.json: consolidation then gathers the logs again")
IMPORT_FILE = Cap("import file", 256 << 20,
                  "split the export into several files and import each")
CONFIG_FILE = Cap("settings file", 1 << 20, "keep config.toml to the settings memdir documents")
# The last conflict scan (memdir.upkeep.conflict_scan): ids and reasons, a few MB at most.
CONFLICT_SCAN = Cap("conflict scan", 16 << 20,
                    "remove conflicts.json from the memdir home: the next scan writes it again")
PULL_RECORD = Cap("pull record", 64 << 10,
                  "remove the last-pull file: the next pull writes it again")

# An agent's settings.json or instructions file (CLAUDE.md): in a repository, committed by
# anyone, so read bounded and never from a FIFO; the user may symlink theirs (followed).
AGENT_FILE = Cap("agent settings or instructions file", 16 << 20,
                 "shorten the file or move it away, then run the command again")
# One JSON line per applied plan (a few KB): tens of thousands of plans fit.
HISTORY_LOG = Cap("history file", 64 << 20,
                  "move history.jsonl out of the memdir home: a new one is started (undo then "
                  "cannot go back past it)")
# One before-image (at most 8 MiB, base64) per file a plan touched.
PLAN_JOURNAL = Cap("plan journal", 256 << 20,
                   "remove that plan's folder under history/ (that plan can then no longer be "
                   "undone)")

NOT_REGULAR_FIX = "remove it or replace it with a regular file"


def describe(mode: int) -> str | None:
    """What a non-regular entry is, in words ('a symlink', 'a FIFO'...); None if regular."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _refuse(path: Path | str, what: str) -> UnsafeFileError:
    return UnsafeFileError(f"{path} is {what}, which memdir does not read or replace",
                           NOT_REGULAR_FIX)


def _open(path: Path | str, follow: bool, flags: int = _FLAGS,
          mode: int = 0o644) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file at ``path`` and its stat; the caller closes it."""
    try:
        fd = os.open(path, flags | (0 if follow else _NOFOLLOW), mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise _refuse(path, "a symlink") from None
        if exc.errno == errno.ENXIO:  # a socket, a device with nothing behind it, or a
            # FIFO opened for writing with no reader
            try:
                what = describe(os.lstat(path).st_mode)
            except OSError:
                what = None
            raise _refuse(path, what or "not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        what = describe(st.st_mode)
        if what is not None:
            raise _refuse(path, what)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _read(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes from ``fd``, in bounded chunks."""
    parts = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, _CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_file(path: Path | str, cap: Cap, *, follow: bool = False) -> bytes:
    """The whole regular file at ``path``: UnsafeFileError if it is a symlink (unless
    ``follow``: a path the user named), not a regular file, or over ``cap``."""
    fd, st = _open(path, follow)
    try:
        if st.st_size > cap.limit:
            raise UnsafeFileError(f"{path}: {cap.over(st.st_size)}", cap.fix)
        data = _read(fd, cap.limit + 1)
    finally:
        os.close(fd)
    if len(data) > cap.limit:  # it grew while being read
        raise UnsafeFileError(f"{path}: the {cap.kind} is over memdir's cap of "
                              f"{cap.limit:,} bytes", cap.fix)
    return data


def read_text(path: Path | str, cap: Cap) -> str:
    """:func:`read_file` decoded as UTF-8 (UnicodeDecodeError if it is not)."""
    return read_file(path, cap).decode("utf-8")


def read_head(path: Path | str, limit: int, *,
              follow: bool = False) -> tuple[bytes, os.stat_result]:
    """The first ``limit`` bytes of the regular file at ``path`` (never through a symlink,
    unless ``follow``) and its stat: for files of which only the head matters."""
    fd, st = _open(path, follow)
    try:
        return _read(fd, limit), st
    finally:
        os.close(fd)


def open_append(path: Path | str, *, read: bool = False, mode: int = 0o644) -> int:
    """A descriptor appending to the regular file at ``path`` (made when missing; readable
    too if ``read``); UnsafeFileError if a symlink, a FIFO or any other special file is at
    the name. The caller closes it."""
    flags = ((os.O_RDWR if read else os.O_WRONLY) | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
             | getattr(os, "O_CLOEXEC", 0))
    fd, _ = _open(path, False, flags, mode)
    return fd


def check_replaceable(path: Path) -> None:
    """UnsafeFileError unless ``path`` is free or a regular file: memdir replaces its own
    files, never a symlink or a special file someone else put at the name."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    what = describe(mode)
    if what is not None:
        raise _refuse(path, what)


def real_folder(base: Path, *parts: str, create: bool = False) -> Path | None:
    """``base/part/...`` if every part is a real folder (not a symlink), made when missing if
    ``create``; None if a part is missing (and not ``create``). UnsafeFileError if a part is
    a symlink or not a folder: nothing is made or entered beyond it."""
    path = base
    for part in parts:
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            if not create:
                return None
            with contextlib.suppress(FileExistsError):  # made meanwhile: checked below
                os.mkdir(path)
            mode = os.lstat(path).st_mode
        if not stat.S_ISDIR(mode):
            raise _refuse(path, describe(mode) or "not a folder")
    return path


def unsafe_entries(directory: Path, names: list[str], folders: Mapping[str, Cap],
                   named: Mapping[str, Cap]) -> Iterator[tuple[Path, str, str]]:
    """(path, what is wrong, how to fix it) for each of ``names`` in ``directory`` that is a
    symlink or a special file, and for each entry below ``folders`` (searched without
    entering a symlink) that is, or that is over the folder's cap (or the cap ``named`` gives
    its file name): what doctor reports and every other command skips."""
    for name in names:
        path = directory / name
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        what = describe(mode)
        if what is not None and what != "a folder":
            yield path, _SKIPPED.format(what), NOT_REGULAR_FIX
    for folder, cap in folders.items():
        yield from _walk(directory / folder, cap, named)


_SKIPPED = "{}: memdir does not read, follow or replace it"


def _walk(path: Path, cap: Cap, named: Mapping[str, Cap]) -> Iterator[tuple[Path, str, str]]:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if not stat.S_ISDIR(mode):
        yield path, _SKIPPED.format(describe(mode) or "not a folder"), NOT_REGULAR_FIX
        return
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                yield from _walk(Path(entry.path), cap, named)
                continue
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        what = describe(st.st_mode)
        limit = named.get(entry.name, cap)
        if what is not None:
            yield Path(entry.path), _SKIPPED.format(what), NOT_REGULAR_FIX
        elif st.st_size > limit.limit:
            yield Path(entry.path), f"{limit.over(st.st_size)}, so it is not read", limit.fix
