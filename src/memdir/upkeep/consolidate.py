"""Consolidation (seed 002): a plan of operations with reasons, then applied through the facade.

Operations, in the order they are planned:
- ``merge``: near-duplicates of one type in one scope (:func:`near_duplicate`, each member a
  near-duplicate of every other: the same claim, never another value or another subject)
  become one memory: the strongest keeps its text and gets the union of tags, the highest
  relevance, the summed reinforcements and the earliest ``created``; the others are
  archived with ``superseded_by`` pointing at it. Candidates come from an inverted index of
  words (at most ``_POSTING_CAP`` memories a word): bounded work per memory.
- ``conflict``: two memories in play (any types, any scopes) that say something of one
  subject with different values or opposite polarity
  (:func:`memdir.upkeep.conflicts.conflicting_pairs`: "port 8005" / "9999", "pnpm over npm"
  / "npm over pnpm", "enable" / "disable"), the older first, with the reason (which says so
  when the two were written in one second in an order that cannot be known). Applying it
  changes nothing: rules never merge or archive either of them (not even when weak), a
  person or a model decides. A plan lists all of them; a listing shows the first
  ``LISTED`` of each kind beside :attr:`Plan.totals`.
- ``archive``: memories whose strength fell below ``ARCHIVE_STRENGTH`` (0.05). Archived
  memories stay searchable with ``include_archived`` and are never injected.
- ``promote``: memories reinforced at least ``PROMOTE_AFTER`` (3) times since their last
  promotion move one relevance step up.
- ``dates``: relative dates ("next Thursday") left in memories written before that rule
  existed are made absolute, counted from the day the memory was created.
- with an LLM configured (``llm`` given and available, :mod:`memdir.upkeep.consolidate_llm`): each
  merge's wording is written by the model (keeping every fact); the conflicts, then other
  related pairs, are put to it, and a pair becomes ``supersede`` (the older archived with
  ``superseded_by`` the newer) only when the model says they contradict and the newer
  replaces the older, with its reason in the plan. Otherwise a conflict stays reported.
  Without a model, or when its answer is unusable, rules only.
- ``gather``: new lines of the daily logs (:mod:`memdir.upkeep.logs`) become memories: one episode
  per day's new lines, plus what rule extraction finds in them (preferences, corrections,
  constraints); the lines are then marked consumed (the logs are never edited).

Invariants:
- Planning reads only; ``dry_run`` never writes.
- Nothing is deleted: every change is an update or an archive through the facade, so the
  write-time rules hold and every step can be reversed (``restore``, the history log).
- A plan is applied write-ahead (:mod:`memdir.upkeep.history`): its begin record and the
  before-image of every file it changes are on disk before the file changes, and a complete
  record follows the last change; :func:`undo_last` puts the files back, also after a kill
  half-way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from memdir.core.dates import absolutize_dates, anchor_day
from memdir.core.model import RELEVANCE_WORDS, Memory, Scope, format_time
from memdir.retrieval.search import strength
from memdir.upkeep.claims import read
from memdir.upkeep.conflict_scan import scan
from memdir.upkeep.conflicts import Conflict
from memdir.upkeep.history import history, undo_last
from memdir.upkeep.merge_rule import MERGE_SIMILARITY, near_duplicate

if TYPE_CHECKING:
    from memdir.llm.client import LLM
    from memdir.memdir import Memdir

__all__ = ["ARCHIVE_STRENGTH", "LISTED", "MERGE_SIMILARITY", "PROMOTE_AFTER", "Operation", "Plan",
           "apply_plan", "conflict_operation", "history", "near_duplicate", "plan", "undo_last"]

# Seed 002 archives below 0.1 with a usage factor of 1 for a memory never used; memdir's
# bounded boost gives such a memory BASE (0.5), so 0.1 × BASE archives it at the same age
# (type weight × relevance × decay below 0.1), and a memory the agent uses lives longer.
ARCHIVE_STRENGTH = 0.05
PROMOTE_AFTER = 3
# How many operations of each kind a listing (CLI, doctor, MCP, HTTP) shows beside the total.
LISTED = 20
# Merge candidates through one word are looked at only when at most this many memories
# share it: bounded work per memory on stores written from one template.
_POSTING_CAP = 200
_STEPS = sorted(set(RELEVANCE_WORDS.values()))
OpKind = Literal["merge", "archive", "promote", "dates", "gather", "supersede", "conflict"]


@dataclass(frozen=True)
class Operation:
    op: OpKind
    reason: str
    memories: tuple[str, ...]  # ids; for a merge the first one is kept
    scope: Scope
    changes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "reason": self.reason, "memories": list(self.memories),
                "scope": self.scope, "changes": self.changes}


@dataclass(frozen=True)
class Plan:
    operations: tuple[Operation, ...]
    applied: bool = False

    @property
    def conflicts(self) -> tuple[Operation, ...]:
        """The ``conflict`` operations: reported, never applied."""
        return tuple(op for op in self.operations if op.op == "conflict")

    @property
    def totals(self) -> dict[str, int]:
        """How many operations of each kind the plan holds."""
        out: dict[str, int] = {}
        for op in self.operations:
            out[op.op] = out.get(op.op, 0) + 1
        return out

    def page(self, limit: int | None = LISTED) -> list[Operation]:
        """The first ``limit`` operations of each kind (all with None): what a listing shows
        beside :attr:`totals`."""
        seen: dict[str, int] = {}
        out = []
        for op in self.operations:
            seen[op.op] = seen.get(op.op, 0) + 1
            if limit is None or seen[op.op] <= limit:
                out.append(op)
        return out

    def to_dict(self, limit: int | None = None) -> dict[str, Any]:
        """The plan as JSON: ``operations`` (the first ``limit`` of each kind, all with
        None) and ``totals`` (how many of each kind there are)."""
        return {"applied": self.applied, "totals": self.totals,
                "operations": [op.to_dict() for op in self.page(limit)]}


def _candidates(memories: Sequence[Memory]) -> dict[str, set[str]]:
    """For each memory, the others of its type that could be near-duplicates of it.

    The merge rule needs one text's distinctive words (:attr:`memdir.upkeep.claims.Reading.words`)
    all inside the other's, so a partner either holds this memory's rarest word or has its
    own rarest word among this memory's words: two lookups in an inverted index instead of
    comparing every pair (10k memories: 10^8 pairs).
    """
    words = {m.id: read(m.body).words for m in memories}
    postings: dict[tuple[str, str], set[str]] = {}
    for m in memories:
        for w in words[m.id]:
            postings.setdefault((m.type, w), set()).add(m.id)
    df = {key: len(found) for key, found in postings.items()}
    rarest: dict[str, str] = {}
    by_rarest: dict[tuple[str, str], set[str]] = {}
    for m in memories:
        if words[m.id]:
            _, word = min((df[(m.type, w)], w) for w in words[m.id])
            rarest[m.id] = word
            by_rarest.setdefault((m.type, word), set()).add(m.id)
    out: dict[str, set[str]] = {}
    for m in memories:
        if m.id not in rarest:
            continue
        first = postings[(m.type, rarest[m.id])]
        found = set(first) if len(first) <= _POSTING_CAP else set()  # a generic memory
        for w in words[m.id]:
            theirs = by_rarest.get((m.type, w), set())
            if len(theirs) <= _POSTING_CAP:
                found |= theirs
        found.discard(m.id)
        out[m.id] = found
    return out


def _merges(memories: Sequence[Memory], power: dict[str, float]) -> list[Operation]:
    ops: list[Operation] = []
    taken: set[str] = set()
    ordered = sorted(memories, key=lambda m: (-power[m.id], m.created))
    by_id = {m.id: m for m in memories}
    candidates = _candidates(memories)
    for keep in ordered:
        if keep.id in taken:
            continue
        near = sorted((by_id[i] for i in candidates.get(keep.id, ())
                       if i not in taken and near_duplicate(keep.body, by_id[i].body)),
                      key=lambda m: (-power[m.id], m.created))
        group: list[Memory] = []
        for other in near:  # each member a near-duplicate of every other, not only of keep
            if all(near_duplicate(other.body, g.body) for g in group):
                group.append(other)
        if not group:
            continue
        taken.update([keep.id, *(m.id for m in group)])
        members = [keep, *group]
        ops.append(Operation(
            "merge", f"{len(group) + 1} near-duplicate {keep.type} memories (the same words, "
                     "numbers and negations, nothing reversed or opposed)",
            tuple(m.id for m in members), keep.scope,
            {"tags": sorted({t for m in members for t in m.tags}),
             "relevance": max(m.relevance for m in members),
             "reinforced": sum(m.reinforced for m in members),
             "created": format_time(min(m.created for m in members))}))
    return ops


def _next_step(relevance: float) -> float | None:
    return next((step for step in _STEPS if step > relevance + 1e-9), None)


def plan(md: Memdir, at: datetime, llm: LLM | None = None, *,
         deadline: float | None = None) -> Plan:
    """The consolidation plan; with an LLM, merged wording and contradictions too.
    ``deadline`` (:func:`time.monotonic`): conflicts are looked for until then, and the
    model is not asked after it (the dream's time budget)."""
    ops: list[Operation] = []
    lists: dict[Scope, list[Memory]] = {}
    for scope in ("user", "project", "team"):
        if scope == "team" and (md.server is not None  # a server's: its own to maintain
                                or not md.directory("project").path.exists()):
            continue
        try:
            lists[scope] = md.list(scopes=[scope])
        except Exception:  # a team directory that is not there (or not allowed): nothing
            continue
    # One pass over every scope in play: a user memory may contradict a project one.
    conflicts = scan(md.home, [m for found in lists.values() for m in found],
                     deadline=deadline)
    held = {m.id for c in conflicts for m in (c.older, c.newer)}
    ops.extend(conflict_operation(c) for c in conflicts)
    for scope, memories in lists.items():
        tax = md.directory(scope).taxonomy
        power = {m.id: strength(m, tax, at) for m in memories}
        merges = _merges([m for m in memories if m.id not in held], power)
        ops.extend(merges)
        merged = {i for op in merges for i in op.memories}
        for m in memories:
            if m.id in merged:
                continue
            if power[m.id] < ARCHIVE_STRENGTH and m.id not in held:
                ops.append(Operation("archive", f"strength {power[m.id]:.3f} is below "
                                                f"{ARCHIVE_STRENGTH}", (m.id,), scope))
                continue
            since = m.reinforced - int(m.meta.get("promoted_at", 0) or 0)
            step = _next_step(m.relevance)
            if since >= PROMOTE_AFTER and step is not None:
                ops.append(Operation("promote", f"reinforced {since} times since its last "
                                                "promotion", (m.id,), scope,
                                     {"relevance": step, "promoted_at": m.reinforced}))
            day = anchor_day(m.created)
            fixed = absolutize_dates(m.body, day)
            if fixed != m.body:
                ops.append(Operation("dates", "relative dates made absolute (counted from "
                                              f"{day.isoformat()})", (m.id,),
                                     scope, {"body": fixed}))
    ops.extend(_gathers(md))
    if llm is not None and llm.available and (deadline is None
                                              or time.monotonic() < deadline):
        from memdir.upkeep.consolidate_llm import with_llm

        ops = with_llm(md, ops, llm)
    return Plan(tuple(ops))


def conflict_operation(found: Conflict) -> Operation:
    """The plan's report of a conflict: the older memory first (the reason says when which
    is older is not known), nothing to apply."""
    return Operation("conflict", f"they disagree: {found.explained}",
                     (found.older.id, found.newer.id), found.older.scope)


def _gathers(md: Memdir) -> list[Operation]:
    from memdir.capture.episodes import episode_type
    from memdir.capture.rules import extract_rules
    from memdir.upkeep.logs import unconsumed

    ops: list[Operation] = []
    for scope in ("user", "project"):
        mdir = md.directory(scope)
        for new in unconsumed(mdir.path):
            texts = new.texts
            day = new.file.rsplit("/", 1)[-1].removesuffix(".md")
            found = [{"content": f"Log of {day}:\n" + "\n".join(f"- {t}" for t in texts)[:3000],
                      "type": episode_type(mdir.taxonomy), "relevance": 0.5}]
            for text in texts:
                found += [{"content": c.content, "type": c.type, "relevance": c.relevance}
                          for c in extract_rules(text, mdir.taxonomy)]
            ops.append(Operation("gather", f"{len(texts)} new lines in logs/{new.file}", (),
                                 scope, {"file": new.file, "end": new.end,
                                         "memories": found}))
    return ops


def _files(md: Memdir, ids: Sequence[str]) -> list[Path]:
    """The files of the memories a plan changes: journalled before the plan starts."""
    return [path for ref in ids if (path := md._find(ref).path) is not None]


def apply_plan(md: Memdir, planned: Plan, at: datetime, *, by: str = "consolidate") -> Plan:
    """Apply a plan, write-ahead: the history holds the plan and the before-image of each file
    before that file changes (:func:`memdir.upkeep.history.journalled`)."""
    from memdir.core.store import index_deferred
    from memdir.upkeep.history import journalled

    changing = [op for op in planned.operations if op.op != "conflict"]
    if not changing:  # nothing to change (conflicts are reported, not applied)
        with index_deferred(md.index, md._dirs()):
            pass  # MEMORY.md is regenerated all the same (dream's prune)
        return Plan(planned.operations, applied=True)
    first = _files(md, sorted({i for op in changing for i in op.memories}))
    with journalled(md, planned.to_dict(), first, at, by), \
            index_deferred(md.index, md._dirs()):
        _apply(md, planned)
    return Plan(planned.operations, applied=True)


def _apply(md: Memdir, planned: Plan) -> None:
    for op in planned.operations:
        if op.op == "conflict":
            continue  # reported only: a person or a model resolves it
        if op.op == "merge":
            keep, *others = op.memories
            md.update(keep, content=op.changes.get("body"), tags=op.changes["tags"],
                      relevance=op.changes["relevance"], meta={"merged_from": list(others)})
            # One search context: the kept memory's, else the first other's that has one.
            context = next((c for ref in op.memories if (c := md._find(ref).context)), "")
            md._set(keep, reinforced=op.changes["reinforced"],
                    created=op.changes["created"], context=context)
            for other in others:
                md._set(other, status="archived", superseded_by=keep)
        elif op.op == "archive":
            md.archive(op.memories[0])
        elif op.op == "gather":
            from memdir.upkeep.logs import mark_consumed

            for item in op.changes["memories"]:
                md.store(item["content"], type=item["type"], scope=op.scope,
                         relevance=item["relevance"], source="consolidated",
                         meta={"log": op.changes["file"]})
            mark_consumed(md.directory(op.scope).path, op.changes["file"], op.changes["end"])
        elif op.op == "supersede":
            md._set(op.memories[0], status="archived", superseded_by=op.memories[1])
        elif op.op == "promote":
            md.update(op.memories[0], relevance=op.changes["relevance"],
                      meta={"promoted_at": op.changes["promoted_at"]})
        else:
            md.update(op.memories[0], content=op.changes["body"])
