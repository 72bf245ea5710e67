"""Values: Memory, Hit, Stats, Problem, and the small vocabularies (scopes, statuses, sources).

All values are frozen dataclasses. Timestamps are timezone-aware UTC datetimes, written to
files as ``YYYY-MM-DDTHH:MM:SSZ``. ``Memory.meta`` holds the frontmatter keys memdir does not
know, exactly as read, so that rewriting a file never loses them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from memdir.core.errors import ConfigError
from memdir.core.usefulness import Usefulness

__all__ = [
    "KNOWN_KEYS",
    "MAX_CONTEXT",
    "MAX_META_DEPTH",
    "RELEVANCE_WORDS",
    "SCOPES",
    "SOURCES",
    "STATUSES",
    "Hit",
    "Memory",
    "Problem",
    "Scope",
    "SessionRef",
    "Stats",
    "bound_context",
    "date_words",
    "format_time",
    "meta_depth",
    "meta_strings",
    "now",
    "parse_time",
]

Scope = Literal["user", "project", "team"]
SCOPES: tuple[Scope, ...] = ("user", "project", "team")
STATUSES = ("active", "archived")
SOURCES = ("manual", "extracted", "onboarding", "consolidated", "imported", "session")

# Words accepted as input for relevance (seed 000's bands, seed 002's priorities).
RELEVANCE_WORDS: dict[str, float] = {
    "critical": 1.0,
    "high": 0.8,
    "medium": 0.6,
    "normal": 0.5,
    "low": 0.3,
}

# Frontmatter keys memdir owns, in the order they are written.
KNOWN_KEYS = (
    "id",
    "name",
    "description",
    "type",
    "scope",
    "relevance",
    "tags",
    "paths",
    "source",
    "created",
    "updated",
    "reinforced",
    "status",
    "superseded_by",
    "date",
    "context",
)

# Characters of a memory's search context (one line in its file): enough for the message
# before it in a conversation; longer text is cut at a word boundary (:func:`bound_context`).
MAX_CONTEXT = 1000
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def bound_context(text: str) -> str:
    """Search context as it is kept: one line (whitespace runs folded to one space), at most
    ``MAX_CONTEXT`` characters, cut at a word boundary when longer."""
    line = " ".join(text.split())
    if len(line) <= MAX_CONTEXT:
        return line
    cut = line[:MAX_CONTEXT + 1].rsplit(" ", 1)[0]
    return cut if cut and len(cut) <= MAX_CONTEXT else line[:MAX_CONTEXT]


def date_words(*days: dt.date | None) -> str:
    """Days as the words a question uses for them: "March 2026 Thursday 2026-03-05" each
    (month and year, weekday, ISO date), so that "what did we decide in March" matches a
    memory of that month. A day given twice is written once; a datetime counts by its UTC
    day, so a rebuild gives the same words in any time zone."""
    out: list[str] = []
    dates = (d.astimezone(UTC).date() if isinstance(d, datetime) else d  # UTC: one index
             for d in days if d is not None)                                # in every zone
    for day in dict.fromkeys(dates):
        out.append(f"{_MONTHS[day.month - 1]} {day.year} {_WEEKDAYS[day.weekday()]} "
                   f"{day.isoformat()}")
    return " ".join(out)


# How deeply meta values may nest (a mapping in a list in a mapping...). Deeper values are
# refused where they enter (a file is reported broken, a store is an error): every walk over
# meta (JSON for the index, YAML for the file, the secrets scan) would otherwise recurse
# until Python gives up, and a ~1 KB file could stop every command of the home.
MAX_META_DEPTH = 32


def meta_depth(value: Any) -> int:
    """How many mappings and lists deep ``value`` nests (0 for a plain value), counted
    without recursion, stopping once past ``MAX_META_DEPTH``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > MAX_META_DEPTH:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


def meta_strings(value: Any) -> list[str]:
    """Every string in ``value``, mapping keys included, at any depth (for the secrets scan
    and the text checks; call :func:`meta_depth` first, this walk is not bounded)."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return out


def _jsonable(value: Any) -> Any:
    """Meta values as JSON can carry them: YAML dates become ISO strings."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def now() -> datetime:
    """The current time, UTC, to the second (files store seconds).

    ``MEMDIR_NOW`` (an ISO 8601 time such as ``2026-11-26T10:00:00Z``; UTC without an offset)
    fixes it, for tests and demos that need a known "today": unset, the clock is real."""
    fixed = os.environ.get("MEMDIR_NOW")
    return _fixed_now(fixed) if fixed else datetime.now(UTC).replace(microsecond=0)


@lru_cache(maxsize=4)
def _fixed_now(text: str) -> datetime:
    parsed = parse_time(text)
    if parsed is None:
        raise ConfigError(f"MEMDIR_NOW={text!r} is not a time",
                          "give an ISO 8601 time such as 2026-11-26T10:00:00Z, or unset it")
    return parsed.astimezone(UTC).replace(microsecond=0)


@lru_cache(maxsize=256)  # a batch stamps many memories with the same few seconds
def format_time(value: datetime) -> str:
    value = value.astimezone(UTC)
    return f"{value.year:04d}-{value:%m-%dT%H:%M:%S}Z"


