"""Which of two conflicting memories is older: :class:`Conflict` (the pair, the reason, the
order) and :func:`written_order`.

``updated`` is stored to the second; in one second, the files' nanosecond mtimes decide;
else the order is unknown and the reason says so (consolidation never lets a model's verdict
archive one of such a pair).

Invariant: :func:`written_order` does not depend on the order of its arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

from memdir.core.model import Memory

__all__ = ["UNORDERED", "Conflict", "written_order"]

# Said of a conflict whose two memories were written in one second, in an unknown order.
UNORDERED = "; which was written first is unknown (the same second)"
# A file written in its memory's ``updated`` second has its mtime within this of that
# second's start (the second may end between the clock's reading and the write).
_WRITE_WINDOW_NS = 2_000_000_000


@dataclass(frozen=True)
class Conflict:
    """Two active memories that conflict (any types and scopes), the older first.
    ``ordered``: False when which was written first cannot be known (:func:`written_order`);
    the two are then in id order and the reason says so."""

    older: Memory
    newer: Memory
    reason: str
    ordered: bool = True

    @property
    def explained(self) -> str:
        """The reason, with the order's caveat when it is not known."""
        return self.reason + ("" if self.ordered else UNORDERED)

    def to_dict(self) -> dict[str, object]:
        return {"memories": [self.older.id, self.newer.id], "reason": self.explained,
                "scope": self.older.scope, "type": self.older.type}


def written_order(a: Memory, b: Memory) -> tuple[Memory, Memory, bool]:
    """(older, newer, known): which of two memories was written first. ``updated`` is stored
    to the second, so two written in one second tie; then the files' nanosecond mtimes
    decide, when both were last written in that second (a file copied, checked out or put
    back by ``undo`` has a later mtime than its ``updated``). Otherwise (the PostgreSQL
    store has no file; a fixed clock) the order is unknown: id order, and ``known`` False."""
    if a.updated != b.updated:
        return (a, b, True) if a.updated < b.updated else (b, a, True)
    ta, tb = _written_ns(a), _written_ns(b)
    if ta is not None and tb is not None and ta != tb:
        return (a, b, True) if ta < tb else (b, a, True)
    return (a, b, False) if a.id <= b.id else (b, a, False)


def _written_ns(memory: Memory) -> int | None:
    """When the memory's file was last written, in ns, if that was its ``updated`` second."""
    if memory.path is None:
        return None
    try:
        mtime = memory.path.stat().st_mtime_ns
    except OSError:
        return None
    since = mtime - int(memory.updated.timestamp()) * 1_000_000_000
    return mtime if 0 <= since < _WRITE_WINDOW_NS else None
