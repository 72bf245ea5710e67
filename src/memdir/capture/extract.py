"""Extraction: turning a conversation into memories (seed 000's extractor, seed 002's rules).

With an LLM configured, the last 20 messages (at most 8,000 characters) go to the model with
the taxonomy's guidance and a JSON schema of ``{type, content <= 100 chars, relevance}`` items
(an empty list is a fine answer). Without one, or when the call fails, rule extraction runs on
the user's messages. Either way every candidate goes through the facade's write path: secrets
refused, ``<private>`` stripped, relative dates made absolute, exact duplicates reinforce the
existing memory; near-duplicates are reported, never merged.

Invariants:
- A reply is trusted for nothing: each item is checked (known type, non-empty content of at
  most 100 characters, relevance a number in [0, 1], at most ``MAX_ITEMS``); anything else is
  skipped with its reason. A malformed or oversized reply never stores anything broken.
- A rule candidate comes from one user message: the message said before it ("speaker:
  text", secrets redacted, bounded) is stored as its search context
  (:func:`memdir.capture.sessions.turn_context`). An LLM item comes from the whole window: none.
- Messages up to the agent's own last memory write (a Write/Edit into a memory directory,
  ``memdir store``, an MCP memory tool) are not extracted again (seed 004).
- A session is extracted once per message: a cursor per session id (in the index) records
  the last message considered, so a Stop hook running after every turn does not reinforce
  the same memory over and over. The cursor is read and moved past the transcript's last
  message in one write transaction before anything is extracted: of processes extracting
  one transcript at once (Stop and PreCompact hooks), only one gets a given message. A
  process that fails after claiming loses its messages rather than have two store them.
  ``dry_run`` reads the cursor and never moves it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from memdir.capture.extract_llm import MAX_CONTENT, MAX_ITEMS, Raw, by_llm
from memdir.capture.transcript import Message, Transcript
from memdir.core.dates import anchor_day
from memdir.core.errors import MemdirError, SecretDetectedError
from memdir.core.model import Memory, Scope, format_time
from memdir.core.safety import find_secrets, redact_secrets, strip_private
from memdir.core.store import norm_hash
from memdir.core.taxonomy import Taxonomy
from memdir.retrieval.similarity import similarity

if TYPE_CHECKING:
    from memdir.core.memory_store import MemoryStore
    from memdir.llm.client import LLM
    from memdir.memdir import Memdir

__all__ = ["MAX_CONTENT", "MAX_ITEMS", "ExtractReport", "Extracted", "extract", "extract_into",
           "near_duplicates"]

Action = Literal["stored", "reinforced", "would-store", "would-reinforce", "skipped"]

_MEMORY_TOOLS = ("memory_learn", "memory_episode", "memory_procedure", "memory_update")
_MEMDIR_WRITE = re.compile(r"\bmemdir\s+(?:store|episode|procedure|update)\b")


@dataclass(frozen=True)
class Extracted:
    """One candidate and what became of it."""

    content: str
    type: str
    relevance: float
    action: Action
    reason: str = ""
    memory: Memory | None = None
    near_duplicates: tuple[str, ...] = ()
    excerpt: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"content": self.content, "type": self.type, "relevance": self.relevance,
                "action": self.action, "reason": self.reason,
                "id": self.memory.id if self.memory else None,
                "file": str(self.memory.path) if self.memory and self.memory.path else None,
                "near_duplicates": list(self.near_duplicates), "excerpt": self.excerpt}


@dataclass(frozen=True)
class ExtractReport:
    """What :meth:`Memdir.extract` did (or, with ``dry_run``, would do)."""

    method: Literal["llm", "rules"]
    items: tuple[Extracted, ...]
    messages: int  # messages considered
    session_id: str = ""
    dry_run: bool = False
    agent_wrote_through: int = -1  # the last message index the agent's own memory write covers

    def _with(self, *actions: str) -> list[Extracted]:
        return [item for item in self.items if item.action in actions]

    @property
    def stored(self) -> list[Extracted]:
        return self._with("stored", "would-store")

    @property
    def reinforced(self) -> list[Extracted]:
        return self._with("reinforced", "would-reinforce")

    @property
    def skipped(self) -> list[Extracted]:
        return self._with("skipped")

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "session_id": self.session_id, "dry_run": self.dry_run,
                "messages": self.messages, "agent_wrote_through": self.agent_wrote_through,
                "items": [item.to_dict() for item in self.items]}


def _agent_write(message: Message, memory_dirs: Sequence[str]) -> bool:
    """Did the agent write a memory itself in this message?"""
    if message.kind != "tool_use":
        return False
    name = message.tool_name
    if name.startswith("mcp__memdir__") or name in _MEMORY_TOOLS:
        return True
    given = message.tool_input
    target = str(given.get("file_path") or given.get("notebook_path") or given.get("path") or "")
    writes = name in ("Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch")
    inside = "/memory/" in target.replace("\\", "/") or any(target.startswith(d)
                                                             for d in memory_dirs)
    if target and writes and inside:
        return True
    patch = str(given.get("input") or "")  # Codex apply_patch names its files in the patch
    for line in patch.splitlines():
        if line.startswith(("*** Add File:", "*** Update File:")):
            path = line.split(":", 1)[1].strip()
            if "/memory/" in path or any(path.startswith(d) for d in memory_dirs):
                return True
    command = given.get("command") or given.get("cmd") or ""
    text = " ".join(map(str, command)) if isinstance(command, list) else str(command)
    return bool(_MEMDIR_WRITE.search(text))


def _window_start(transcript: Transcript, cursor: int, memory_dirs: Sequence[str]) -> tuple[
        int, int]:
    """(first message index to consider, last index covered by the agent's own writes)."""
    wrote = max((m.index for m in transcript.messages if _agent_write(m, memory_dirs)),
                default=-1)
    return max(cursor, wrote) + 1, wrote


SECRET_SKIPPED = "contains a secret"


def _by_rules(messages: Sequence[Message], taxonomy: Taxonomy,
              conversation: Sequence[Message] = ()) -> list[Raw]:
    """Rule candidates of ``messages``, each with the message said before it in
    ``conversation`` as its search context."""
    from memdir.capture.rules import extract_rules
    from memdir.capture.sessions import turn_context

    out: list[Raw] = []
    for message in messages:
        # A message holding a secret yields nothing, and the report says so (never its text).
        found = find_secrets([strip_private(message.text)])
        if found:
            out.append((f"(message {message.index})", "", 0.0, "",
                        f"{SECRET_SKIPPED}: {', '.join(found)}", ""))
            continue
        candidates = extract_rules(message.text, taxonomy, message_index=message.index)
        context = turn_context(conversation, message.index) if candidates else ""
        for c in candidates:
            out.append((c.content, c.type, c.relevance, c.excerpt, "", context))
    return out


# -- near-duplicates ---------------------------------------------------------------------------

def near_duplicates(md: Memdir, text: str, *, scope: Scope, exclude: str = "",
                    threshold: float = 0.5) -> list[Memory]:
    """Active memories of a scope whose words overlap ``text``'s by ``threshold`` or more."""
    hits = md.search(text, limit=10, scopes=[scope], touch=False, dates=False)
    return [h.memory for h in hits
            if h.memory.id != exclude and similarity(text, h.memory.body) >= threshold]


# -- the pipeline ------------------------------------------------------------------------------

def _cursor(md: Memdir, session_id: str) -> int:
    if not session_id:
        return -1
    row = md.index.conn.execute("SELECT message_index FROM extract_cursor WHERE session_id = ?",
                                (session_id,)).fetchone()
    return int(row[0]) if row else -1


def _claim_cursor(md: Memdir, session_id: str, last: int, at: datetime) -> int:
    """The session's cursor, moved to ``last`` in the same write transaction: the messages
    after the cursor up to ``last`` are this process's to extract, and no other's."""
    with md.index.write() as conn:
        row = conn.execute("SELECT message_index FROM extract_cursor WHERE session_id = ?",
                           (session_id,)).fetchone()
        cursor = int(row[0]) if row else -1
        if last > cursor:
            conn.execute(
                "INSERT INTO extract_cursor (session_id, message_index, updated) "
                "VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
                "message_index = excluded.message_index, updated = excluded.updated",
                (session_id, last, format_time(at)))
    return cursor


def _exists(md: Memdir, scope: Scope, body: str) -> bool:
    return md.index.conn.execute(
        "SELECT 1 FROM memories WHERE dir = ? AND norm_hash = ? AND status = 'active'",
        (md.directory(scope).key, norm_hash(body))).fetchone() is not None


def _secret_skipped(raw: Raw, exc: SecretDetectedError) -> Extracted:
    """A candidate refused for a secret, reported as such and without the secret."""
    content, kind, relevance, excerpt, _, _ = raw
    return Extracted(redact_secrets(content), kind, relevance, "skipped",
                     f"{SECRET_SKIPPED}: {', '.join(exc.what)}", excerpt=redact_secrets(excerpt))


def _apply(md: Memdir, raw: Raw, *, scope: Scope, dry_run: bool, session_id: str) -> Extracted:
    content, kind, relevance, excerpt, reason, context = raw
    if reason:
        return Extracted(content, kind, relevance, "skipped", reason, excerpt=excerpt)
    meta = {"session": session_id} if session_id else {}
    if excerpt:
        meta["excerpt"] = excerpt
    try:
        draft = md._draft(content, scope, type=kind, relevance=relevance, meta=meta,
                          source="extracted", context=context)
    except SecretDetectedError as exc:
        return _secret_skipped(raw, exc)
    except MemdirError as exc:  # text that cannot be a memory
        return Extracted(content, kind, relevance, "skipped", exc.message, excerpt=excerpt)
    duplicate = _exists(md, scope, draft.body)
    near = [] if duplicate else near_duplicates(md, draft.body, scope=scope)
    names = tuple(m.file for m in near)
    if dry_run:
        action: Action = "would-reinforce" if duplicate else "would-store"
        return Extracted(draft.body, draft.type, draft.relevance, action, memory=None,
                         near_duplicates=names, excerpt=excerpt)
    memory = md.store(content, type=kind, scope=scope, relevance=relevance, meta=meta,
                      source="extracted", context=context)
    return Extracted(memory.body, memory.type, memory.relevance,
                     "reinforced" if duplicate else "stored", memory=memory,
                     near_duplicates=names, excerpt=excerpt)


def extract(md: Memdir, transcript: Transcript, *, llm: LLM | None, dry_run: bool,
            scope: Scope, session_id: str) -> ExtractReport:
    at = md._clock()
    memory_dirs = [str(d.path) for d in md._dirs()]
    last = max((m.index for m in transcript.messages), default=-1)
    claim = not dry_run and session_id and transcript.messages
    cursor = _claim_cursor(md, session_id, last, at) if claim else _cursor(md, session_id)
    start, wrote = _window_start(transcript, cursor, memory_dirs)
    fresh = [m for m in transcript.messages if m.index >= start]
    taxonomy = md.directory(scope).taxonomy
    window = dataclasses.replace(transcript, messages=tuple(fresh)).tail(20, 8000)
    raws: list[Raw] | None = None
    method: Literal["llm", "rules"] = "rules"
    if llm is not None and llm.available and window:
        raws = by_llm(llm, window, taxonomy, anchor_day(at).isoformat())
        method = "llm" if raws is not None else "rules"
    if raws is None:
        users = dataclasses.replace(transcript, messages=tuple(fresh)).user_messages()
        raws = _by_rules(users, taxonomy, transcript.messages)
    items: list[Extracted] = []
    seen: set[str] = set()
    for raw in raws:
        key = " ".join(raw[0].lower().split())
        if key and key in seen and not raw[4]:
            items.append(Extracted(raw[0], raw[1], raw[2], "skipped", "repeated in this "
                                   "conversation", excerpt=raw[3]))
            continue
        seen.add(key)
        items.append(_apply(md, raw, scope=scope, dry_run=dry_run, session_id=session_id))
    return ExtractReport(method, tuple(items), len(fresh), session_id, dry_run, wrote)


def extract_into(store: MemoryStore, transcript: Transcript, *, taxonomy: Taxonomy,
                 scope: Scope, session_id: str, dry_run: bool) -> ExtractReport:
    """Rule extraction into any store (the team server's database): every user message's
    candidates, each through the store's own write path (an exact duplicate reinforces).
    Such a store keeps no cursor, so its callers send each stretch of conversation once."""
    items: list[Extracted] = []
    seen: set[str] = set()
    users = transcript.user_messages()
    for content, kind, relevance, excerpt, reason, context in _by_rules(
            users, taxonomy, transcript.messages):
        key = " ".join(content.lower().split())
        if reason or key in seen:
            items.append(Extracted(content, kind, relevance, "skipped",
                                   reason or "repeated in this conversation", excerpt=excerpt))
            continue
        seen.add(key)
        if dry_run:
            items.append(Extracted(content, kind, relevance, "would-store", excerpt=excerpt))
            continue
        meta = {k: v for k, v in (("session", session_id), ("excerpt", excerpt)) if v}
        try:
            memory = store.store(content, type=kind, scope=scope, relevance=relevance,
                                 meta=meta, source="extracted", context=context)
        except SecretDetectedError as exc:
            items.append(_secret_skipped((content, kind, relevance, excerpt, "", ""), exc))
            continue
        except MemdirError as exc:  # text that cannot be a memory
            items.append(Extracted(content, kind, relevance, "skipped", exc.message,
                                   excerpt=excerpt))
            continue
        items.append(Extracted(memory.body, memory.type, memory.relevance,
                               "reinforced" if memory.reinforced else "stored", memory=memory,
                               excerpt=excerpt))
    return ExtractReport("rules", tuple(items), len(transcript.messages), session_id, dry_run)
