"""The whole-store conflict scan, remembered between processes.

``$MEMDIR_HOME/conflicts.json`` holds the last scan's pairs (ids, reason, whether the order
is known) with a digest of the memories it read, so ``memdir doctor``, the HTTP listing and
a consolidation plan reuse it while no memory changed: a scan of 10,000 memories takes
seconds, reading it back a few milliseconds.

Invariants: a remembered scan is used only for exactly the memories it was computed from
(their ids, scopes, types, statuses, update times and texts, and ``RULES``, the rules'
version); a file that is unreadable, stale or names a memory not given is ignored and the
scan runs again; failing to remember (a read-only home) changes nothing but the time. A scan
cut short by a deadline is never remembered.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path

from memdir.core.model import Memory, format_time
from memdir.upkeep.conflicts import Conflict, conflicting_pairs

__all__ = ["FILE", "RULES", "digest_rows", "remembered", "scan"]

Key = tuple[str, str]  # a memory's (scope, id)

FILE = "conflicts.json"
RULES = "4"  # changes whenever the conflict rules do: an old scan is not reused


Row = tuple[str, str, str, str, str, str]  # scope, id, type, status, updated, body


def _digest(memories: Sequence[Memory]) -> str:
    return digest_rows([(m.scope, m.id, m.type, m.status, format_time(m.updated), m.body)
                        for m in memories])


def digest_rows(rows: Sequence[Row]) -> str:
    """The digest of the memories a scan reads, from their index rows (``updated`` as the
    index writes it): what :func:`scan` compares to tell whether a remembered scan holds."""
    h = hashlib.blake2b(RULES.encode(), digest_size=20)
    for row in sorted(rows, key=lambda r: (r[0], r[1])):
        h.update("\x1f".join(row).encode("utf-8", "surrogatepass"))
        h.update(b"\x1e")
    return h.hexdigest()


def remembered(home: Path, digest: str) -> list[tuple[Key, Key, str, bool]] | None:
    """The remembered scan's pairs ((scope, id) older, newer, reason, ordered) when it was
    made of the memories of ``digest`` (:func:`digest_rows`), else None: a caller that has
    only rows builds whole memories for these few, not for the store."""
    from memdir.core.errors import MemdirError
    from memdir.core.safe_open import CONFLICT_SCAN, read_file

    try:  # never a symlink, a FIFO or a file over the cap (memdir.core.safe_open)
        data = json.loads(read_file(home / FILE, CONFLICT_SCAN))
    except (OSError, ValueError, MemdirError):
        return None
    if not isinstance(data, dict) or data.get("digest") != digest:
        return None
    out = []
    for item in data.get("conflicts", []):
        try:
            older = (str(item["older"][0]), str(item["older"][1]))
            newer = (str(item["newer"][0]), str(item["newer"][1]))
            reason, ordered = item["reason"], item["ordered"]
        except (KeyError, TypeError, IndexError):
            return None
        if not isinstance(reason, str) or not isinstance(ordered, bool):
            return None
        out.append((older, newer, reason, ordered))
    return out


def scan(home: Path | None, memories: Sequence[Memory], *,
         deadline: float | None = None) -> list[Conflict]:
    """:func:`memdir.upkeep.conflicts.conflicting_pairs` of ``memories``, from the remembered
    scan when it was made of exactly these memories (module docstring)."""
    digest = _digest(memories)
    if home is not None:
        found = _recall(home / FILE, digest, memories)
        if found is not None:
            return found
    found = conflicting_pairs(memories, deadline=deadline)
    if home is not None and (deadline is None or time.monotonic() <= deadline):
        _remember(home / FILE, digest, found)
    return found


def _recall(path: Path, digest: str, memories: Sequence[Memory]) -> list[Conflict] | None:
    found = remembered(path.parent, digest)
    if found is None:
        return None
    by_key: dict[Key, Memory] = {(m.scope, m.id): m for m in memories}
    try:
        return [Conflict(by_key[older], by_key[newer], reason, ordered)
                for older, newer, reason, ordered in found]
    except KeyError:
        return None


def _remember(path: Path, digest: str, found: Sequence[Conflict]) -> None:
    from memdir.core.files import atomic_write

    data = {"digest": digest, "rules": RULES, "conflicts": [
        {"older": [c.older.scope, c.older.id], "newer": [c.newer.scope, c.newer.id],
         "reason": c.reason, "ordered": c.ordered} for c in found]}
    with contextlib.suppress(OSError):  # a read-only home: the next scan runs again
        atomic_write(path, json.dumps(data), fsync=False)
