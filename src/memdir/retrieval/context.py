"""Session-start context: which memories are injected, in which order, within a token budget.

Three layers (seed 002), filled in this order until the budget is spent:
- A, baseline: the taxonomy's always-on types (``baseline``) at relevance >= high (0.8), by
  relevance, then most recently updated.
- B, contextual: the other memories by strength (type weight × relevance × decay ×
  reinforcement) above ``B_THRESHOLD``; with a query, memories matching it come first, by
  match × strength. Procedures are left to layer C.
- C, procedures: up to three procedural memories, proven ones (``success_count`` > 0 in their
  frontmatter) first, those matching the query before the others.
Layer A takes at most ``A_SHARE`` (60%) of the budget and, when procedures exist, layer B
leaves ``C_RESERVE`` (15%) for layer C: a store with thousands of always-on memories still
shows what matches the task. With a query, matching baseline memories come first in layer A.
Then the lines of the project's MEMORY.md (capped at 200 lines / 25,000 bytes) that name
something not listed above (:mod:`memdir.retrieval.context_index`), each whole: as many as fit, a
line that does not fit left out, and a last line saying how many were. A memory whose ``paths``
globs cover one of the given files scores ``PATH_BOOST`` times higher in layers B and C.

Invariants:
- Archived memories are never injected; no memory is listed twice, nor two memories with the
  same text (two scopes may hold one).
- The returned text never exceeds the budget as counted by :func:`count_tokens`: after every
  addition the whole output is rendered and measured, and an addition that does not fit is
  taken back.
- Usage counters of every injected memory are updated; a failure to update them is logged
  and never fails the call.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from memdir.core.errors import InvalidMemoryError
from memdir.core.index import USAGE_COLUMNS, row_to_memory
from memdir.core.model import RELEVANCE_WORDS, Memory
from memdir.core.neutralise import neutralise_lines
from memdir.core.taxonomy import Taxonomy
from memdir.retrieval.context_format import (
    FORMATS,
    Context,
    ContextItem,
    Format,
    count_tokens,
    render_context,
)
from memdir.retrieval.context_index import index_lines as index_lines_of
from memdir.retrieval.ranking import JOIN, PATH_BOOST, POOL, Ranking, active_where, types_of
from memdir.retrieval.search import (
    glob_matches,
    run_search,
    strength,
)

if TYPE_CHECKING:
    from memdir.core.store import MemoryDir

__all__ = ["B_THRESHOLD", "Context", "build_context"]

HIGH = RELEVANCE_WORDS["high"]
B_THRESHOLD = 0.1  # the strength below which consolidation archives a memory (seed 002)
PROCEDURES = 3
A_SHARE = 0.6  # of the budget at most for layer A
C_RESERVE = 0.15  # of the budget kept from layer B for procedures, when there are any
POOL_C = 50  # procedures loaded per group (proven / not) to order them by match
QUERY_HITS = 30  # matches for the query considered (each is loaded whole)
MIN_ITEM_TOKENS = 4  # "- " and a few words: below this remaining budget nothing fits
GIVE_UP_AFTER = 10  # consecutive candidates that did not fit: the budget is effectively full


def _load(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, Memory]:
    rows = conn.execute(
        f"SELECT m.*, {USAGE_COLUMNS} {JOIN} "
        f"WHERE m.rowid IN ({','.join('?' * len(rowids))})", list(rowids)).fetchall()
    return {row["rowid"]: row_to_memory(row) for row in rows}


def _paged(conn: sqlite3.Connection, ranked: Sequence[tuple[int, float]],
           page: int = 20) -> Iterator[tuple[Memory, float]]:
    """Memories of ranked rowids, loaded a page at a time: a budget rarely needs many."""
    for start in range(0, len(ranked), page):
        chunk = ranked[start:start + page]
        loaded = _load(conn, [r for r, _ in chunk])
        for rowid, score in chunk:
            if rowid in loaded:
                yield loaded[rowid], score


def _key(memory: Memory) -> tuple[str, str]:
    return (memory.scope, memory.id)


def _boost(memory: Memory, paths: Sequence[str] | None) -> float:
    return PATH_BOOST if paths and memory.paths and glob_matches(memory.paths, paths) else 1.0


def _layer_a(conn: sqlite3.Connection, dirs: Sequence[MemoryDir], query: str | None,
             at: datetime) -> Iterator[tuple[Memory, float]]:
    """Baseline memories by relevance; with a query, those matching it first."""
    taxonomies = {d.key: d.taxonomy for d in dirs}
    matched: set[tuple[str, str]] = set()
    if query:
        types = sorted({t.name for d in dirs for t in d.taxonomy.types if t.baseline})
        hits = [h for h in run_search(conn, query, dirs, types=types, tags=None,
                                      include_archived=False, paths=None, limit=QUERY_HITS,
                                      at=at) if h.memory.relevance >= HIGH]
        hits.sort(key=lambda h: (-h.memory.relevance, -h.score))
        for hit in hits:
            matched.add(_key(hit.memory))
            yield hit.memory, hit.strength
    where, params = active_where(dirs)
    kind, kparams = types_of(dirs, lambda t: t.baseline)
    rows = conn.execute(
        f"SELECT m.rowid FROM memories m WHERE {where} AND m.relevance >= ? AND {kind} "
        f"ORDER BY m.relevance DESC, m.updated_jd DESC, m.file LIMIT {POOL}",
        [*params, HIGH, *kparams]).fetchall()
    for memory, _ in _paged(conn, [(r[0], 0.0) for r in rows]):
        if _key(memory) not in matched:
            tax = taxonomies.get(str(memory.path.parent) if memory.path else "")
            yield memory, strength(memory, tax, at)


def _layer_b(conn: sqlite3.Connection, dirs: Sequence[MemoryDir], query: str | None,
             paths: Sequence[str] | None, at: datetime,
             ranking: Ranking) -> Iterator[tuple[Memory, float]]:
    matched: set[tuple[str, str]] = set()
    if query:
        procedural = {(d.key, t.name) for d in dirs for t in d.taxonomy.types
                      if t.layer == "procedural"}
        hits = []
        for hit in run_search(conn, query, dirs, types=[], tags=None, include_archived=False,
                              paths=None, limit=QUERY_HITS, at=at):
            m = hit.memory
            if (str(m.path.parent) if m.path else "", m.type) not in procedural:
                hits.append((m, hit.match * hit.strength * _boost(m, paths)))
        hits.sort(key=lambda pair: -pair[1])
        matched = {_key(m) for m, _ in hits}
        yield from hits
    strong = [(r, s) for r, s, _ in ranking.other() if s >= B_THRESHOLD]
    for memory, score in _paged(conn, strong):
        if _key(memory) not in matched:
            yield memory, score


def _layer_c(conn: sqlite3.Connection, dirs: Sequence[MemoryDir], query: str | None,
             at: datetime, ranking: Ranking) -> Iterator[tuple[Memory, float]]:
    ranked = ranking.procedures()
    if not ranked:
        return
    matched: dict[tuple[str, str], float] = {}
    if query:
        types = sorted({t.name for d in dirs for t in d.taxonomy.types
                        if t.layer == "procedural"})
        for hit in run_search(conn, query, dirs, types=types, tags=None,
                              include_archived=False, paths=None, limit=QUERY_HITS, at=at):
            matched[_key(hit.memory)] = hit.match
    # Proven first, then those matching the task; the few candidates this needs are loaded.
    head = [(r, s) for r, s, proven in ranked if proven]
    rest = [(r, s) for r, s, proven in ranked if not proven]
    for group in (head, rest):
        loaded = list(_paged(conn, group[:POOL_C]))
        loaded.sort(key=lambda pair: (_key(pair[0]) not in matched, -pair[1]))
        for memory, score in loaded:
            yield memory, (matched.get(_key(memory), 0.0) + 1.0) * score


class _Filler:
    """Adds items while the rendered output stays within the budget."""

    def __init__(self, fmt: Format, budget: int, taxonomies: dict[str, Taxonomy],
                 limit: int | None) -> None:
        self.fmt, self.budget, self.taxonomies, self.limit = fmt, budget, taxonomies, limit
        self.items: list[ContextItem] = []
        self.seen: set[tuple[str, str]] = set()
        self.texts: set[str] = set()  # bodies shown, whitespace and case folded
        self.index = ""
        self.used = 0

    def render(self, items: Sequence[ContextItem], index: str) -> str:
        return render_context(items, self.fmt, index=index, taxonomies=self.taxonomies,
                              budget=self.budget)

    def fits(self, items: Sequence[ContextItem], index: str) -> bool:
        return self.tokens(items, index) <= self.budget

    def tokens(self, items: Sequence[ContextItem], index: str) -> int:
        return count_tokens(self.render(items, index))

    def memories(self) -> list[Memory]:
        return [item.memory for item in self.items]

    def full(self) -> bool:
        return self.limit is not None and len(self.items) >= self.limit

    def fill(self, layer: str, candidates: Iterable[tuple[Memory, float]], *,
             upto: int, most: int | None = None) -> None:
        """Add candidates in order while the output stays within ``upto`` tokens."""
        added = misses = 0
        if self.full() or upto - self.used < MIN_ITEM_TOKENS:
            return  # checked before the first candidate is even computed
        for memory, score in candidates:
            if self.full() or (most is not None and added >= most) or misses >= GIVE_UP_AFTER:
                return
            text = " ".join(memory.body.split()).casefold()
            if _key(memory) in self.seen or text in self.texts:
                continue  # one text once, even when two scopes hold it
            if upto - self.used < MIN_ITEM_TOKENS:
                return  # not even the shortest memory line would fit
            item = ContextItem(memory, layer, score)  # type: ignore[arg-type]
            tokens = count_tokens(self.render([*self.items, item], ""))
            if tokens <= upto:
                self.used = tokens
                self.items.append(item)
                self.seen.add(_key(memory))
                self.texts.add(text)
                added += 1
                misses = 0
            else:
                misses += 1

    def add_index(self, lines: Sequence[str]) -> int:
        """As many of these MEMORY.md lines as fit, in order and each whole: a line that does
        not fit is left out (a shorter one after it may fit), and a last line says how many
        were. Returns the number of lines included."""
        if not lines or self.fmt == "snippets":
            return 0
        if self.fits(self.items, "\n".join(lines)):
            self.index = "\n".join(lines)
            return len(lines)
        low, high = 0, len(lines) - 1  # the longest prefix that fits (its hint included)
        while low < high:
            mid = (low + high + 1) // 2
            if self.fits(self.items, _hinted(lines[:mid], len(lines))):
                low = mid
            else:
                high = mid - 1
        kept, misses = list(lines[:low]), 0
        spare = self.budget - self.tokens(self.items, _hinted(kept, len(lines)))
        for line in lines[low + 1:]:  # lines[low] did not fit: later, shorter ones may
            if misses >= GIVE_UP_AFTER:
                break
            # A line adds at least its own tokens less two (rounding, one digit fewer in the
            # last line's count): one that cannot fit is passed over without rendering.
            if count_tokens(neutralise_lines(line)) - 2 > spare:
                continue
            tokens = self.tokens(self.items, _hinted([*kept, line], len(lines)))
            if tokens <= self.budget:
                kept.append(line)
                spare, misses = self.budget - tokens, 0
            else:
                misses += 1
        if kept:
            self.index = _hinted(kept, len(lines))
        return len(kept)


def _hinted(kept: Sequence[str], total: int) -> str:
    """The lines kept and one saying how many of ``total`` were left out."""
    return "\n".join([*kept, f"[... {total - len(kept)} more lines in MEMORY.md]"])


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
        ranking = Ranking(conn, dirs, at, paths)
        budget = budget_tokens
        # Shares keep one layer from starving the next (a store with thousands of always-on
        # memories would otherwise never show anything about the task): A takes at most
        # A_SHARE of the budget, B leaves C_RESERVE for procedures when there are any.
        filler.fill("A", _layer_a(conn, dirs, query, at), upto=int(budget * A_SHARE))
        reserve = int(budget * C_RESERVE) if ranking.has_procedures() else 0
        filler.fill("B", _layer_b(conn, dirs, query, paths, at, ranking), upto=budget - reserve)
        filler.fill("C", _layer_c(conn, dirs, query, at, ranking), upto=budget,
                    most=PROCEDURES)
    project = [str(d.path) for d in dirs if d.scope == "project"]
    lines = index_lines_of(index, filler.memories(), project[0]) if index and project else []
    count = filler.add_index(lines)
    text = filler.render(filler.items, filler.index)
    if count_tokens(text) > budget_tokens:  # even the empty frame does not fit: inject nothing
        text = ""
    return Context(text, tuple(filler.items), form, budget_tokens, count_tokens(text), count)
