"""What the stop, pre-compact and session-end hooks read of the agent's transcript: only a
Claude Code or Codex session file, from where the last read of the session ended, in
bounded memory and time (:mod:`memdir.capture.transcript_file` does the reading).

Invariants:
- ``transcript_path`` is hostile: a symlink, a directory, a FIFO, a device, or a file that
  is not in an agent's format (plain text, /etc/shadow) is refused with
  :class:`InvalidMemoryError` before a single message is made of it; the hook logs that.
- Extraction reads on from the session's byte offset (kept next to the extraction cursor,
  with the index of the last message before it, so messages are numbered as a read from the
  start numbers them); at most ``EXTRACT_BUDGET`` bytes, the end of what is new. When more
  is new than that, the older part is left unread (and logged) and the window's messages
  are numbered after the extraction cursor: a hook's work does not grow with the file.
- A window is one process's: :func:`claim_window` moves the offset from the value the read
  started at to the window's end in one write transaction, and fails if another process
  moved it meanwhile (that process extracts the stretch; the rest waits for the next hook).
  Then the extraction cursor (``extract_cursor.message_index``) is claimed as before, so a
  process that dies after claiming loses its messages rather than have two store them.
- The session index covers the last ``SESSION_BUDGET`` bytes of the file; when the file is
  larger, its message numbers count from the first whole line of that stretch.
- Each read stops at ``READ_SECONDS``; the offset claimed is where it stopped, so the next
  hook goes on from there.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

from memdir.capture.transcript import Message, Transcript
from memdir.capture.transcript_file import (
    NOT_AGENT_HINT,
    Window,
    agent_format,
    open_transcript,
    read_window,
)
from memdir.core.errors import InvalidMemoryError
from memdir.core.model import format_time

if TYPE_CHECKING:
    from memdir.memdir import Memdir

__all__ = ["EXTRACT_BUDGET", "READ_SECONDS", "SESSION_BUDGET", "Reading", "claim_window",
           "read_for_extract", "read_for_index"]

EXTRACT_BUDGET = 8 << 20  # bytes: a few hundred turns, far more than one turn adds
SESSION_BUDGET = 16 << 20
READ_SECONDS = 5.0


@dataclass(frozen=True)
class Reading:
    """A window of the transcript, the session it belongs to, and the offset it was read
    from (what :func:`claim_window` expects to find)."""

    window: Window
    session_id: str
    transcript: Transcript  # the window's messages, plus the agent's last message if new
    offset: tuple[int, int] = (0, -1)  # (byte offset, index of the last message before it)


def _open(path: str, deadline: float) -> tuple[BinaryIO, Transcript]:
    if not path:
        raise InvalidMemoryError("the hook input names no transcript_path",
                                 "the agent sends it with stop, pre-compact and session-end")
    fh = open_transcript(path)
    try:
        first = agent_format(fh, deadline)
    except BaseException:
        fh.close()
        raise
    if first is None:
        fh.close()
        raise InvalidMemoryError(f"{path} is not a Claude Code or Codex transcript: "
                                 "nothing read from it", NOT_AGENT_HINT)
    return fh, first


def _cursor(md: Memdir, session: str) -> tuple[int, int, int]:
    """(byte offset, index of the last message before it, extraction cursor) of a session."""
    if not session:
        return 0, -1, -1
    row = md.index.conn.execute("SELECT byte_offset, offset_index, message_index FROM "
                                "extract_cursor WHERE session_id = ?", (session,)).fetchone()
    return (int(row[0]), int(row[1]), int(row[2])) if row else (0, -1, -1)


def read_for_extract(md: Memdir, path: str, session: str,
                     last_assistant: str = "") -> Reading:
    """What is new in the transcript since the session's offset (at most EXTRACT_BUDGET
    bytes), plus ``last_assistant`` when the file does not hold it yet."""
    deadline = time.monotonic() + READ_SECONDS
    fh, first = _open(path, deadline)
    with fh:
        session = session or first.session_id
        offset, index, cursor = _cursor(md, session)
        window = read_window(fh, start=offset, first_index=index + 1, budget=EXTRACT_BUDGET,
                             deadline=deadline, source=first.source,
                             skip_index=max(index, cursor) + 1)
    transcript = window.transcript
    if not transcript.session_id and first.session_id:  # Codex names it in the first line
        transcript = dataclasses.replace(transcript, session_id=first.session_id)
    if last_assistant and not any(m.role == "assistant" and m.text == last_assistant
                                  for m in transcript.messages[-3:]):
        at = transcript.messages[-1].index + 1 if transcript.messages else index + 1
        transcript = dataclasses.replace(transcript, messages=(
            *transcript.messages, Message("assistant", last_assistant, at)))
    return Reading(window, session or transcript.session_id, transcript, (offset, index))


def read_for_index(path: str) -> Reading:
    """The last SESSION_BUDGET bytes of the transcript, for the session index."""
    deadline = time.monotonic() + READ_SECONDS
    fh, first = _open(path, deadline)
    with fh:
        window = read_window(fh, budget=SESSION_BUDGET, deadline=deadline,
                             source=first.source)
    transcript = window.transcript
    if not transcript.session_id and first.session_id:
        transcript = dataclasses.replace(transcript, session_id=first.session_id)
    return Reading(window, transcript.session_id, transcript)


def claim_window(md: Memdir, reading: Reading) -> bool:
    """Move the session's offset to the end of the window, if it is still where the read
    started; False when another process moved it first (the window is that one's)."""
    if not reading.session_id:
        return True  # no session, no offset: every read is from the start
    window = reading.window
    messages = window.transcript.messages
    # Without a message in the window, the numbering goes on from where it was.
    last = messages[-1].index if messages else -1 if window.restarted else reading.offset[1]
    with md.index.write() as conn:
        row = conn.execute("SELECT byte_offset, offset_index FROM extract_cursor "
                           "WHERE session_id = ?", (reading.session_id,)).fetchone()
        if (tuple(row) if row else (0, -1)) != reading.offset:
            return False
        conn.execute(
            "INSERT INTO extract_cursor (session_id, message_index, updated, byte_offset, "
            "offset_index) VALUES (?, -1, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
            "byte_offset = excluded.byte_offset, offset_index = excluded.offset_index",
            (reading.session_id, format_time(md._clock()), window.end, last))
    return True
