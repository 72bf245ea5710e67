"""What memdir injects into an agent's prompt, as part of the :class:`~memdir.memdir.Memdir`
facade (seeds 000-004): the session-start context, per-prompt recall and ``MEMORY.md`` as it
is injected. Each function takes the facade first, and the facade's class body binds it as a
method, as for :mod:`memdir.capture.ops`. Every injected or recalled memory counts as an
access (shown); a use is counted apart (:func:`memdir.capture.ops.record_uses`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from memdir.core.arguments import scrub
from memdir.core.files import INDEX_MARKER, generated_index, read_index_stat
from memdir.core.listing import written_by_memdir
from memdir.core.model import Scope

if TYPE_CHECKING:
    import sqlite3

    from memdir.core.store import MemoryDir
    from memdir.memdir import Memdir
    from memdir.retrieval.context_format import Context
    from memdir.retrieval.recall import Candidates, Recall

__all__ = ["context", "memory_index", "recall", "recall_candidates"]


def _index_text(conn: sqlite3.Connection, mdir: MemoryDir) -> str:
    """MEMORY.md as injected, a secret or a ``<private>`` span written into it by hand
    removed (memdir writes neither: it lists only indexed memories, and the index holds no
    secret and no private span). The MEMORY.md memdir wrote, unedited since, needs no secret
    check (it costs a hook ~10 ms; the stat comparison nothing)."""
    text, st = read_index_stat(mdir.path)
    ours = bool(text) and written_by_memdir(conn, mdir.key, st)
    generated = generated_index(text)
    # memdir's own marker line is a "<" in every MEMORY.md: only another one can open a span
    # (compiling the span pattern costs every session start a few ms).
    if "<" in (text.replace(INDEX_MARKER, "", 1) if generated else text):
        from memdir.core.safety import strip_private  # off the start-up path

        # memdir's own holds one entry a line, from rows without private spans: a file name
        # such as ``fact_<private>x.md`` costs only its own line. A hand-written one is
        # stripped as a whole (a span may run over several lines).
        text = ("\n".join(map(strip_private, text.split("\n"))) if generated
                else strip_private(text))
    if not text or ours:
        return text
    from memdir.core.safety import redact_secrets  # off the start-up path

    return redact_secrets(text)


def memory_index(md: Memdir, scope: Scope = "project") -> str:
    """MEMORY.md of a scope as it is injected: capped at 200 lines / 25,000 bytes, and
    inert (:func:`memdir.core.neutralise.neutralise_lines`): no tags, no Markdown headings."""
    from memdir.core.neutralise import neutralise_lines

    md._sync()
    return neutralise_lines(_index_text(md.index.conn, md.directory(scope)))


def context(md: Memdir, query: str | None = None, *, budget_tokens: int = 800,
            format: str = "markdown", limit: int | None = None,
            paths: Sequence[str] | None = None,
            scopes: Sequence[Scope] | None = None) -> Context:
    """Session-start context across scopes, within ``budget_tokens`` (a hard cap).

    Layers A (baseline), B (contextual), C (procedures), then MEMORY.md; formats
    markdown, prompt, json, snippets. Every injected memory counts as an access."""
    from memdir.retrieval.context import build_context

    query = scrub(query) if query is not None else None
    md._sync()
    dirs = md._dirs(scopes)
    project = [d for d in dirs if d.scope == "project"]
    result = build_context(
        md.index.conn, dirs, index=_index_text(md.index.conn, project[0]) if project else "",
        query=query, budget_tokens=budget_tokens, fmt=format, limit=limit, paths=paths,
        at=md._clock())
    md.index.touch(result.memories)
    welcome = md.onboarding() if format in ("markdown", "prompt") else None
    if welcome:  # memdir's own instruction: outside the fenced reference data
        from memdir.retrieval.context_format import count_tokens

        joined = f"{result.text}\n\n{welcome}" if result.text else welcome
        if count_tokens(joined) <= budget_tokens:
            result = replace(result, text=joined, tokens=count_tokens(joined))
    return result


def recall(md: Memdir, prompt: str, session_id: str, *, limit: int = 5,
           use_llm: bool = True, paths: Sequence[str] | None = None) -> Recall:
    """Up to ``limit`` (max 5) memories for one user prompt, none already surfaced in this
    session. With an LLM configured, it picks from a manifest (seed 001's side query);
    otherwise, or when it fails, ranked search does."""
    from memdir.retrieval.recall import deliver

    chosen = md.recall_candidates(prompt, session_id, limit=limit, use_llm=use_llm,
                                    paths=paths)
    return deliver(md.index, chosen, md._clock())


def recall_candidates(md: Memdir, prompt: str, session_id: str, *, limit: int = 5,
                      use_llm: bool = True,
                      paths: Sequence[str] | None = None) -> Candidates:
    """What :meth:`recall` selects for a prompt, claimed for nobody yet: the warm daemon
    answers with these, and the hook claims (:func:`memdir.retrieval.recall.deliver`) only what
    it injects."""
    from memdir.retrieval.recall import select

    prompt, session_id = scrub(prompt), scrub(session_id)
    md._sync()
    search = (lambda text, n: md.search(text, limit=n, touch=False, dates=False)) \
        if md.semantic else None
    return select(md.index, md._dirs(), prompt, session_id, at=md._clock(),
                  limit=limit, llm=md.llm if use_llm else None, paths=paths,
                  search=search)
