"""What the session-start and prompt hooks answer for one :class:`~memdir.memdir.Memdir`: the
same text whether the hook's own process computes it (:mod:`memdir.agents.hooks`) or the warm
daemon does (:mod:`memdir.agents.daemon`).

Invariants:
- With a deadline ``by`` (a ``time.monotonic()`` instant), nothing is claimed for the
  session after it: the function returns None instead, and the hook that asked, which has
  given up by then, computes and claims by itself. What a session was shown is claimed only
  by the process that shows it.
- The output fits every host's limit (:mod:`memdir.agents.hook_output`); stored text in it
  is neutralised by the context and recall formats.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memdir.memdir import Memdir

__all__ = ["EVENT_NAMES", "MAX_START_CHARS", "START_BUDGET_TOKENS", "output", "prompt_text",
           "start_text"]

MAX_START_CHARS = 10_000
START_BUDGET_TOKENS = 800  # DESIGN §5: the session-start default
EVENT_NAMES = {"session-start": "SessionStart", "prompt": "UserPromptSubmit"}


def _late(by: float | None) -> bool:
    return by is not None and time.monotonic() > by


def start_text(md: Memdir, session: str, by: float | None = None) -> str | None:
    """The session-start context; the memories it shows in full count as surfaced for
    ``session``, so its prompts do not recall them again. None: ``by`` passed first."""
    context = md.context(budget_tokens=START_BUDGET_TOKENS, format="prompt")
    text: str = context.text[:MAX_START_CHARS]
    if session:
        from memdir.core.neutralise import neutralise
        from memdir.retrieval.recall import mark_surfaced

        shown = " ".join(text.split())  # bodies are shown inert: compare them so
        memories = [m for m in context.memories if " ".join(neutralise(m.body).split()) in shown]
        if _late(by):
            return None
        mark_surfaced(md.index, session, memories, md._clock())
    return text


def prompt_text(md: Memdir, prompt: str, session: str, by: float | None = None) -> str | None:
    """Recall for one prompt of ``session``, claimed for it. None: ``by`` passed first."""
    if not prompt or not session:
        return ""
    from memdir.retrieval.recall import deliver

    chosen = md.recall_candidates(prompt, session)
    if _late(by):
        return None
    return deliver(md.index, chosen, md._clock()).text


def output(event: str, text: str, fmt: str) -> str:
    """Plain text, or Claude Code's JSON shape, within every host's limit (hook_output)."""
    from memdir.agents.hook_output import fit

    if fmt == "json" and text:
        return json.dumps({"hookSpecificOutput": {"hookEventName": EVENT_NAMES[event],
                                                  "additionalContext": fit(text)}})
    return fit(text)
