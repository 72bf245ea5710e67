"""Bringing memories back from the PostgreSQL store: session-start context and per-prompt recall.

Context follows seed 000 ("How Memories Are Injected"): active memories by relevance, then
newest created (with a query, those matching it first), the top ``limit`` (default 5, at most
20), grouped by type by :func:`memdir.retrieval.context_format.render_context` in any of its
formats.

Recall follows seed 001 with the rules and values of :mod:`memdir.retrieval.recall` (single-word
prompts skipped, at most 5, each cut at 4 KB, 60 KB per session, a freshness warning on
memories older than a day), selecting by ranked search.

Invariants:
- The context text never exceeds ``budget_tokens`` as counted by
  :func:`memdir.retrieval.context_format.count_tokens`: each memory is added only if the whole
  rendered output still fits, and when not even the empty frame fits nothing is injected.
- Archived memories are never injected nor recalled.
- Session state is in the database: a memory is claimed for a session with
  ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` while the session's row is locked, so two
  processes never surface the same memory twice in a session nor overrun its byte budget.
- Every injected or recalled memory counts an access; a failed count never fails the call.
- A recalled memory the agent drew on afterwards (:func:`record_uses`) counts one use per
  session, as in the SQLite store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memdir.core.errors import InvalidMemoryError
from memdir.core.model import SCOPES, Memory, Scope
from memdir.core.taxonomy import Taxonomy
from memdir.retrieval.context_format import (
    FORMATS,
    Context,
    ContextItem,
    Format,
    count_tokens,
    render_context,
)
from memdir.retrieval.recall import (
    MAX_SESSION_BYTES,
    SPARES,
    Recall,
    Recalled,
    check_request,
    claim_in_order,
)
from memdir.retrieval.search import fts_query
from memdir.team.postgres_conn import COLUMNS, memory_from_row

if TYPE_CHECKING:
    from memdir.capture.transcript import Transcript
    from memdir.team.postgres import PostgresStore

__all__ = ["CONTEXT_LIMIT", "CONTEXT_MAX", "build_context", "recall", "record_uses"]

CONTEXT_LIMIT, CONTEXT_MAX = 5, 20  # seed 000: the top 5 by default, at most 20
POOL = 4  # candidates per slot: some may not fit the budget


def build_context(store: PostgresStore, query: str | None, *, budget_tokens: int, fmt: str,
                  limit: int | None, scopes: Sequence[Scope] | None) -> Context:
    """Choose, render and count the session-start context (see the module docstring)."""
    if fmt not in FORMATS:
        raise InvalidMemoryError(f"unknown context format {fmt!r}",
                                 f"use one of: {', '.join(FORMATS)}")
    if not isinstance(budget_tokens, int) or budget_tokens < 1:
        raise InvalidMemoryError(f"the token budget must be a positive integer, not "
                                 f"{budget_tokens!r}", "pass e.g. --budget 800")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise InvalidMemoryError(f"limit must be at least 1, not {limit!r}")
    form: Format = fmt
    count = min(limit or CONTEXT_LIMIT, CONTEXT_MAX)
    where, params = store.where_clause(None, scopes, None, "active")
    terms = fts_query(query) if isinstance(query, str) else None
    first = "(search @@ websearch_to_tsquery('english', %s)) DESC, " if terms else ""
    with store.connections.db() as conn:
        rows = conn.execute(
            f"SELECT {COLUMNS} FROM memories WHERE {where} ORDER BY {first}"
            "relevance DESC, created DESC, id LIMIT %s",
            [*params, *([terms] if terms else []), count * POOL]).fetchall()
    taxonomies: dict[str, Taxonomy] = dict.fromkeys(SCOPES, store.taxonomy)

    def render(chosen: Sequence[ContextItem]) -> str:
        return render_context(chosen, form, taxonomies=taxonomies, budget=budget_tokens)

    items: list[ContextItem] = []
    for memory in map(memory_from_row, rows):
        if len(items) >= count:
            break
        # One ranking chooses every memory here: seed 002 would call it layer B, contextual.
        item = ContextItem(memory, "B", memory.relevance)
        if count_tokens(render([*items, item])) <= budget_tokens:
            items.append(item)
    text = render(items)
    if count_tokens(text) > budget_tokens:
        text = ""
    store.touch(item.memory for item in items)
    return Context(text, tuple(items), form, budget_tokens, count_tokens(text), 0)


def recall(store: PostgresStore, prompt: str, session_id: str, *, limit: int) -> Recall:
    """Select, claim and return the memories for one prompt (see the module docstring)."""
    limit, answer = check_request(prompt, session_id, limit)
    if answer is not None:
        return answer
    with store.connections.db() as conn:
        row = conn.execute("SELECT bytes FROM recall_sessions WHERE session_id = %s",
                           (session_id,)).fetchone()
        surfaced = {r["id"] for r in conn.execute(
            "SELECT id FROM recall_surfaced WHERE session_id = %s", (session_id,))}
    used = int(row["bytes"]) if row else 0
    if used >= MAX_SESSION_BYTES:
        return Recall(session_id, session_bytes=used, skipped="session recall budget spent")
    hits = store.search(prompt, limit=limit + len(surfaced) + 20, touch=False, dates=False)
    # Spares: another process of this session may claim some of these first.
    fresh = [h.memory for h in hits if h.memory.id not in surfaced][:limit + SPARES]
    if not fresh:
        return Recall(session_id, session_bytes=used)
    items, used = _claim(store, session_id, fresh, limit)
    store.touch(item.memory for item in items)
    return Recall(session_id, tuple(items), "search", used)


def _claim(store: PostgresStore, session_id: str, memories: Sequence[Memory],
           limit: int) -> tuple[list[Recalled], int]:
    """Claim up to ``limit`` memories for the session, in order, within its byte budget;
    one that another process claimed first is passed over."""
    at = store.clock()
    with store.connections.db() as conn, conn.transaction():
        conn.execute("INSERT INTO recall_sessions (session_id, started, updated) VALUES "
                     "(%s, %s, %s) ON CONFLICT DO NOTHING", (session_id, at, at))
        row = conn.execute("SELECT bytes FROM recall_sessions WHERE session_id = %s "
                           "FOR UPDATE", (session_id,)).fetchone()

        def claim(memory: Memory) -> bool:  # a memory deleted meanwhile is not claimed
            return conn.execute(
                "INSERT INTO recall_surfaced (session_id, id, surfaced) SELECT %s, id, %s "
                "FROM memories WHERE id = %s ON CONFLICT DO NOTHING RETURNING id",
                (session_id, at, memory.id)).fetchone() is not None

        out, used = claim_in_order(memories, limit, int(row["bytes"]) if row else 0, claim, at)
        conn.execute("UPDATE recall_sessions SET bytes = %s, recalls = recalls + 1, "
                     "updated = %s WHERE session_id = %s", (used, at, session_id))
    return out, used


def record_uses(store: PostgresStore, session_id: str, transcript: Transcript) -> int:
    """Count one use of each memory recalled into the session that the agent drew on after
    (:func:`memdir.capture.uses.check`), once per session: ``recall_surfaced.used`` is set in the
    transaction that adds to ``used_count``, only where it was not set yet; ``checked`` as
    :func:`memdir.capture.uses.record` sets it."""
    from memdir.capture.uses import Injected, check

    if not isinstance(session_id, str) or not session_id.strip():
        return 0
    with store.connections.db() as conn:
        rows = conn.execute(
            "SELECT s.id, s.surfaced, s.used, m.name, m.description, m.body "
            "FROM recall_surfaced s JOIN memories m ON m.id = s.id "
            "WHERE s.session_id = %s ORDER BY s.surfaced, s.id", (session_id,)).fetchall()
    pending = sorted(r["id"] for r in rows if r["used"] is None)
    if not pending:
        return 0
    uses = check([Injected(r["id"], f"{r['name']}\n{r['description']}\n{r['body']}",
                           r["surfaced"]) for r in rows], transcript)
    found = sorted(set(uses.used) & set(pending))
    at = store.clock()
    with store.connections.db() as conn, conn.transaction():
        counted = conn.execute(
            "WITH marked AS (UPDATE recall_surfaced SET used = %s WHERE session_id = %s "
            "AND id = ANY(%s::text[]) AND used IS NULL RETURNING id) "
            "UPDATE memories SET used_count = used_count + 1, last_used = %s "
            "WHERE id IN (SELECT id FROM marked) RETURNING id",
            (at, session_id, found, at)).fetchall() if found else []
        conn.execute(
            "UPDATE recall_surfaced SET checked = 1 WHERE session_id = %s AND "
            "id = ANY(%s::text[]) AND checked IS NULL" if uses.complete else
            "UPDATE recall_surfaced SET checked = 0 WHERE session_id = %s AND "
            "id = ANY(%s::text[]) AND used IS NULL", (session_id, pending))
    return len(counted)
