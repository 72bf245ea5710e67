"""Indexed session transcripts (seed 003): finished conversations made searchable.

A transcript is split into chunks of consecutive messages (about ``CHUNK_CHARS`` characters,
a message longer than that split on its own) and each chunk is indexed with FTS5, with the
session id and the range of messages it covers, so a search hit can be traced back to where
it was said.

Invariants:
- Session chunks are searchable (``search(..., sources=("memories", "sessions"))``) and never
  injected: context and recall read only the memories table.
- What is indexed is what people said and the summaries: user and assistant text. Tool calls
  and tool output are left out (noise, and the likeliest place for pasted credentials);
  ``<private>`` spans are stripped and anything that looks like a secret is redacted.
- Slash-command echoes, command output and reminders in the user's turn
  (:attr:`memdir.capture.transcript.Message.injected`) and Claude Code meta lines are not indexed:
  no one said them.
- A chunk is dated by the transcript's own timestamps (:func:`chunk_messages`); only a
  transcript with none at all is dated by when it was indexed.
- Indexing a session again replaces its chunks, in one transaction.
- Chunks belong to the project's memory directory: a project searches its own sessions.
- Each chunk is also searched by its search context (the message before it, "speaker: text",
  as :func:`turn_context` gives it) and its day as words (:func:`memdir.core.model.date_words`),
  in FTS5 columns of their own weighing less than its text; neither is ever shown.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from memdir.capture.transcript import Message, Transcript
from memdir.core.errors import InvalidMemoryError
from memdir.core.index import Index
from memdir.core.model import (
    Hit,
    Memory,
    SessionRef,
    bound_context,
    date_words,
    format_time,
    parse_time,
)
from memdir.core.safety import redact_secrets, strip_private
from memdir.retrieval.scale import lexical_evidence, scored
from memdir.retrieval.search import fts_query, idf_total

__all__ = ["CHUNK_CHARS", "SESSION_STRENGTH", "SessionIndex", "chunk_messages", "index_session",
           "search_sessions", "turn_context"]

CHUNK_CHARS = 2000
# A chunk is scored as a memory of strength 0 (memdir.retrieval.scale): below any memory that
# matches as well, on the same scale, so the two kinds of hit interleave by score.
SESSION_STRENGTH = 0.0
# text, context, dates: the chunk's own words weigh most (as a memory's body over its context)
BM25_WEIGHTS = (1.0, 0.5, 0.5)


@dataclass(frozen=True)
class Chunk:
    number: int
    first_message: int
    last_message: int
    text: str
    started: datetime | None
    context: str = ""  # the message before the chunk (turn_context)


@dataclass(frozen=True)
class SessionIndex:
    """What :meth:`Memdir.index_session` did."""

    session_id: str
    chunks: int
    messages: int

    def to_dict(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "chunks": self.chunks, "messages": self.messages}


def _speaker(message: Message) -> str:
    return "summary" if message.kind == "summary" else message.role


def _clean(text: str) -> str:
    return redact_secrets(strip_private(text)).strip()


def _said(message: Message) -> bool:
    """A message people said (or a summary): what chunks and search context are made of. A
    slash-command echo or command output in the user's turn was not said by anyone."""
    return message.kind in ("text", "summary") and not message.sidechain and not message.injected


def turn_context(messages: Sequence[Message], index: int) -> str:
    """Search context for what was said at message ``index``: the message said before it, as
    "speaker: text", ``<private>`` spans stripped, secrets redacted, one line of at most
    ``MAX_CONTEXT`` characters (its end: the words just before); "" when there is none."""
    for message in reversed([m for m in messages if m.index < index and _said(m)]):
        text = _clean(message.text)
        if text:
            return _as_context(f"{_speaker(message)}: {text}")
    return ""


def _as_context(line: str) -> str:
    line = " ".join(line.split())
    return bound_context(line if len(line) <= 2000 else line[-2000:])


