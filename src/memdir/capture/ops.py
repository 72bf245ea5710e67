"""The capture half of the :class:`~memdir.memdir.Memdir` facade: how memories come in
besides ``store`` (episodes, procedures, indexed sessions, extraction from transcripts,
onboarding, and which injected memories the agent used). Each function takes the facade
first, and the facade's class body binds it as a method (``extract = capture_ops.extract``).
Every write routes through the facade's own write path (``store`` / ``update``), so the
write-time rules (secrets, ``<private>``, dates, duplicates) hold for all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from memdir.core.arguments import scrub
from memdir.core.model import Memory, Scope

if TYPE_CHECKING:
    from memdir.capture.extract import ExtractReport
    from memdir.capture.sessions import SessionIndex
    from memdir.capture.transcript import Transcript
    from memdir.llm.client import LLM
    from memdir.memdir import Memdir

__all__ = ["episode", "extract", "index_session", "onboarding", "procedure", "procedure_run",
           "record_uses", "write_user_profile"]


def index_session(md: Memdir, transcript: str | Path | Transcript | Sequence[Mapping[str, Any]],
                  session_id: str | None = None) -> SessionIndex:
    """Index a finished transcript (a file or a message list) for search, replacing any
    earlier index of the same session. The session id defaults to the transcript's."""
    from memdir.capture.sessions import index_session
    from memdir.capture.transcript import Transcript, parse_transcript

    parsed = transcript if isinstance(transcript, Transcript) else parse_transcript(
        transcript)
    source = str(transcript) if isinstance(transcript, str | Path) else ""
    return index_session(md.index, md.directory("project").key, parsed,
                         session_id or parsed.session_id, source)


def extract(md: Memdir, transcript: str | Path | Transcript | Sequence[Mapping[str, Any]], *,
            llm: LLM | Literal[False] | None = None, dry_run: bool = False,
            scope: Scope = "project", session_id: str | None = None) -> ExtractReport:
    """Memories from a conversation: a transcript file, a message list or a Transcript.

    ``llm`` None uses the configured LLM (rules when there is none or it fails), False
    rules only. Returns what was stored, reinforced or skipped and why; ``dry_run`` only
    says what would be. Each message of a session is extracted once."""
    from memdir.capture.extract import extract
    from memdir.capture.transcript import Transcript, parse_transcript

    parsed = transcript if isinstance(transcript, Transcript) else parse_transcript(
        transcript)
    chosen = md.llm if llm is None else (llm or None)
    return extract(md, parsed, llm=chosen, dry_run=dry_run, scope=scope,
                   session_id=session_id or parsed.session_id)


def onboarding(md: Memdir) -> str | None:
    """The onboarding instructions while the user has no memories yet, else None."""
    from memdir.capture.onboarding import needs_onboarding, onboarding_text

    return onboarding_text(md) if needs_onboarding(md) else None


def write_user_profile(md: Memdir, path: str | Path = "CLAUDE.md") -> Path:
    """Keep a ``## User Profile`` section (from the user memories) in CLAUDE.md."""
    from memdir.capture.onboarding import write_user_profile

    return write_user_profile(md, path)


def episode(md: Memdir, event: str, *, outcome: str | None = None, tags: Iterable[str] = (),
            scope: Scope = "project") -> Memory:
    """Record an event and its outcome (seed 002's episodic memory)."""
    from memdir.capture.episodes import record_episode

    return record_episode(md, event, outcome=outcome, tags=tags, scope=scope,
                          at=md._clock())


def procedure(md: Memdir, name: str, steps: Sequence[str], *, scope: Scope = "project",
              tags: Iterable[str] = (), description: str | None = None) -> Memory:
    """Save a named workflow; saving an existing name replaces its steps, keeps counts."""
    from memdir.capture.episodes import save_procedure

    return save_procedure(md, name, steps, scope=scope, tags=tags,
                          description=description)


def procedure_run(md: Memdir, name: str, *, success: bool = True) -> Memory:
    """Count one run of a procedure; proven ones (successes > 0) lead layer C."""
    from memdir.capture.episodes import record_run

    return record_run(md, name, success=success, at=md._clock())


def record_uses(md: Memdir, session_id: str, transcript: Transcript) -> int:
    """Count as used (once per session) each memory injected into the session that the
    agent's later words or tool calls in ``transcript`` draw on (:mod:`memdir.capture.uses`);
    how many were newly counted. Their strength grows with it; ``memdir stats`` reports it."""
    from memdir.capture.uses import record

    md._sync()
    return record(md.index, scrub(session_id), transcript, md._clock())
