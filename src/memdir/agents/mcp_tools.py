"""The tools of the MCP server: seed 002's memory_* tools over the one :class:`Memdir` facade.

Each tool is a few lines: typed, described arguments in; a call of the facade; a frozen
dataclass (or the facade's own ``to_dict()`` shape) out, published as the tool's output schema
and returned as ``structuredContent`` (with the same JSON as text for clients that read only
text).

Invariants:
- A tool never raises into the SDK: a :class:`MemdirError` becomes an error result whose text
  is ``message`` and ``hint: hint`` on the next line; any other exception becomes an error
  result ``internal error: ...`` and its traceback is logged to stderr (the ``memdir`` logger).
- ``memory_learn`` returns what ``memdir store --json`` prints (:class:`LearnOut`); the
  other tools return :class:`MemoryOut` and their own shapes.
- Tool descriptions are dedented (docstrings and _LEARN keep their source indentation).
- Facade calls are serialized by the server's lock: the SDK runs tools on worker threads and
  the facade shares one SQLite connection.
- recall, context and stats are annotated read-only; forget (and update, consolidate, which
  can overwrite or archive) destructive; nothing here talks to the outside world.
- Results are read by the agent as text: every string in them (memory text, names, tags,
  meta, file names, error messages) is neutralised (:mod:`memdir.core.neutralise`), in the text
  and in ``structuredContent`` alike, so no stored text can forge a tag in the agent's
  context. The memory files keep the text as it was written.
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Annotated, Any, Literal, TypeVar

from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from memdir import Memdir, MemdirError, Memory, count_tokens
from memdir.core.errors import InvalidMemoryError
from memdir.core.model import Scope
from memdir.core.neutralise import neutralise, neutralise_data

__all__ = ["ForgetOut", "HitOut", "LearnOut", "MemoryOut", "ProcedureOut", "RecallOut",
           "register_tools", "run_tool"]

log = logging.getLogger("memdir")

# -- outputs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryOut:
    """A memory as the tools return it (``file`` is the full path of its Markdown file)."""

    id: str
    name: str
    description: str
    type: str
    scope: str
    relevance: float
    tags: list[str]
    status: str
    reinforced: int
    created: str
    updated: str
    file: str
    body: str
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, memory: Memory) -> MemoryOut:
        d = memory.to_dict()
        return cls(id=d["id"], name=d["name"], description=d["description"], type=d["type"],
                   scope=d["scope"], relevance=d["relevance"], tags=d["tags"],
                   status=d["status"], reinforced=d["reinforced"], created=d["created"],
                   updated=d["updated"], file=d["file"] or "", body=d["content"],
                   meta=d["meta"])


@dataclass(frozen=True)
class LearnOut:
    """What ``memdir store --json`` prints too, one shape for one record. ``action``: stored
    (a new memory) or reinforced (an exact duplicate already existed); ``memory``: the memory
    as :meth:`Memory.to_dict` gives it; ``conflicts``: the memories in play (any type, any
    scope) this one may contradict, in the same shape; both are kept."""

    action: Literal["stored", "reinforced"]
    memory: dict[str, Any]
    conflicts: list[dict[str, Any]]


@dataclass(frozen=True)
class ProcedureOut(MemoryOut):
    success_count: int = 0
    failure_count: int = 0


@dataclass(frozen=True)
class ForgetOut:
    id: str
    name: str
    file: str
    action: Literal["archived", "deleted"]


@dataclass(frozen=True)
class HitOut:
    id: str
    type: str
    scope: str
    name: str
    description: str
    status: str
    body: str
    score: float
    file: str


@dataclass(frozen=True)
class RecallOut:
    """``tokens``: the bodies' token count; ``truncated``: hits left out to stay in budget."""

    hits: list[HitOut]
    count: int
    tokens: int
    truncated: bool


@dataclass(frozen=True)
class ContextOut:
    text: str
    tokens: int
    count: int


# -- arguments ---------------------------------------------------------------------------------

Ref = Annotated[str, Field(description="The memory's id (e.g. m7k2q9xa) or its file name "
                                       "(e.g. feedback_testing-policy.md)")]
Tags = Annotated[list[str] | None, Field(description="Tags, e.g. [\"testing\", \"database\"]")]
Relevance = Annotated[float | str | None, Field(
    description="How much it matters: 0 to 1, or critical / high / medium / normal / low "
                "(default: the type's own)")]

# -- running a tool ----------------------------------------------------------------------------


def _text_result(text: str, *, error: bool) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=neutralise(text))],
                          is_error=error)