def chunk_messages(messages: Sequence[Message], size: int = CHUNK_CHARS) -> list[Chunk]:
    """Consecutive indexable messages grouped into chunks of about ``size`` characters. A
    chunk starts at the transcript's own time: its first message's timestamp, else the last
    one before it (a tool call, an unsaid line), else the first after it in the transcript;
    None only when no message has a time."""
    chunks: list[Chunk] = []
    lines: list[str] = []
    before = context = ""  # the line of the message before this one; the chunk's context
    first = last = -1
    started: datetime | None = None
    latest: datetime | None = None  # the last time seen, said or not
    length = 0

    def flush() -> None:
        nonlocal lines, length, first, started
        if lines:
            chunks.append(Chunk(len(chunks), first, last, "\n".join(lines), started,
                                _as_context(context)))
        lines, length, first, started = [], 0, -1, None

    for message in messages:
        latest = message.timestamp or latest
        if lines and started is None:
            started = latest
        text = _clean(message.text) if _said(message) else ""
        if not text:
            continue
        line = f"{_speaker(message)}: {text}"
        for start in range(0, len(line), size):  # a huge message spans several chunks
            piece = line[start:start + size]
            if length and length + len(piece) > size:
                flush()
            if first < 0:
                first, started, context = message.index, latest, before
            last = message.index
            lines.append(piece)
            length += len(piece)
        before = line
    flush()
    known = next((m.timestamp for m in messages if m.timestamp), None)
    return [c if c.started else replace(c, started=known) for c in chunks]


def index_session(index: Index, directory: str, transcript: Transcript, session_id: str,
                  source: str = "") -> SessionIndex:
    if not isinstance(session_id, str) or not session_id.strip():
        raise InvalidMemoryError("no session id: the transcript does not name its session",
                                 "pass one with --session ID")
    # A transcript with no time at all (plain text, a bare message list) is dated when indexed.
    now = datetime.now(UTC)
    chunks = [c if c.started else replace(c, started=now)
              for c in chunk_messages(transcript.messages)]
    with index.write() as conn:
        conn.execute("DELETE FROM session_chunks WHERE dir = ? AND session_id = ?",
                     (directory, session_id))
        conn.executemany(
            "INSERT INTO session_chunks (dir, session_id, chunk, first_message, last_message, "
            "started, text, transcript, context, dates) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(directory, session_id, c.number, c.first_message, c.last_message,
              format_time(c.started) if c.started else None, c.text, source, c.context,
              date_words(c.started)) for c in chunks])
    return SessionIndex(session_id, len(chunks), len(transcript.messages))


def _as_memory(row: sqlite3.Row) -> Memory:
    """A chunk seen as a memory of type ``session``, so every renderer can show it."""
    text = row["text"]
    stamp = parse_time(row["started"]) or datetime.fromtimestamp(0, UTC)
    label = f"Session {row['session_id']} messages {row['first_message']}-{row['last_message']}"
    return Memory(id=f"{row['session_id']}#{row['chunk']}", name=label,
                  description=" ".join(text.split())[:200], type="session", body=text,
                  scope="project", relevance=0.0, source="session", created=stamp,
                  updated=stamp)


def search_sessions(conn: sqlite3.Connection, query: str, directories: Sequence[str], *,
                    limit: int, dates: bool = True) -> list[Hit]:
    """Session chunks matching ``query`` (BM25), scored on the memories' scale
    (:mod:`memdir.retrieval.scale`: lexical evidence in ``session_fts``, strength 0); with
    ``dates=False`` a chunk's own words or context must match, not only its day."""
    fts = fts_query(query)
    if fts is None or not directories:
        return []
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    rows = conn.execute(
        f"SELECT c.*, bm25(session_fts, {weights}) AS rank FROM session_fts "
        "JOIN session_chunks c ON c.rowid = session_fts.rowid "
        f"WHERE session_fts MATCH ? AND c.dir IN ({','.join('?' * len(directories))}) "
        + ("" if dates else  # as for memories (memdir.retrieval.search.OWN_COLUMNS)
           "AND session_fts.rowid IN (SELECT rowid FROM session_fts WHERE session_fts MATCH ?) ")
        + f"ORDER BY rank LIMIT {int(limit)}",
        [fts, *directories, *([] if dates else [f"{{text context}} : ({fts})"])]).fetchall()
    ideal = idf_total(conn, query, "session_fts")
    hits = []
    for row in rows:
        match = lexical_evidence(-float(row["rank"]), ideal)
        ref = SessionRef(row["session_id"], row["chunk"], row["first_message"],
                         row["last_message"], row["transcript"])
        hits.append(Hit(_as_memory(row), scored(match, SESSION_STRENGTH), match,
                        SESSION_STRENGTH, ref))
    return hits
