"""For agent builders (seed 001): recall prefetch, and the memory section of a system prompt.

Prefetch starts recall the moment a user prompt arrives, on a background thread, so the side
query runs while the main model is already working. Invariants:
- :func:`start_recall_prefetch` returns at once; ``ready()`` never blocks; ``take()`` hands
  the result over exactly once (later calls, and calls before it is ready, return None);
- the thread opens its own :class:`Memdir` (its own SQLite connection), so the caller's
  instance is never used from two threads;
- a failure inside the thread is logged and becomes an empty recall: prefetch never raises
  into the agent's loop;
- no process forks while the thread works (:mod:`memdir.core.fork_gate`): a child never
  inherits its SQLite locks held.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memdir.core.errors import warn
from memdir.retrieval.recall import MAX_RECALL, Recall

if TYPE_CHECKING:
    from memdir.memdir import Memdir

__all__ = ["RecallPrefetch", "build_memory_prompt_section", "start_recall_prefetch"]


class RecallPrefetch:
    """A recall running in the background. Poll with ``ready()``, collect with ``take()``."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._result: Recall | None = None
        self._taken = False
        self.error: str | None = None

    def ready(self) -> bool:
        """True once the recall has finished (successfully or not). Never blocks."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block up to ``timeout`` seconds for the result; True when it is ready."""
        return self._done.wait(timeout)

    def take(self) -> Recall | None:
        """The result, the first time it is asked for after it is ready; else None."""
        if not self._done.is_set():
            return None
        with self._lock:
            if self._taken:
                return None
            self._taken = True
            return self._result

    def _finish(self, result: Recall, error: str | None = None) -> None:
        self._result, self.error = result, error
        self._done.set()


def start_recall_prefetch(prompt: str, session_id: str, *, home: str | Path | None = None,
                          project: str | Path | None = None, limit: int = MAX_RECALL,
                          use_llm: bool = True,
                          paths: Sequence[str] | None = None) -> RecallPrefetch:
    """Start :meth:`Memdir.recall` for ``prompt`` on a background thread; returns at once."""
    handle = RecallPrefetch(session_id)

    def work() -> None:
        from memdir.core.fork_gate import working
        from memdir.memdir import Memdir

        try:
            with working(), Memdir(home=home, project=project) as md:  # no fork meanwhile
                result = md.recall(prompt, session_id, limit=limit, use_llm=use_llm,
                                   paths=paths)
        except Exception as exc:  # the agent's loop must never see a recall failure
            warn("memdir: recall prefetch failed: %s", exc)
            handle._finish(Recall(session_id, skipped="error"), str(exc))
            return
        handle._finish(result)

    threading.Thread(target=work, name="memdir-recall-prefetch", daemon=True).start()
    return handle


_NOT_TO_SAVE = """\
- Anything that can be read from the project as it is: code patterns, architecture, file
  paths (read the code instead), git history (use git log), anything already in CLAUDE.md.
- Ephemeral task details: what you are doing right now, debugging steps, intermediate
  results.
- Secrets of any kind (memdir refuses them).
- When asked to "remember this list", keep only what is surprising or not derivable
  (a deadline, an unexpected finding), not the list itself."""


def build_memory_prompt_section(md: Memdir | None = None) -> str:
    """The memory section of an agent's system prompt: where memories live, their types,
    how to save one, what not to save, and the current MEMORY.md index.

    ``md`` defaults to the memory of the working directory's project."""
    if md is None:
        from memdir.memdir import Memdir

        with Memdir() as own:
            return build_memory_prompt_section(own)
    project = md.directory("project")
    types = "\n".join(f"- **{t.name}**: {t.guidance}" for t in project.taxonomy.types
                      if not t.system)
    index = md.memory_index("project").strip()
    return f"""# Memory

You have a persistent, file-based memory at `{project.path}` (this project) and
`{md.directory("user").path}` (the user, across projects). Memories are Markdown files with
YAML frontmatter; the index below lists them, and the most useful ones are added to the
conversation when they matter.

## Memory types
{types}

## How to save a memory
Run `memdir store --type TYPE [--scope user|project] "CONTENT"`, or write a file
`{project.path}/TYPE_short-name.md` with frontmatter (name, description, type) and the
content as its body. `memdir store` dates relative words ("after Thursday" -> "after
Thursday (2026-03-05)"); in a file, write the date yourself. Feedback memories carry
**Why:** and **How to apply:** lines.

## What NOT to save
{_NOT_TO_SAVE}

{"## Current memory index" + chr(10) + index if index else "(No memories saved yet.)"}
"""
