"""What the HTTP API adds to the values' own ``to_dict()``: context ``groups`` and stats ``by_age``.

Both are pure functions of memories, so they work the same over any store.

- ``groups``: the injected memories' ids per type, in injection order (seed 000 groups the
  context by type; the JSON keeps that grouping for clients that render their own).
- ``by_age``: memories (any status) by creation time, in four disjoint buckets that sum to
  the total, counted in UTC: ``today`` (since 00:00 UTC, and anything dated in the future),
  ``this week`` (the 6 days before today), ``this month`` (the 23 days before those, so up
  to 29 days before today), ``older``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from memdir.core.model import Memory

__all__ = ["AGE_BUCKETS", "by_age", "groups"]

AGE_BUCKETS = ("today", "this week", "this month", "older")


def groups(memories: Iterable[Memory]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for memory in memories:
        out.setdefault(memory.type, []).append(memory.id)
    return out


def by_age(memories: Iterable[Memory], at: datetime | None = None) -> dict[str, int]:
    now = (at or datetime.now(UTC)).astimezone(UTC)
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    bounds = ((today, "today"), (today - timedelta(days=6), "this week"),
              (today - timedelta(days=29), "this month"))
    out = dict.fromkeys(AGE_BUCKETS, 0)
    for memory in memories:
        created = memory.created.astimezone(UTC)
        out[next((label for start, label in bounds if created >= start), "older")] += 1
    return out