def run_tool(lock: threading.Lock, call: Callable[[], object]) -> CallToolResult:
    """Run one facade call under ``lock`` and turn its outcome into a tool result (see the
    module's invariants): a dataclass or dict becomes ``structuredContent`` and JSON text."""
    try:
        with lock:
            out = call()
        data: dict[str, Any]
        if isinstance(out, dict):
            data = out
        elif is_dataclass(out) and not isinstance(out, type):
            data = asdict(out)
        else:
            raise TypeError(f"a tool returned {out.__class__.__name__}, not a dict or dataclass")
        data = neutralise_data(data)
        text = json.dumps(data, ensure_ascii=False, default=str)
    except MemdirError as exc:
        return _text_result(f"{exc.message}\nhint: {exc.hint}", error=True)
    except Exception as exc:
        log.exception("memdir mcp: a tool failed unexpectedly")
        return _text_result(f"internal error: {exc.__class__.__name__}: {exc}", error=True)
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=data)


def _count(memory: Memory, key: str) -> int:
    value = memory.meta.get(key, 0)
    return value if isinstance(value, int) else 0


# -- the tools ---------------------------------------------------------------------------------

_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_ADD = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
_CHANGE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)

_LEARN = """Store a lasting memory for this project (scope project), for you across projects
(scope user) or for the team (scope team, committed with the code). Storing the same content
again reinforces the existing memory. Save preferences, decisions, policies, corrections,
pitfalls and facts that will matter in later sessions; not code structure, git history or
anything the repository already says. Secrets are refused. Types here: {types}."""


_Tool = TypeVar("_Tool", bound=Callable[..., CallToolResult])


