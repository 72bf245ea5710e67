"""Session-start context: which memories are injected, in which order, within a token budget.

Three layers (seed 002), filled in this order until the budget is spent:
- A, baseline: the taxonomy's always-on types (``baseline``) at relevance >= high (0.8), by
  relevance, then most recently updated.
- B, contextual: the other memories by strength (type weight × relevance × decay ×
  reinforcement) above ``B_THRESHOLD``; with a query, memories matching it come first, by
  match × strength. Procedures are left to layer C.
- C, procedures: up to three procedural memories, proven ones (``success_count`` > 0 in their
  frontmatter) first, those matching the query before the others.
Then the project's MEMORY.md (capped at 200 lines / 25,000 bytes), whole or as many lines as
fit. A memory whose ``paths`` globs cover one of the given files scores ``PATH_BOOST`` times
higher in layers B and C.

Invariants:
- Archived memories are never injected.
- The returned text never exceeds the budget as counted by :func:`count_tokens`: after every
  addition the whole output is rendered and measured, and an addition that does not fit is
  taken back.
- Usage counters of every injected memory are updated; a failure to update them is logged
  and never fails the call.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memdir.context_format import (
    FORMATS,
    ContextItem,
    Format,
    count_tokens,
    render_context,
)
from memdir.errors import InvalidMemoryError
from memdir.index import row_to_memory
from memdir.model import RELEVANCE_WORDS, Memory
from memdir.search import glob_matches, run_search, strength, strength_of, type_factors
from memdir.taxonomy import Taxonomy

if TYPE_CHECKING:
    from memdir.store import MemoryDir

__all__ = ["B_THRESHOLD", "PATH_BOOST", "Context", "build_context"]

HIGH = RELEVANCE_WORDS["high"]
B_THRESHOLD = 0.1  # the strength below which consolidation archives a memory (seed 002)
PATH_BOOST = 1.5
PROCEDURES = 3
POOL = 400  # candidates considered per layer; more never fit an injection budget
GIVE_UP_AFTER = 25  # consecutive candidates that did not fit: the budget is effectively full


@dataclass(frozen=True)
class Context:
    """What :meth:`Memdir.context` returns: the text and what went into it."""

    text: str
    items: tuple[ContextItem, ...]
    format: Format
    budget_tokens: int
    tokens: int
    index_lines: int  # MEMORY.md lines included (0: none)

    @property
    def memories(self) -> list[Memory]:
        return [item.memory for item in self.items]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format, "budget_tokens": self.budget_tokens, "tokens": self.tokens,
            "count": len(self.items), "index_lines": self.index_lines, "text": self.text,
            "memories": [item.to_dict() for item in self.items],
        }


def _where(dirs: Sequence[MemoryDir]) -> tuple[str, list[Any]]:
    return (f"m.dir IN ({','.join('?' * len(dirs))}) AND m.status = 'active'",
            [d.key for d in dirs])


def _select(conn: sqlite3.Connection, where: str, params: Sequence[Any],
            tail: str = "") -> list[Memory]:
    rows = conn.execute(
        "SELECT m.*, u.access_count, u.last_accessed FROM memories m "
        "LEFT JOIN usage u ON u.dir = m.dir AND u.id = m.id "
        f"WHERE {where} {tail}", tuple(params)).fetchall()
    return [row_to_memory(r) for r in rows]


def _layer_a(conn: sqlite3.Connection, dirs: Sequence[MemoryDir]) -> list[Memory]:
    parts, params = [], []
    for d in dirs:
        names = [t.name for t in d.taxonomy.types if t.baseline]
        if names:
            parts.append(f"(m.dir = ? AND m.type IN ({','.join('?' * len(names))}))")
            params.extend([d.key, *names])
    if not parts:
        return []
    return _select(conn, f"m.status = 'active' AND m.relevance >= ? AND ({' OR '.join(parts)})",
                   [HIGH, *params], f"ORDER BY m.relevance DESC, m.updated DESC, m.file "
                                    f"LIMIT {POOL}")


def _strongest(conn: sqlite3.Connection, dirs: Sequence[MemoryDir], at: datetime,
               procedural: bool) -> list[tuple[Memory, float]]:
    """Active memories of the (non-)procedural types by strength, strongest first.

    Strength is computed from a narrow row per memory (no body, no JSON), so ranking every
    memory of a large store stays cheap; only the best ``POOL`` are loaded whole."""
    where, params = _where(dirs)
    rows = conn.execute(
        "SELECT m.rowid, m.dir, m.type, m.relevance, m.reinforced + COALESCE(u.access_count, 0), "
        "? - MAX(julianday(m.updated), COALESCE(julianday(u.last_accessed), 0)) "
        "FROM memories m LEFT JOIN usage u ON u.dir = m.dir AND u.id = m.id "
        f"WHERE {where}", [_julian(at), *params]).fetchall()
    taxonomies = {d.key: d.taxonomy for d in dirs}
    factors: dict[tuple[str, str], tuple[float, float] | None] = {}
    scored: list[tuple[float, int]] = []
    for rowid, key, type_name, relevance, uses, days in rows:
        if (key, type_name) not in factors:
            tax = taxonomies.get(key)
            spec = tax.lookup(type_name) if tax else None
            is_proc = bool(spec and spec.layer == "procedural")
            factors[key, type_name] = type_factors(tax, type_name) if is_proc == procedural \
                else None
        f = factors[key, type_name]
        if f is not None:
            scored.append((strength_of(f[0], f[1], relevance, days or 0.0, uses), rowid))
    scored.sort(key=lambda pair: -pair[0])
    best = scored[:POOL]
    if not best:
        return []
    rows = conn.execute(
        "SELECT m.*, u.access_count, u.last_accessed FROM memories m "
        "LEFT JOIN usage u ON u.dir = m.dir AND u.id = m.id "
        f"WHERE m.rowid IN ({','.join('?' * len(best))})", [r for _, r in best]).fetchall()
    by_row = {row["rowid"]: row_to_memory(row) for row in rows}
    return [(by_row[r], value) for value, r in best if r in by_row]


def _julian(at: datetime) -> float:
    return at.timestamp() / 86400.0 + 2440587.5


def _key(memory: Memory) -> tuple[str, str]:
    return (memory.scope, memory.id)


def _boost(memory: Memory, paths: Sequence[str] | None) -> float:
    return PATH_BOOST if paths and memory.paths and glob_matches(memory.paths, paths) else 1.0


def _layer_b(conn: sqlite3.Connection, dirs: Sequence[MemoryDir], query: str | None,
             paths: Sequence[str] | None, at: datetime) -> list[tuple[Memory, float]]:
    procedural = {(d.key, t.name) for d in dirs for t in d.taxonomy.types
                  if t.layer == "procedural"}
    out: list[tuple[Memory, float]] = []
    if query:
        for hit in run_search(conn, query, dirs, types=[], tags=None, include_archived=False,
                              paths=None, limit=POOL, at=at):
            m = hit.memory
            if (str(m.path.parent) if m.path else "", m.type) in procedural:
                continue
            out.append((m, hit.match * hit.strength * _boost(m, paths)))
        out.sort(key=lambda pair: -pair[1])
    matched = {_key(m) for m, _ in out}
    rest = [(m, s * _boost(m, paths)) for m, s in _strongest(conn, dirs, at, procedural=False)
            if _key(m) not in matched and s >= B_THRESHOLD]
    rest.sort(key=lambda pair: -pair[1])
    return out + rest


def _proven(memory: Memory) -> bool:
    value = memory.meta.get("success_count", 0)
    return isinstance(value, int | float) and value > 0


def _layer_c(conn: sqlite3.Connection, dirs: Sequence[MemoryDir], query: str | None,
             paths: Sequence[str] | None, at: datetime) -> list[tuple[Memory, float]]:
    candidates = _strongest(conn, dirs, at, procedural=True)
    if not candidates:
        return []
    matched: dict[tuple[str, str], float] = {}
    if query:
        types = sorted({t.name for d in dirs for t in d.taxonomy.types
                        if t.layer == "procedural"})
        for hit in run_search(conn, query, dirs, types=types, tags=None,
                              include_archived=False, paths=None, limit=POOL, at=at):
            matched[_key(hit.memory)] = hit.match
    ranked = [(m, (matched.get(_key(m), 0.0) + 1.0) * s * _boost(m, paths))
              for m, s in candidates]
    ranked.sort(key=lambda pair: (not _proven(pair[0]), _key(pair[0]) not in matched,
                                  -pair[1]))
    return ranked


class _Filler:
    """Adds items while the rendered output stays within the budget."""

    def __init__(self, fmt: Format, budget: int, taxonomies: dict[str, Taxonomy],
                 limit: int | None) -> None:
        self.fmt, self.budget, self.taxonomies, self.limit = fmt, budget, taxonomies, limit
        self.items: list[ContextItem] = []
        self.seen: set[tuple[str, str]] = set()
        self.index = ""

    def render(self, items: Sequence[ContextItem], index: str) -> str:
        return render_context(items, self.fmt, index=index, taxonomies=self.taxonomies,
                              budget=self.budget)

    def fits(self, items: Sequence[ContextItem], index: str) -> bool:
        return count_tokens(self.render(items, index)) <= self.budget

    def full(self) -> bool:
        return self.limit is not None and len(self.items) >= self.limit

    def fill(self, layer: str, candidates: Sequence[tuple[Memory, float]],
             most: int | None = None) -> None:
        added = misses = 0
        for memory, score in candidates:
            if self.full() or (most is not None and added >= most) or misses >= GIVE_UP_AFTER:
                return
            if _key(memory) in self.seen:
                continue
            item = ContextItem(memory, layer, score)  # type: ignore[arg-type]
            if self.fits([*self.items, item], ""):
                self.items.append(item)
                self.seen.add(_key(memory))
                added += 1
                misses = 0
            else:
                misses += 1

    def add_index(self, index: str) -> int:
        """The whole index if it fits, else as many leading lines as fit; lines included.

        The generated title and marker lines carry no information for the model: dropped."""
        lines = [line for line in index.split("\n") if line.strip()
                 and line.strip() != "# Memory Index" and not line.startswith("<!--")]
        if not lines or self.fmt == "snippets":
            return 0
        if self.fits(self.items, "\n".join(lines)):
            self.index = "\n".join(lines)
            return len(lines)
        low, high = 0, len(lines) - 1  # the largest n whose truncated index still fits
        while low < high:
            mid = (low + high + 1) // 2
            if self.fits(self.items, _cut(lines, mid)):
                low = mid
            else:
                high = mid - 1
        if low:
            self.index = _cut(lines, low)
        return low


def _cut(lines: Sequence[str], n: int) -> str:
    return "\n".join([*lines[:n], f"[... {len(lines) - n} more lines in MEMORY.md]"])


def build_context(conn: sqlite3.Connection, dirs: Sequence[MemoryDir], *, index: str,
                  query: str | None, budget_tokens: int, fmt: str, limit: int | None,
                  paths: Sequence[str] | None, at: datetime) -> Context:
    """Choose and render the session-start context (see the module docstring)."""
    if fmt not in FORMATS:
        raise InvalidMemoryError(f"unknown context format {fmt!r}",
                                 f"use one of: {', '.join(FORMATS)}")
    if not isinstance(budget_tokens, int) or budget_tokens < 1:
        raise InvalidMemoryError(f"the token budget must be a positive integer, not "
                                 f"{budget_tokens!r}", "pass e.g. --budget 800")
    if limit is not None and limit < 1:
        raise InvalidMemoryError(f"limit must be at least 1, not {limit}")
    form: Format = fmt
    taxonomies: dict[str, Taxonomy] = {d.scope: d.taxonomy for d in dirs}
    filler = _Filler(form, budget_tokens, taxonomies, limit)
    query = query.strip() if query and query.strip() else None
    if dirs:
        tax_of = {d.key: d.taxonomy for d in dirs}
        baseline = [(m, strength(m, tax_of.get(str(m.path.parent) if m.path else ""), at))
                    for m in _layer_a(conn, dirs)]
        filler.fill("A", baseline)
        filler.fill("B", _layer_b(conn, dirs, query, paths, at))
        filler.fill("C", _layer_c(conn, dirs, query, paths, at), most=PROCEDURES)
    index_lines = filler.add_index(index)
    text = filler.render(filler.items, filler.index)
    if count_tokens(text) > budget_tokens:  # even the empty frame does not fit: inject nothing
        text = ""
    return Context(text, tuple(filler.items), form, budget_tokens, count_tokens(text),
                   index_lines)
