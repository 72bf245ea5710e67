"""Listing as the :class:`~memdir.memdir.Memdir` facade offers it (``list``, ``recent``) and
the type filter every listing and search takes: functions taking the facade first, bound as
its methods. A type filter accepts the names and aliases of every taxonomy in play; a name no
taxonomy knows raises, listing the valid ones.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memdir.core.arguments import checked_limit, scrub_all
from memdir.core.model import Memory, Scope
from memdir.retrieval.search import list_memories

if TYPE_CHECKING:
    from memdir.core.store import MemoryDir
    from memdir.memdir import Memdir

__all__ = ["list_", "recent", "types_of"]


def types_of(md: Memdir, types: Sequence[str] | None,
             dirs: Sequence[MemoryDir]) -> builtins.list[str]:
    """The type names ``types`` (names or aliases) stand for in ``dirs``' taxonomies."""
    if not types:
        return []
    out: builtins.list[str] = []
    for given in types:
        names = {spec.name for d in dirs if (spec := d.taxonomy.lookup(given))}
        if not names:
            md.directory("project").taxonomy.resolve(given)  # raises, listing the types
        out.extend(sorted(names))
    return out

def list_(md: Memdir, *, types: Sequence[str] | None = None, scopes: Sequence[Scope] | None = None,
         tags: Sequence[str] | None = None, status: str = "active",
         paths: Sequence[str] | None = None, limit: int | None = None,
         order: str = "relevance") -> builtins.list[Memory]:
    """Memories matching the filters; ``status`` is active, archived or all."""
    if limit is not None:
        limit = checked_limit(limit)
    tags = scrub_all(tags)
    md._sync()
    dirs = md._dirs(scopes)
    return list_memories(md.index, dirs, types=types_of(md, types, dirs), tags=tags,
                         status=status, paths=paths, limit=limit, order=order)

def recent(md: Memdir, n: int = 10, **filters: Any) -> builtins.list[Memory]:
    return md.list(limit=n, order="recent", **filters)
