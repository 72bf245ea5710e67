"""Moving memories in and out: adopting Claude Code's auto-memory directory in place,
export and import, and the text as memdir would store it: functions of the
:class:`~memdir.memdir.Memdir` facade, bound as its methods as for :mod:`memdir.capture.ops`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memdir.core.config import load_config, save_adopted
from memdir.core.errors import InvalidMemoryError
from memdir.core.model import Scope
from memdir.core.paths import claude_code_memory_dir

if TYPE_CHECKING:
    from memdir.memdir import Memdir
    from memdir.upkeep.transfer import ImportReport

__all__ = ["adopt_claude_code", "clean", "export", "import_"]


def adopt_claude_code(md: Memdir, directory: str | Path | None = None) -> Path:
    """Use Claude Code's auto-memory directory for this project, in place.

    Its files keep their format (files without an ``id`` use their file name), the store
    switches to the ``claude-code`` taxonomy, and a hand-written MEMORY.md is kept once
    as MEMORY.md.orig before memdir first regenerates it.
    """
    path = Path(directory).expanduser().resolve() if directory else \
        claude_code_memory_dir(md.roots.canonical)
    if not path.is_dir():
        raise InvalidMemoryError(
            f"no Claude Code memory directory at {path}",
            "run Claude Code in this project first, or pass the directory explicitly")
    save_adopted(md.home, md.roots.canonical, path, "claude-code")
    md.config = load_config(md.home, md.roots.worktree)
    md._paths["project"] = path
    md.reconcile()
    return path


def export(md: Memdir, dest: str | Path, *, format: str = "markdown",
           scopes: Sequence[Scope] | None = None) -> int:
    """Write all memories (active and archived) to a folder of Markdown files (a new or
    empty one, or one holding only this export's files) or JSONL."""
    from memdir.upkeep.transfer import export_memories

    return export_memories(md, dest, fmt=format, scopes=scopes)


def import_(md: Memdir, src: str | Path, *, scope: Scope | None = None) -> ImportReport:
    """Import a folder of memory files, one memory file, or a JSON Lines file; bad items
    are reported and the rest imported."""
    from memdir.upkeep.transfer import import_memories

    return import_memories(md, src, scope=scope)


def clean(md: Memdir, text: str) -> str:
    """Text as memdir would store it: <private> stripped, relative dates absolute."""
    from memdir.core.draft import clean_text

    return clean_text(text, md._clock().astimezone().date())
