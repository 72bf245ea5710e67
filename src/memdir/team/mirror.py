"""The mirror: a team server's memories as Markdown files on this machine.

``$MEMDIR_HOME/remote/<server-key>/team/`` holds one file per team memory on the server,
active and archived; it is the team memory directory of the facade while a server is
configured, so search, context, recall and MEMORY.md merge team and local memories with no
code of their own. ``remote/<server-key>/last-pull`` records the last pull (its mtime is the
throttle clock shared by every process of the home; its text says how the pull went).

Invariants:
- The server is the source of truth and the mirror only follows it: a pull writes the files
  whose text changed, removes the files of memories the server no longer has, and leaves
  the rest alone (unchanged files keep their mtime, so reconcile skips them). Hand edits to
  mirror files are overwritten by the next pull: change team memories through memdir.
- Nothing the server sends chooses a path: file names are ``<type>_<slug>-<id>.md`` built
  here from validated fields, and each goes through :func:`memdir.core.paths.safe_join`; an item
  that fails is refused (reported, never written) and the rest of the pull goes on.
- Writes are atomic (:func:`memdir.core.files.atomic_write`), so concurrent pulls of several
  processes leave whole files only; a file written after a pull's list request (the answer
  to a write another process just made) is newer than the list and is left for the next.
- A failed list request changes nothing: the mirror is used as it is.
- Mirror files are read through :mod:`memdir.core.safe_open`: a symlink or a special file at a
  mirror file's name is never read, replaced or removed (the item is refused).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memdir.core.errors import MemdirError, UnsafeFileError
from memdir.core.files import atomic_write, scan_dir, slugify
from memdir.core.markdown import render
from memdir.core.model import Memory, format_time, now
from memdir.core.paths import project_key, safe_join
from memdir.core.safe_open import (
    MEMORY_FILE,
    PULL_RECORD,
    check_replaceable,
    read_file,
    read_text,
)
from memdir.core.store import MemoryDir
from memdir.team.remote import ServerClient, ServerSettings, memory_from_api

__all__ = ["PULL_INTERVAL", "PullReport", "TeamStatus", "last_pull", "mark_pull", "mirror_root",
           "place", "pull", "pull_due"]

PULL_INTERVAL = 30.0  # seconds between automatic pulls of one home (hooks run on every prompt)
STAMP = "last-pull"


@dataclass(frozen=True)
class PullReport:
    """What one pull did. ``refused``: items the server sent that could not be mirrored."""

    url: str
    written: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: int = 0
    refused: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return len(self.written) + self.unchanged

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "total": self.total, "written": list(self.written),
                "removed": list(self.removed), "unchanged": self.unchanged,
                "refused": list(self.refused)}


@dataclass(frozen=True)
class TeamStatus:
    """Where the team scope lives and how the last pull went (``memdir team status``)."""

    url: str | None
    token: bool
    directory: str
    active: int
    archived: int
    last_pull: dict[str, Any] = field(default_factory=dict)
    reachable: bool | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "token": self.token, "directory": self.directory,
                "active": self.active, "archived": self.archived, "last_pull": self.last_pull,
                "reachable": self.reachable, "error": self.error}


def mirror_root(home: Path, settings: ServerSettings) -> Path:
    """``$MEMDIR_HOME/remote/<server-key>``: one flat, sanitised directory per server."""
    return safe_join(home / "remote", project_key(Path(settings.key)))


def file_name(memory: Memory) -> str:
    return f"{memory.type}_{slugify(memory.name, 50)}-{memory.id}.md"


def _placed(mdir: MemoryDir, memory: Memory, real_base: str | None = None) -> Memory:
    """The memory as its mirror file holds it: a known type, scope team, a vetted path."""
    kind = mdir.taxonomy.resolve(memory.type)  # UnknownTypeError: not ours to invent
    memory = memory.replace(type=kind, scope="team")
    return memory.replace(path=safe_join(mdir.path, file_name(memory), real_base=real_base))


def _write_if_changed(path: Path, text: str, since: int | None = None) -> bool:
    """Write unless the file already says ``text``, or (with ``since``, a time.time_ns())
    was written after it: that is a newer answer placed by a concurrent write."""
    with contextlib.suppress(OSError, UnsafeFileError, UnicodeDecodeError):
        if read_text(path, MEMORY_FILE) == text or (
                since is not None and path.stat().st_mtime_ns > since):
            return False
    check_replaceable(path)  # a symlink or a FIFO at the name is left as it is
    atomic_write(path, text, fsync=False)
    return True


def place(mdir: MemoryDir, memory: Memory, old: Iterable[Path] = ()) -> Memory:
    """Write one memory the server sent (after a write through the API) into the mirror;
    ``old`` files of the same memory under another name (renamed) are removed."""
    mdir.path.mkdir(parents=True, exist_ok=True)
    placed = _placed(mdir, memory)
    assert placed.path is not None
    _write_if_changed(placed.path, render(placed))
    for path in old:
        if path != placed.path and path.parent == mdir.path:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return placed


def pull(client: ServerClient, mdir: MemoryDir, *, timeout: float) -> PullReport:
    """Make the mirror directory match the server's team memories (see the invariants)."""
    # Files written after this moment hold answers newer than the list: a pull leaves them.
    started = time.time_ns()
    items = client.list_team(timeout=timeout)  # raises before anything is touched
    mdir.path.mkdir(parents=True, exist_ok=True)
    real_base = os.path.realpath(mdir.path)
    wanted: dict[str, str] = {}
    seen: set[str] = set()
    refused: list[str] = []
    for item in items:
        label = repr(item.get("id")) if isinstance(item, dict) else "an item"
        try:
            if not isinstance(item, dict):
                raise MemdirError("not a JSON object")
            memory = _placed(mdir, memory_from_api(item), real_base)
            if memory.id in seen:
                raise MemdirError("the id appears twice in the list")
        except MemdirError as exc:
            refused.append(f"{label[:80]}: {exc.message}")
            continue
        seen.add(memory.id)
        assert memory.path is not None
        wanted[memory.path.name] = render(memory)
    written = []
    for name, text in wanted.items():
        try:
            if _write_if_changed(mdir.path / name, text, started):
                written.append(name)
        except UnsafeFileError as exc:
            refused.append(f"{name}: {exc.message}")
    removed = []
    for name, (mtime_ns, _) in scan_dir(mdir.path).items():
        if name not in wanted and mtime_ns <= started:
            with contextlib.suppress(FileNotFoundError):
                (mdir.path / name).unlink()
            removed.append(name)
    return PullReport(client.settings.url, tuple(written), tuple(removed),
                      len(wanted) - len(written), tuple(refused))


def pull_due(root: Path, interval: float = PULL_INTERVAL) -> bool:
    """Whether the last pull attempt of this home is older than ``interval`` seconds."""
    try:
        return time.time() - os.stat(root / STAMP).st_mtime >= interval
    except OSError:
        return True


def mark_pull(root: Path, *, ok: bool | None, error: str | None = None,
              report: PullReport | None = None) -> None:
    """Record a pull attempt (its mtime throttles the next automatic one). Best effort."""
    record: dict[str, Any] = {"at": format_time(now()), "ok": ok}
    if error:
        record["error"] = error
    if report is not None:
        record.update(total=report.total, written=len(report.written),
                      removed=len(report.removed), refused=list(report.refused))
    with contextlib.suppress(OSError):
        root.mkdir(parents=True, exist_ok=True)
        atomic_write(root / STAMP, json.dumps(record) + "\n", fsync=False)


def last_pull(root: Path) -> dict[str, Any]:
    """The record of the last pull attempt, {} if none."""
    try:
        data = json.loads(read_file(root / STAMP, PULL_RECORD))
    except (OSError, ValueError, UnsafeFileError):
        return {}
    return data if isinstance(data, dict) else {}

