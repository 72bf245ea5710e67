"""Daily logs (seed 004's KAIROS mode): timestamped bullets appended to
``<memory dir>/logs/YYYY/MM/YYYY-MM-DD.md``, gathered into memories by consolidation.

Invariants:
- A log line is only ever appended, never rewritten: one ``write`` of one whole line on a
  file opened with ``O_APPEND``, so concurrent appenders interleave whole lines and never
  tear one.
- Log text goes through the write-time safety of memories: ``<private>`` stripped, secrets
  refused.
- What consolidation has gathered is recorded beside the logs (``logs/.consumed.json``: per
  file, the number of lines consumed); the logs themselves are never edited.
- Log files live below the memory directory, where the memory scan (one level, ``*.md``)
  never mistakes them for memories.
- Nothing under ``logs/`` is followed or waited on (:mod:`memdir.core.safe_open`): a ``logs``,
  year or month folder that is a symlink is never entered or written through, a log file is
  appended to only if it is a regular file opened without following a link, and a log or
  ``.consumed.json`` that is a symlink, a special file or over its size cap is skipped with a
  warning and left as it is (doctor reports it).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from memdir.core.errors import InvalidMemoryError, UnsafeFileError, warn
from memdir.core.files import atomic_write
from memdir.core.safe_open import (
    CONSUMED_STATE,
    DAILY_LOG,
    NOT_REGULAR_FIX,
    check_replaceable,
    read_file,
    real_folder,
)
from memdir.core.safety import check_secrets, strip_private

__all__ = ["LogLines", "append_log", "log_path", "mark_consumed", "unconsumed"]

_CONSUMED = ".consumed.json"


@dataclass(frozen=True)
class LogLines:
    """Lines of one log file not gathered yet: ``start`` is the first line's number (0-based)."""

    file: str  # relative to the logs folder, e.g. "2026/11/2026-11-21.md"
    start: int
    lines: tuple[str, ...]
    end: int  # the number of complete lines in the file: consumed up to here once gathered

    @property
    def texts(self) -> list[str]:
        """The bullets' text without the "- HH:MM:SS " prefix."""
        out = []
        for line in self.lines:
            body = line[2:] if line.startswith("- ") else line
            if len(body) > 9 and body[2] == ":" and body[5] == ":" and body[8] == " ":
                body = body[9:]
            out.append(body.strip())
        return out


def log_path(directory: Path, at: datetime) -> Path:
    day = at.astimezone()
    return directory / "logs" / f"{day:%Y}" / f"{day:%m}" / f"{day:%Y-%m-%d}.md"


def append_log(directory: Path, text: str, at: datetime) -> Path:
    """Append one bullet ``- HH:MM:SS text`` to the day's log of a memory directory."""
    if not isinstance(text, str):
        raise InvalidMemoryError("a log entry is text", 'e.g. memdir log "Deployed 4.2"')
    clean = " ".join(strip_private(text).split())
    if not clean:
        raise InvalidMemoryError("the log entry is empty", 'e.g. memdir log "Deployed 4.2"')
    check_secrets([clean])
    path = log_path(directory, at)
    # Each folder made or entered only if it is a real one: a symlinked logs/ is never
    # written through (UnsafeFileError says so).
    directory.mkdir(parents=True, exist_ok=True)  # the memory directory: vetted by its scope
    real_folder(directory, *path.relative_to(directory).parts[:-1], create=True)
    line = f"- {at.astimezone():%H:%M:%S} {clean}\n".encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
                     | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError:  # a symlink (ELOOP) or a FIFO with no reader (ENXIO)
        check_replaceable(path)  # says which, with the fix
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO with a reader
            check_replaceable(path)  # raises, saying what it is
            raise UnsafeFileError(f"{path} is not a regular file", NOT_REGULAR_FIX)
        os.write(fd, line)  # one write of one line: appenders never tear each other's lines
    finally:
        os.close(fd)
    return path


def _consumed(root: Path) -> dict[str, int]:
    try:
        data = json.loads(read_file(root / _CONSUMED, CONSUMED_STATE))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, UnsafeFileError) as exc:
        warn("memdir: %s is not read: %s", root / _CONSUMED, getattr(exc, "message", exc))
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, int)} \
        if isinstance(data, dict) else {}


def unconsumed(directory: Path) -> list[LogLines]:
    """Every log file's complete lines that consolidation has not gathered yet."""
    try:
        root = real_folder(directory, "logs")
    except UnsafeFileError as exc:
        warn("memdir: the daily logs are not read: %s", exc.message)
        return []
    if root is None:
        return []
    done = _consumed(root)
    out = []
    for path in _log_files(root):
        rel = path.relative_to(root).as_posix()
        try:
            text = read_file(path, DAILY_LOG).decode("utf-8", errors="replace")
        except (UnsafeFileError, OSError) as exc:
            warn("memdir: a daily log is skipped: %s", getattr(exc, "message", exc))
            continue
        complete = text[: text.rfind("\n") + 1]  # a line still being written waits
        lines = complete.splitlines()
        start = done.get(rel, 0)
        fresh = tuple(line for line in lines[start:] if line.strip())
        if fresh:
            out.append(LogLines(rel, start, fresh, len(lines)))
    return out


def _log_files(root: Path) -> list[Path]:
    """``logs/YYYY/MM/*.md``, sorted, through real folders only (``glob`` would follow a
    symlinked year or month folder out of the memory directory)."""
    out: list[Path] = []
    for year in sorted(n for n in _entries(root) if not n.startswith(".")):
        for month in sorted(_entries(root / year)):
            out.extend(root / year / month / name for name in sorted(_entries(root / year / month))
                       if name.endswith(".md"))
    return out


def _entries(folder: Path) -> list[str]:
    """The names in a folder, but not through a symlinked one ([] for a file or a link)."""
    try:
        mode = os.lstat(folder).st_mode
    except OSError:
        return []
    if stat.S_ISREG(mode):
        return []
    if not stat.S_ISDIR(mode):
        warn("memdir: %s is a symlink or a special file, so it is not read", folder)
        return []
    try:
        return os.listdir(folder)
    except OSError:
        return []


def mark_consumed(directory: Path, rel: str, upto: int) -> None:
    """Record that the first ``upto`` lines of log ``rel`` are gathered."""
    root = directory / "logs"
    check_replaceable(root / _CONSUMED)  # a symlink placed there is never replaced
    done = _consumed(root)
    done[rel] = max(done.get(rel, 0), upto)
    atomic_write(root / _CONSUMED, json.dumps(done, indent=1, sort_keys=True) + "\n")
