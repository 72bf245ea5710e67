"""The store interface: what a place that keeps memories must do, whatever it is built on.

Two implementations exist: :class:`memdir.Memdir` (Markdown files plus the SQLite index, the
source of truth on one machine) and :class:`memdir.team.postgres.PostgresStore` (a team server's
database). The HTTP API (:mod:`memdir.team.server`) and ``memdir export`` / ``import`` speak only
this interface, and one behavioural contract suite (``tests/test_store_contract.py``) runs
against both, so the two cannot drift apart.

Invariants every implementation keeps:

- values in and out are :mod:`memdir.core.model` values (``Memory``, ``Hit``, ``Stats``) and
  :mod:`memdir.retrieval.context_format` / :mod:`memdir.retrieval.recall` values (``Context``,
  ``Recall``);
- every write is validated by :func:`memdir.core.draft.draft` / :func:`memdir.core.draft.revise`, so
  secrets are refused, ``<private>`` text is stripped, relative dates are made absolute and
  unknown types are refused the same way everywhere;
- an exact duplicate (same scope, same content after :func:`memdir.core.store.normalise`: case,
  whitespace, trailing sentence punctuation and surrounding quotes) reinforces the existing
  memory and returns it, never a second copy, even under concurrent writers;
- reads that return memories (``get``, ``search`` with ``touch``, ``context``) count an
  access (shown), and a failing count never fails the read; a use (the agent drew on an
  injected memory, :meth:`MemoryStore.record_uses`) is counted apart, once per session, and
  weighs more in strength (:mod:`memdir.core.strength`);
- errors are :class:`memdir.core.errors.MemdirError` subclasses carrying a hint.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memdir.core.model import Hit, Memory, Scope, Stats

if TYPE_CHECKING:
    from memdir.capture.transcript import Transcript
    from memdir.retrieval.context_format import Context
    from memdir.retrieval.recall import Recall

__all__ = ["MemoryStore"]


@runtime_checkable
class MemoryStore(Protocol):
    """A place that keeps memories: store, find, inject, change and count them."""

    def store(self, content: str, *, type: str, scope: Scope = "project",
              name: str | None = None, description: str | None = None,
              tags: Iterable[str] = (), paths: Iterable[str] = (),
              relevance: float | str | None = None, meta: Mapping[str, Any] | None = None,
              source: str = "manual", context: str | None = None,
              date: date | datetime | str | None = None) -> Memory:
        """Store one memory; an exact duplicate reinforces the existing one instead.
        ``context`` is search context: searched, never shown, injected or recalled (one line,
        at most ``MAX_CONTEXT`` characters); ``date`` the day the memory is about, searched
        as words with its ``created`` day."""
        ...

    def store_many(self, items: Iterable[Mapping[str, Any]]) -> builtins.list[Memory]:
        """Store many (each a dict of ``store``'s keyword arguments plus ``content``)."""
        ...

    def get(self, ref: str) -> Memory:
        """A memory by id (MemoryNotFoundError if none). Counts as an access."""
        ...

    def update(self, ref: str, *, content: str | None = None, name: str | None = None,
               description: str | None = None, tags: Iterable[str] | None = None,
               paths: Iterable[str] | None = None, relevance: float | str | None = None,
               meta: Mapping[str, Any] | None = None, reinforce: bool = False) -> Memory:
        ...

    def reclassify(self, ref: str, type: str) -> Memory:
        ...

    def archive(self, ref: str) -> Memory:
        ...

    def restore(self, ref: str) -> Memory:
        ...

    def delete(self, ref: str) -> Memory:
        ...

    def search(self, query: str, *, limit: int = 10, types: Sequence[str] | None = None,
               scopes: Sequence[Scope] | None = None, tags: Sequence[str] | None = None,
               include_archived: bool = False, touch: bool = True) -> builtins.list[Hit]:
        """Full-text search (stemmed, any input safe), ranked by match × strength."""
        ...

    def list(self, *, types: Sequence[str] | None = None, scopes: Sequence[Scope] | None = None,
             tags: Sequence[str] | None = None, status: str = "active",
             limit: int | None = None, order: str = "relevance") -> builtins.list[Memory]:
        """Memories matching the filters; ``status`` active, archived or all; ``order``
        relevance (then recency), recent (newest created first) or updated (last changed
        first)."""
        ...

    def context(self, query: str | None = None, *, budget_tokens: int = 800,
                format: str = "markdown", limit: int | None = None,
                scopes: Sequence[Scope] | None = None) -> Context:
        """Session-start context within ``budget_tokens`` (a hard cap); counts accesses."""
        ...

    def recall(self, prompt: str, session_id: str, *, limit: int = 5) -> Recall:
        """Up to ``limit`` memories for a prompt, none already surfaced in the session."""
        ...

    def record_uses(self, session_id: str, transcript: Transcript) -> int:
        """Count as used, once per session, each memory injected into the session that the
        agent's later words or tool calls in ``transcript`` draw on (:mod:`memdir.capture.uses`);
        how many were newly counted."""
        ...

    def stats(self) -> Stats:
        """Counts, strength bands and usefulness (:mod:`memdir.core.usefulness`)."""
        ...

    def close(self) -> None:
        ...
