"""Consolidation with a model: merged wording, and which memory of a contradiction wins.

Given the rules' plan (:func:`memdir.upkeep.consolidate.plan`), the model

- writes one wording for each ``merge`` that keeps every fact;
- is shown the plan's ``conflict`` pairs first, then other related pairs (full-text search
  neighbours of the most recently changed memories), at most ``MAX_PAIRS``, each as the
  older memory and the newer one (:func:`memdir.upkeep.conflicts.written_order`; a pair
  written in one second in an order that cannot be known is marked so). For each pair that
  contradicts, it says whether the newer replaces the older, and why.

Invariants:
- A memory is archived (``supersede``) only when the model named the pair, said the newer
  replaces the older and gave a reason, and which of the two is the older is known; the
  plan's reason quotes it. A verdict that turns on an unknown order stays a ``conflict``.
- A conflict the rules found stays a reported ``conflict`` unless so superseded: also when
  the model finds no contradiction (the reason says so) or answers something unusable.
- An unusable answer changes nothing: the rules' plan stands as it was.
- A memory is archived at most once, and never one that another operation of the plan
  touches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memdir.upkeep.conflicts import Conflict, written_order
from memdir.upkeep.consolidate import Operation, conflict_operation

if TYPE_CHECKING:
    from memdir.core.model import Memory
    from memdir.llm.client import LLM
    from memdir.memdir import Memdir

__all__ = ["MAX_PAIRS", "with_llm"]

MAX_PAIRS = 20  # pairs checked for contradictions per plan: a bounded number of tokens
_MERGE_PROMPT = ("These memories of an AI coding assistant say the same thing. Write them as "
                 "one memory that keeps every fact, in at most 300 characters. Reply with "
                 'JSON: {"content": "..."}.')
_CONFLICT_PROMPT = (
    "Each numbered pair holds two memories of an AI coding assistant: A is the older, B the "
    "newer. List the pairs that contradict each other (both cannot be true now). For each, "
    "say whether B replaces A (for example a decision or a version changed since) and why, in "
    "one sentence; when a pair says which is newer is unknown, say false. Reply with JSON: "
    '{"contradictions": [{"pair": number, '
    '"newer_replaces_older": true or false, "reason": "..."}]}; an empty list when none do.')
_UNKNOWN = "\n   (A and B were written in the same second: which is newer is unknown)"
_CONFLICT_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["contradictions"],
    "properties": {"contradictions": {"type": "array", "items": {
        "type": "object", "required": ["pair", "newer_replaces_older", "reason"],
        "properties": {"pair": {"type": "integer"},
                       "newer_replaces_older": {"type": "boolean"},
                       "reason": {"type": "string"}}}}}}


@dataclass(frozen=True)
class Verdict:
    """The model's word on one pair: they contradict; whether the newer replaces the older."""

    replaces: bool
    reason: str


def with_llm(md: Memdir, ops: list[Operation], llm: LLM) -> list[Operation]:
    """The plan with the model's wording and verdicts (module docstring)."""
    out = [_worded(md, op, llm) if op.op == "merge" else op for op in ops]
    found = {frozenset(op.memories): op for op in out if op.op == "conflict"}
    pairs = _pairs(md, out, [op.memories for op in found.values()])
    if not pairs:
        return out
    listing = "\n".join(f"{n}. A: {a.body}\n   B: {b.body}" + ("" if known else _UNKNOWN)
                        for n, (a, b, known) in enumerate(pairs, 1))
    verdicts = _verdicts(llm.ask(_CONFLICT_PROMPT, listing, _CONFLICT_SCHEMA,
                                 purpose="consolidate"), len(pairs))
    if verdicts is None:
        return out  # unusable: the rules' plan as it was
    archived: set[str] = set()
    replaced: dict[frozenset[str], Operation | None] = {}
    added: list[Operation] = []
    for n, (old, new, known) in enumerate(pairs, 1):
        key = frozenset((old.id, new.id))
        verdict = verdicts.get(n)
        if verdict and verdict.replaces and known and not {old.id, new.id} & archived:
            archived.add(old.id)
            replaced[key] = None
            added.append(Operation("supersede", f"the LLM says the newer {new.id} replaces "
                                                f"it: {verdict.reason}", (old.id, new.id),
                                   old.scope))
        elif verdict:
            said = ("the LLM says they contradict and the newer does not replace the older: "
                    if known or not verdict.replaces else
                    "the LLM says one replaces the other, but which was written first is "
                    "unknown: check them: ") + verdict.reason
            if key in found:
                replaced[key] = _noted(found[key], "; " + said)
            else:
                added.append(conflict_operation(Conflict(old, new, said, known)))
        elif key in found:
            replaced[key] = _noted(found[key], "; the LLM found no contradiction: check them")
    kept = [replaced.get(frozenset(op.memories), op) if op.op == "conflict" else op
            for op in out]
    return [op for op in kept if op is not None] + added


def _worded(md: Memdir, op: Operation, llm: LLM) -> Operation:
    bodies = [md._find(i).body for i in op.memories]
    answer = llm.ask(_MERGE_PROMPT, "\n\n".join(f"- {b}" for b in bodies),
                     {"type": "object", "properties": {"content": {"type": "string"}},
                      "required": ["content"]}, purpose="consolidate")
    text = answer.get("content") if isinstance(answer, dict) else None
    if isinstance(text, str) and 0 < len(text.strip()) <= 500:
        return Operation(op.op, op.reason + "; wording merged by the LLM", op.memories,
                         op.scope, {**op.changes, "body": text.strip()})
    return op


def _noted(op: Operation, note: str) -> Operation:
    return Operation(op.op, op.reason + note, op.memories, op.scope, op.changes)


def _pairs(md: Memdir, ops: list[Operation],
           conflicts: list[tuple[str, ...]]) -> list[tuple[Memory, Memory, bool]]:
    """The conflicts first, then related pairs no other operation touches: (older, newer,
    whether that order is known)."""
    pairs: list[tuple[Memory, Memory, bool]] = []
    seen: set[frozenset[str]] = set()

    def add(a: Memory, b: Memory) -> None:
        if len(pairs) < MAX_PAIRS and frozenset((a.id, b.id)) not in seen:
            seen.add(frozenset((a.id, b.id)))
            pairs.append(written_order(a, b))

    for older, newer in conflicts:
        add(md._find(older), md._find(newer))
    busy = {i for op in ops for i in op.memories}
    for scope in ("user", "project"):
        for memory in md.list(scopes=[scope], order="updated", limit=100):
            for hit in md.search(memory.body, scopes=[scope], types=[memory.type], limit=3,
                                 touch=False, mode="fts"):
                if hit.memory.id != memory.id and not {hit.memory.id, memory.id} & busy:
                    add(memory, hit.memory)
    return pairs


def _verdicts(answer: Any, count: int) -> dict[int, Verdict] | None:
    """The model's verdicts by pair number; None when the answer is not of the asked shape
    (an item without a pair number in range, a boolean or a reason makes it unusable)."""
    items = answer.get("contradictions") if isinstance(answer, dict) else None
    if not isinstance(items, list):
        return None
    out: dict[int, Verdict] = {}
    for item in items:
        n, replaces, reason = ((item.get("pair"), item.get("newer_replaces_older"),
                                item.get("reason")) if isinstance(item, dict) else (0, 0, 0))
        if not (isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= count
                and isinstance(replaces, bool) and isinstance(reason, str) and reason.strip()):
            return None
        out[n] = Verdict(replaces, " ".join(reason.split())[:300])
    return out
