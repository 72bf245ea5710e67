"""The shapes of the HTTP API for OpenAPI: request bodies (validated) and answers (documented).

Invariants:
- Request bodies refuse unknown fields (a misspelt field is a 400, not silently ignored).
- Answer models mirror the ``to_dict()`` of the values they document (``Memory``, ``Hit``,
  ``Context``, ``Recall``, ``ExtractReport``, ``Stats``): the routes return those dicts as
  they are, and the schema test (schemathesis) checks every answer against these models, so
  the two cannot drift apart unnoticed.
- Field names are memdir's nouns (DESIGN §1), the keys of ``Memory.to_dict()``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ConflictsOut",
    "ContextOut",
    "DeletedOut",
    "ErrorOut",
    "ExtractBody",
    "ExtractOut",
    "HealthOut",
    "HitsOut",
    "MemoriesOut",
    "MemoryOut",
    "PatchBody",
    "RecallOut",
    "StatsOut",
    "StoreBody",
    "StoredOut",
]

ScopeName = Literal["user", "project", "team"]
RelevanceWord = Literal["critical", "high", "medium", "normal", "low"]
Relevance = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] | RelevanceWord

_RELEVANCE = "0.0-1.0, or one of critical, high, medium, normal, low (default: by type)"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- requests ---------------------------------------------------------------------------------


class StoreBody(_Body):
    content: str = Field(description="the text to remember (Markdown)", min_length=1)
    type: str = Field(description="memory type of the store's taxonomy (aliases accepted)",
                      min_length=1)
    scope: ScopeName = Field("project", description="whose memory it is")
    name: str | None = Field(None, description="short title (default: the first line)")
    description: str | None = Field(None, description="one line, the recall key "
                                                      "(default: the first line)")
    tags: list[str] = Field(default_factory=list, description="tags")
    paths: list[str] = Field(default_factory=list,
                             description="globs of files this memory matters for")
    relevance: Relevance | None = Field(None, description=_RELEVANCE)
    meta: dict[str, Any] | None = Field(None, description="extra frontmatter keys")
    context: str | None = Field(None, description="search context: helps find the memory, "
                                                  "never shown (e.g. the message before it)")
    date: str | None = Field(None, description="the day the memory is about (YYYY-MM-DD)")


class PatchBody(_Body):
    content: str | None = Field(None, description="new body")
    name: str | None = None
    description: str | None = None
    tags: list[str] | None = None
    paths: list[str] | None = None
    relevance: Relevance | None = Field(None, description=_RELEVANCE)
    meta: dict[str, Any] | None = Field(None, description="frontmatter keys to set")
    type: str | None = Field(None, description="reclassify: move the memory to this type "
                                               "(same id, new file name)")
    status: Literal["active", "archived"] | None = Field(
        None, description="archived archives the memory, active restores it")


class MessageIn(_Body):
    role: str = Field(description="user, assistant, system or tool")
    content: str | list[dict[str, Any]] = Field(
        description="the text, or content blocks as the agent's API gives them")


class ExtractBody(_Body):
    transcript: str | None = Field(
        None, description="plain text, or JSON Lines of a Claude Code or Codex transcript")
    messages: list[MessageIn] | None = Field(None, description="instead of transcript: "
                                                               "[{role, content}, ...]")
    session_id: str | None = Field(None, description="each message of a session is "
                                                     "extracted once")
    scope: ScopeName = "project"
    dry_run: bool = Field(False, description="only say what would be stored")


# -- answers ----------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    code: str
    message: str
    hint: str


class ErrorOut(BaseModel):
    error: ErrorDetail


class HealthOut(BaseModel):
    status: Literal["ok"]
    store: str = Field(description="sqlite or postgresql")
    version: str


class MemoryDict(BaseModel):
    """``Memory.to_dict()``."""

    id: str
    name: str
    description: str
    type: str
    scope: ScopeName
    relevance: float
    tags: list[str]
    paths: list[str]
    source: str
    created: str
    updated: str
    reinforced: int
    status: str
    superseded_by: str | None
    meta: dict[str, Any]
    date: str | None = None
    context: str = ""
    content: str
    file: str | None
    access_count: int = Field(description="times shown: injected, recalled, found, read")
    last_accessed: str | None
    used_count: int = Field(0, description="sessions whose agent drew on it after it was "
                                           "injected")
    last_used: str | None = None


class SessionRefOut(BaseModel):
    session_id: str
    chunk: int
    first_message: int
    last_message: int
    transcript: str


class HitOut(BaseModel):
    score: float
    match: float
    strength: float
    source: str
    memory: MemoryDict
    session: SessionRefOut | None = None


class HitsOut(BaseModel):
    query: str
    hits: list[HitOut]


class ContextItemOut(BaseModel):
    id: str
    type: str
    scope: ScopeName
    layer: Literal["A", "B", "C"]
    score: float
    name: str
    description: str
    body: str
    file: str
    tags: list[str]
    updated: str


class ContextOut(BaseModel):
    format: Literal["markdown", "prompt", "json", "snippets"]
    budget_tokens: int
    tokens: int
    count: int
    index_lines: int
    text: str
    memories: list[ContextItemOut]
    groups: dict[str, list[str]] = Field(description="type -> ids of the injected memories")


class MemoryOut(BaseModel):
    memory: MemoryDict


class StoredOut(BaseModel):
    memory: MemoryDict
    conflicts: list[MemoryDict] = Field(description="memories the new one may contradict")


class DeletedOut(BaseModel):
    memory: MemoryDict
    deleted: Literal[True]


class MemoriesOut(BaseModel):
    memories: list[MemoryDict]


class ConflictOut(BaseModel):
    memories: list[str] = Field(description="the two ids, the older first")
    reason: str = Field(description="how they disagree")
    scope: ScopeName
    type: str


class ConflictsOut(BaseModel):
    total: int = Field(description="how many conflicts there are in all")
    limit: int
    offset: int
    conflicts: list[ConflictOut] = Field(description="one page of them, the oldest first")


class ExtractedOut(BaseModel):
    content: str
    type: str
    relevance: float
    action: Literal["stored", "reinforced", "would-store", "would-reinforce", "skipped"]
    reason: str
    id: str | None
    file: str | None
    near_duplicates: list[str]
    excerpt: str


class ExtractOut(BaseModel):
    method: Literal["llm", "rules"]
    session_id: str
    dry_run: bool
    messages: int
    agent_wrote_through: int
    items: list[ExtractedOut]


class RecalledOut(BaseModel):
    id: str
    type: str
    scope: ScopeName
    file: str
    name: str
    content: str
    truncated: bool
    days: int
    age: str
    freshness: str


class RecallOut(BaseModel):
    session_id: str
    method: str
    skipped: str | None
    session_bytes: int
    count: int
    memories: list[RecalledOut]
    text: str


class ByAge(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    today: int
    this_week: int = Field(alias="this week")
    this_month: int = Field(alias="this month")
    older: int


class UseCounts(BaseModel):
    shown: int = Field(description="accesses: injected, recalled, found by a search, read")
    injected: int = Field(description="memory-session pairs: shown in full at session start "
                                      "or recalled, once per session")
    used: int = Field(description="injections the agent drew on afterwards")
    ratio: float | None = Field(description="used / injected (null before any injection)")


class MemoryUseOut(BaseModel):
    id: str
    name: str
    type: str
    scope: str
    status: str
    shown: int
    injected: int
    used: int
    reinforced: int


class UsefulnessOut(UseCounts):
    by_scope: dict[str, UseCounts]
    most_useful: list[MemoryUseOut] = Field(description="used (or reinforced) most")
    never_used: list[MemoryUseOut] = Field(description="active, injected into at least "
                                           "never_used_after sessions, never used: candidates "
                                           "to archive (the first 10)")
    never_used_count: int = Field(description="how many memories are never used in all")
    never_used_after: int


class StatsOut(BaseModel):
    total: int
    by_type: dict[str, int]
    by_scope: dict[str, int]
    by_status: dict[str, int]
    never_accessed: int
    broken_files: int
    directories: dict[str, str]
    index_path: str
    taxonomy: dict[str, str]
    llm: dict[str, Any]
    strength: dict[str, int]
    last_dream: str | None
    usefulness: UsefulnessOut = Field(description="how useful injected memories were")
    by_age: ByAge = Field(description="memories by creation date (UTC): created today, in "
                                      "the 6 days before, in the 23 days before that, older")
