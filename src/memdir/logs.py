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
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from memdir.errors import InvalidMemoryError
from memdir.files import atomic_write
from memdir.safety import check_secrets, strip_private

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
    path.parent.mkdir(parents=True, exist_ok=True)
    line = f"- {at.astimezone():%H:%M:%S} {clean}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one write of one line: appenders never tear each other's lines
    finally:
        os.close(fd)
    return path


def _consumed(root: Path) -> dict[str, int]:
    try:
        data = json.loads((root / _CONSUMED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, int)} \
        if isinstance(data, dict) else {}


def unconsumed(directory: Path) -> list[LogLines]:
    """Every log file's complete lines that consolidation has not gathered yet."""
    root = directory / "logs"
    if not root.is_dir():
        return []
    done = _consumed(root)
    out = []
    for path in sorted(root.glob("*/*/*.md")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        complete = text[: text.rfind("\n") + 1]  # a line still being written waits
        lines = complete.splitlines()
        start = done.get(rel, 0)
        fresh = tuple(line for line in lines[start:] if line.strip())
        if fresh:
            out.append(LogLines(rel, start, fresh, len(lines)))
    return out


def mark_consumed(directory: Path, rel: str, upto: int) -> None:
    """Record that the first ``upto`` lines of log ``rel`` are gathered."""
    root = directory / "logs"
    done = _consumed(root)
    done[rel] = max(done.get(rel, 0), upto)
    atomic_write(root / _CONSUMED, json.dumps(done, indent=1, sort_keys=True) + "\n")