def parse_time(value: object) -> datetime | None:
    """Parse what YAML gives for a timestamp (str, datetime or date); None when unparseable."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if hasattr(value, "isoformat") and not isinstance(value, str):  # a date
        return datetime.fromisoformat(value.isoformat()).replace(tzinfo=UTC)
    if isinstance(value, str) and value.strip():
        text = value.strip().replace("Z", "+00:00")
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


@dataclass(frozen=True)
class Memory:
    """One durable observation: the contents of one memory file, plus where it lives.

    ``path`` and the usage counters (``access_count`` and ``last_accessed``: shown;
    ``used_count`` and ``last_used``: drawn on by the agent, :mod:`memdir.capture.uses`) are not
    written to the file: the path is where the file is, the counters live in the index.
    ``context`` is written to the file and searched, but no search result, context, recall or
    hook shows it.
    """

    id: str
    name: str
    description: str
    type: str
    body: str
    scope: Scope = "project"
    relevance: float = 0.9
    tags: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    source: str = "manual"
    created: datetime = field(default_factory=now)
    updated: datetime = field(default_factory=now)
    reinforced: int = 0
    status: str = "active"
    superseded_by: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    # The day the memory is about when it is not the day it was stored (a conversation's
    # session date, an imported event's date); indexed as words, like ``created``.
    date: dt.date | None = None
    # Search context: text that helps find the memory (the message before it in a
    # conversation, "Kevin: are you going to the concert?"): indexed, never shown or injected.
    context: str = ""
    path: Path | None = field(default=None, compare=False)
    access_count: int = field(default=0, compare=False)
    last_accessed: datetime | None = field(default=None, compare=False)
    used_count: int = field(default=0, compare=False)
    last_used: datetime | None = field(default=None, compare=False)

    @property
    def file(self) -> str:
        """The file name inside its memory directory ('' for a memory not yet written)."""
        return self.path.name if self.path else ""

    def replace(self, **changes: Any) -> Memory:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape used by every adapter (CLI --json, HTTP, MCP, JSON Lines export)."""
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "type": self.type,
            "scope": self.scope,
            "relevance": self.relevance,
            "tags": list(self.tags),
            "paths": list(self.paths),
            "source": self.source,
            "created": format_time(self.created),
            "updated": format_time(self.updated),
            "reinforced": self.reinforced,
            "status": self.status,
            "superseded_by": self.superseded_by,
            "meta": _jsonable(dict(self.meta)),
            "date": self.date.isoformat() if self.date else None,
            "context": self.context,
            "content": self.body,
            "file": str(self.path) if self.path else None,
            "access_count": self.access_count,
            "last_accessed": format_time(self.last_accessed) if self.last_accessed else None,
            "used_count": self.used_count,
            "last_used": format_time(self.last_used) if self.last_used else None,
        }


@dataclass(frozen=True)
class SessionRef:
    """Where a session chunk came from: the session and the range of its messages."""

    session_id: str
    chunk: int
    first_message: int
    last_message: int
    transcript: str = ""

    def __str__(self) -> str:
        return f"session {self.session_id} messages {self.first_message}-{self.last_message}"


@dataclass(frozen=True)
class Hit:
    """One search result: the memory, its final score, and the parts the score came from.

    A hit from an indexed session transcript has ``session`` set; its ``memory`` is the chunk
    seen as a memory of type ``session`` (searchable, never injected)."""

    memory: Memory
    score: float
    match: float
    strength: float
    session: SessionRef | None = None

    @property
    def source(self) -> str:
        """Where to trace the hit: the memory file, or the session and message range."""
        if self.session is not None:
            return str(self.session)
        return str(self.memory.path) if self.memory.path else self.memory.id

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "score": round(self.score, 6),
            "match": round(self.match, 6),
            "strength": round(self.strength, 6),
            "source": self.source,
            # A result never carries the memory's search context (it is not shown).
            "memory": {k: v for k, v in self.memory.to_dict().items() if k != "context"},
        }
        if self.session is not None:
            out["session"] = dataclasses.asdict(self.session)
        return out


@dataclass(frozen=True)
class Problem:
    """Something `doctor` reports: a broken file, an ignored setting, an over-long index."""

    kind: str
    where: str
    message: str
    hint: str

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Stats:
    total: int
    by_type: Mapping[str, int]
    by_scope: Mapping[str, int]
    by_status: Mapping[str, int]
    never_accessed: int
    broken_files: int
    directories: Mapping[str, str]
    index_path: str
    taxonomy: Mapping[str, str]
    # provider, model, daily_budget and today's calls, failures and tokens (issue: LLM calls
    # are counted and capped per day)
    llm: Mapping[str, Any] = field(default_factory=dict)
    strength: Mapping[str, int] = field(default_factory=dict)  # active memories per band
    last_dream: str | None = None
    # How useful injected memories were (memdir.core.usefulness)
    usefulness: Usefulness = field(default_factory=Usefulness)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "by_type": dict(self.by_type),
            "by_scope": dict(self.by_scope),
            "by_status": dict(self.by_status),
            "never_accessed": self.never_accessed,
            "broken_files": self.broken_files,
            "directories": dict(self.directories),
            "index_path": self.index_path,
            "taxonomy": dict(self.taxonomy),
            "llm": dict(self.llm),
            "strength": dict(self.strength),
            "last_dream": self.last_dream,
            "usefulness": self.usefulness.to_dict(),
        }
