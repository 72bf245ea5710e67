"""Planned, backed-up edits of an agent's settings files: every file's edit is planned
before the first write, and each write keeps what was there before memdir.

An :data:`Edit` takes a file's text (None when missing), its backup's and whether memdir
created it, and returns the new text (None: delete the file) and the changes it made;
:func:`json_edit` and :func:`toml_edit` make them, :func:`apply` plans and commits a list.

Invariants:
- Before memdir's first change to a file, its bytes are kept next to it as
  ``<name>.memdir-backup`` (empty when memdir creates the file), once: never overwritten. A
  file that existed empty (0 bytes) also gets an empty ``<name>.memdir-backup-existed``, so
  that its empty backup is not read as "memdir created it". The backup is how uninstall
  knows what was there before memdir: an event list, ``"hooks"`` or ``"mcpServers"``
  emptied by the removal is deleted unless the backup had it; a result equal to the
  backup's content gets the backup's very bytes; a file memdir created that is left empty
  is deleted, with its empty backup; a file that existed empty is left empty. Directories
  memdir created stay.
- Writes go through :func:`memdir.core.files.atomic_write`, into a symlink's target, keeping an
  existing file's permission bits; a file that changed while memdir planned is planned again.
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdir.agents.codex_toml import toml_drop, toml_put
from memdir.agents.hooks_agents import MCP_ARGS
from memdir.agents.settings_json import dumps, loads
from memdir.core import safe_open as _safe
from memdir.core.errors import ConfigError, UnsafeFileError
from memdir.core.files import atomic_write

__all__ = ["BACKUP_SUFFIX", "EXISTED_SUFFIX", "Edit", "FileChange", "apply", "json_edit",
           "read_text", "toml_edit"]

BACKUP_SUFFIX = ".memdir-backup"
EXISTED_SUFFIX = ".memdir-backup-existed"  # beside an empty backup: the file existed, empty

# (text or None when missing, backup text or None, created: memdir made the file)
#   -> (new text or None to delete, changes)
Edit = Callable[[str | None, str | None, bool], tuple[str | None, list[str]]]


@dataclass(frozen=True)
class FileChange:
    path: Path
    status: str  # created | updated | removed | unchanged | absent
    changes: tuple[str, ...] = ()
    backup: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "status": self.status, "changes": list(self.changes),
                "backup": None if self.backup is None else str(self.backup)}


def read_text(path: Path) -> str | None:
    try:
        # Bytes, decoded: read_text would turn CRLF line endings into LF, and every byte
        # outside memdir's entries must come back as it was.
        return _safe.read_file(path, _safe.AGENT_FILE, follow=True).decode("utf-8")
    except FileNotFoundError:
        return None
    except UnsafeFileError as exc:  # a FIFO, a device or a huge file: never waited on
        raise ConfigError(exc.message, exc.hint) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}",
                          f"check that {path} is a readable UTF-8 text file") from None


def json_edit(path: Path, transform: Callable[[dict[str, Any], dict[str, Any] | None],
                                               list[str]]) -> Edit:
    """Apply ``transform(data, data_before_memdir)`` to a JSON file's object."""

    def edit(old: str | None, saved: str | None, created: bool) -> tuple[str | None, list[str]]:
        data = loads(path, old)
        try:
            before = loads(path, saved) if saved is not None else None
        except ConfigError:
            before = None
        new = copy.deepcopy(data)
        changes = transform(new, before)
        if new == data:
            return old, []
        if created and not new:
            return None, changes  # memdir created the file
        if before is not None and new == before:
            return saved, changes
        return dumps(new) + "\n", changes

    return edit


def _same_toml(a: str, b: str) -> bool:
    try:
        return tomllib.loads(a) == tomllib.loads(b)
    except tomllib.TOMLDecodeError:
        return False


def toml_edit(path: Path, python: str | None, args: Sequence[str] = MCP_ARGS) -> Edit:
    """Put (``python`` given, to run with ``args``) or drop memdir's table in a Codex
    ``config.toml``."""

    def edit(old: str | None, saved: str | None, created: bool) -> tuple[str | None, list[str]]:
        text = old or ""
        new, changes = toml_put(path, text, python, args) if python else toml_drop(path, text)
        if not changes:
            return old, []
        if created and not new.strip():
            return None, changes
        if python is None and saved is not None and _same_toml(saved, new):
            return saved, changes
        return new, changes

    return edit


@dataclass(frozen=True)
class _Plan:
    path: Path  # as the user knows it
    real: Path  # where the bytes are (a symlink's target)
    old: str | None
    saved: str | None
    new: str | None
    changes: tuple[str, ...]

    @property
    def status(self) -> str:
        if self.new == self.old:
            return "absent" if self.old is None else "unchanged"
        return "created" if self.old is None else "removed" if self.new is None else "updated"


def _plan(path: Path, edit: Edit) -> _Plan:
    real = path.resolve() if path.is_symlink() else path
    saved = read_text(real.with_name(real.name + BACKUP_SUFFIX))
    old = read_text(real)
    # An empty backup says memdir created the file, unless the file was there, empty.
    created = saved == "" and not real.with_name(real.name + EXISTED_SUFFIX).exists()
    new, changes = edit(old, saved, created)
    return _Plan(path, real, old, saved, new, tuple(changes))


def _commit(plan: _Plan, edit: Edit) -> FileChange:
    for _ in range(3):
        if plan.new == plan.old:
            return FileChange(plan.path, plan.status)
        if read_text(plan.real) == plan.old:
            break
        plan = _plan(plan.path, edit)
    else:
        raise ConfigError(f"{plan.path} kept changing while memdir was editing it",
                          "close the agent that is writing it and run the command again")
    backup = plan.real.with_name(plan.real.name + BACKUP_SUFFIX)
    mode = plan.real.stat().st_mode & 0o7777 if plan.old is not None else None
    plan.real.parent.mkdir(parents=True, exist_ok=True)
    if plan.saved is None:
        if plan.old == "":
            atomic_write(backup.with_name(plan.real.name + EXISTED_SUFFIX), "")
        atomic_write(backup, plan.old or "")
        if mode is not None:
            os.chmod(backup, mode)
    if plan.new is None:
        plan.real.unlink()
        backup.unlink(missing_ok=True)  # empty: there was no file before memdir
    else:
        atomic_write(plan.real, plan.new)
        if mode is not None:
            os.chmod(plan.real, mode)
    wrote = plan.saved is None and plan.old is not None
    return FileChange(plan.path, plan.status, plan.changes, backup if wrote else None)


def apply(edits: list[tuple[Path, Edit]], dry_run: bool) -> tuple[FileChange, ...]:
    plans = [(_plan(path, edit), edit) for path, edit in edits]  # every refusal before a write
    if dry_run:
        return tuple(FileChange(p.path, p.status, p.changes) for p, _ in plans)
    return tuple(_commit(plan, edit) for plan, edit in plans)
