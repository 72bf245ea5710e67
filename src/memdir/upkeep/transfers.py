"""Moving memories in and out: adopting Claude Code's auto-memory directory in place,
export and import, and the text as memdir would store it. A mixin of the
:class:`~memdir.memdir.Memdir` facade, like :mod:`memdir.capture.ops`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from memdir.core.config import load_config, save_adopted
from memdir.core.errors import InvalidMemoryError
from memdir.core.model import Scope
from memdir.core.paths import claude_code_memory_dir

if TYPE_CHECKING:
    from memdir.memdir import Memdir
    from memdir.upkeep.transfer import ImportReport

__all__ = ["Transfers"]


class Transfers:
    """Methods of :class:`Memdir`."""

    def _transfers_md(self) -> Memdir:
        return cast("Memdir", self)

    def adopt_claude_code(self, directory: str | Path | None = None) -> Path:
        """Use Claude Code's auto-memory directory for this project, in place.

        Its files keep their format (files without an ``id`` use their file name), the store
        switches to the ``claude-code`` taxonomy, and a hand-written MEMORY.md is kept once
        as MEMORY.md.orig before memdir first regenerates it.
        """
        md = self._transfers_md()
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

    def export(self, dest: str | Path, *, format: str = "markdown",
               scopes: Sequence[Scope] | None = None) -> int:
        """Write all memories (active and archived) to a folder of Markdown files (a new or
        empty one, or one holding only this export's files) or JSONL."""
        from memdir.upkeep.transfer import export_memories

        return export_memories(self._transfers_md(), dest, fmt=format, scopes=scopes)

    def import_(self, src: str | Path, *, scope: Scope | None = None) -> ImportReport:
        """Import a folder of memory files, one memory file, or a JSON Lines file; bad items
        are reported and the rest imported."""
        from memdir.upkeep.transfer import import_memories

        return import_memories(self._transfers_md(), src, scope=scope)

    def clean(self, text: str) -> str:
        """Text as memdir would store it: <private> stripped, relative dates absolute."""
        from memdir.core.draft import clean_text

        return clean_text(text, self._transfers_md()._clock().astimezone().date())