def register_tools(server: MCPServer[Any], md: Memdir, lock: threading.Lock) -> None:
    """Add the memory_* tools to ``server``, each calling ``md`` under ``lock``."""
    tax = md.directory("project").taxonomy
    kinds = ", ".join(t.name for t in tax.types if not t.system)

    def run(call: Callable[[], object]) -> CallToolResult:
        return run_tool(lock, call)

    def tool(annotations: ToolAnnotations,
             description: str | None = None) -> Callable[[_Tool], _Tool]:
        """``server.tool`` with the description (the docstring by default) dedented: the
        agent reads it as it is, indentation and all."""
        def register(fn: _Tool) -> _Tool:
            text = inspect.cleandoc(description or fn.__doc__ or "")
            server.tool(description=text, annotations=annotations)(fn)
            return fn
        return register

    @tool(_ADD, description=_LEARN.format(types=kinds))
    def memory_learn(
        content: Annotated[str, Field(description="The memory itself, in Markdown: what to "
                                                  "remember, and why if known")],
        type: Annotated[str, Field(description="The kind of memory: one of the types listed "
                                               "above (aliases such as workflow or rule work)")],
        scope: Annotated[Scope, Field(description="project (default), user or team")]
        = "project",
        name: Annotated[str | None, Field(description="A short title (default: derived "
                                                      "from the content)")] = None,
        description: Annotated[str | None, Field(description="One line saying what it is "
                                                             "about")] = None,
        tags: Tags = None,
        relevance: Relevance = None,
        context: Annotated[str | None, Field(description="Search context: what was said just "
                                                         "before, as 'speaker: text'; helps "
                                                         "find the memory, never shown")] = None,
    ) -> Annotated[CallToolResult, LearnOut]:
        def call() -> LearnOut:
            m = md.store(content, type=type, scope=scope, name=name, description=description,
                         tags=tags or (), relevance=relevance, context=context)
            return LearnOut(action="reinforced" if m.reinforced else "stored",
                            memory=m.to_dict(),
                            conflicts=[c.to_dict() for c in md.conflicts(m)])

        return run(call)

    @tool(_READ)
    def memory_recall(
        query: Annotated[str, Field(description="What to look for, in plain words")],
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many hits")] = 10,
        types: Annotated[list[str] | None, Field(description="Only these types")] = None,
        scopes: Annotated[list[Scope] | None, Field(description="Only these scopes")] = None,
        include_archived: Annotated[bool, Field(description="Search archived memories "
                                                            "too")] = False,
        budget_tokens: Annotated[int | None, Field(ge=1, description="Stop adding hits "
                                                   "before their bodies exceed this many "
                                                   "tokens")] = None,
    ) -> Annotated[CallToolResult, RecallOut]:
        """Search the memories (full text, stemmed, ranked by match and strength), with
        type and scope filters and an optional token budget."""

        def call() -> RecallOut:
            hits = md.search(query, limit=limit, types=types, scopes=scopes,
                             include_archived=include_archived)
            out: list[HitOut] = []
            tokens = 0
            for hit in hits:
                m = hit.memory
                cost = count_tokens(m.body)
                if budget_tokens is not None and tokens + cost > budget_tokens:
                    break
                tokens += cost
                out.append(HitOut(id=m.id, type=m.type, scope=m.scope, name=m.name,
                                  description=m.description, status=m.status, body=m.body,
                                  score=hit.score, file=str(m.path or "")))
            return RecallOut(hits=out, count=len(out), tokens=tokens,
                             truncated=len(out) < len(hits))

        return run(call)

    @tool(_READ)
    def memory_context(
        query: Annotated[str | None, Field(description="The task at hand: memories matching "
                                                       "it come first")] = None,
        budget_tokens: Annotated[int, Field(ge=1, description="Hard cap on the text's "
                                                              "tokens")] = 800,
        format: Annotated[Literal["markdown", "prompt", "json", "snippets"],
                          Field(description="How to render the text")] = "markdown",
    ) -> Annotated[CallToolResult, ContextOut]:
        """The session-start context: always-on memories, then those matching the task, then
        proven procedures and the MEMORY.md index, within the token budget."""

        def call() -> ContextOut:
            ctx = md.context(query, budget_tokens=budget_tokens, format=format)
            return ContextOut(text=ctx.text, tokens=ctx.tokens, count=len(ctx.items))

        return run(call)

    @tool(_ADD)
    def memory_episode(
        event: Annotated[str, Field(description="What happened, e.g. 'Migrated the orders "
                                                "table to Postgres 16'")],
        outcome: Annotated[str | None, Field(description="How it went: success, failure, "
                                                         "partial, or a sentence")] = None,
        tags: Tags = None,
    ) -> Annotated[CallToolResult, MemoryOut]:
        """Record an event and its outcome (episodic memory)."""
        return run(lambda: MemoryOut.of(md.episode(event, outcome=outcome, tags=tags or ())))

    @tool(_ADD)
    def memory_procedure(
        name: Annotated[str, Field(description="The workflow's name, e.g. 'Release'")],
        steps: Annotated[list[str] | None, Field(description="Its steps, in order (replaces "
                                                             "the saved ones)")] = None,
        result: Annotated[Literal["success", "failure"] | None, Field(
            description="Record one run of the workflow and how it went")] = None,
    ) -> Annotated[CallToolResult, ProcedureOut]:
        """Save a named workflow with its steps and/or record a run of it; proven workflows
        (successful runs) are offered first at session start."""

        def call() -> ProcedureOut:
            if not steps and result is None:
                raise InvalidMemoryError(
                    f"nothing to do for procedure {name!r}",
                    "give steps (to save the workflow), result (success or failure, to "
                    "record a run), or both")
            m = md.procedure(name, steps) if steps else None
            if result is not None:
                m = md.procedure_run(name, success=result == "success")
            assert m is not None
            return ProcedureOut(**asdict(MemoryOut.of(m)),
                                success_count=_count(m, "success_count"),
                                failure_count=_count(m, "failure_count"))

        return run(call)

    @tool(_READ)
    def memory_stats() -> Annotated[CallToolResult, dict[str, Any]]:
        """What is stored: counts by type, scope and status, strength bands, the directories,
        the index, the LLM calls of today, and usefulness: how many injected memories the
        agent used, the most useful ones and those injected often but never used."""
        return run(lambda: md.stats().to_dict())

    @tool(_CHANGE)
    def memory_consolidate(
        dry_run: Annotated[bool, Field(description="Only say what would be done "
                                                   "(default); false applies it")] = True,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        """Tidy the memories: merge duplicates, archive stale ones, promote recurring ones.
        Returns the plan (operations with their reasons) and whether it was applied.
        Operations with op "conflict" name two memories that disagree: they are never
        merged or archived; ask the user which is right, then update or forget the other.
        At most 20 operations of each kind are listed; ``totals`` counts them all."""
        from memdir.upkeep.consolidate import LISTED

        return run(lambda: md.consolidate(dry_run=dry_run).to_dict(LISTED))

    @tool(_CHANGE)
    def memory_forget(
        ref: Ref,
        permanent: Annotated[bool, Field(description="Delete the file for good instead of "
                                                     "archiving it")] = False,
    ) -> Annotated[CallToolResult, ForgetOut]:
        """Forget a memory: archive it (reversible; still searchable with include_archived,
        never injected), or with permanent=true delete its file."""

        def call() -> ForgetOut:
            m = md.delete(ref) if permanent else md.archive(ref)
            return ForgetOut(id=m.id, name=m.name, file=str(m.path or ""),
                             action="deleted" if permanent else "archived")

        return run(call)

    @tool(_CHANGE)
    def memory_update(
        ref: Ref,
        content: Annotated[str | None, Field(description="New content (replaces the "
                                                         "body)")] = None,
        name: Annotated[str | None, Field(description="New title")] = None,
        description: Annotated[str | None, Field(description="New one-line "
                                                             "description")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags (replace the "
                                                            "old)")] = None,
        relevance: Relevance = None,
        reinforce: Annotated[bool, Field(description="Count one explicit reinforcement "
                                                     "(resets its decay)")] = False,
    ) -> Annotated[CallToolResult, MemoryOut]:
        """Change a memory's content or fields; its id and file stay the same."""
        return run(lambda: MemoryOut.of(md.update(
            ref, content=content, name=name, description=description, tags=tags,
            relevance=relevance, reinforce=reinforce)))
