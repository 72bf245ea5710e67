"""Episodes and procedures (seed 002): events with their outcome, and named workflows whose
successes and failures are counted over time.

Both are ordinary memory files of the taxonomy's episodic / procedural type, so people can
read and edit them; what makes them special lives in frontmatter keys:
- an episode: ``outcome`` (free text such as success / failure / partial) and ``event_at``;
- a procedure: ``success_count``, ``failure_count`` and ``last_run``. Layer C of the context
  ranks procedures with ``success_count`` > 0 first.

Invariants:
- A procedure is identified by its name within a scope: saving one with an existing name
  replaces its steps and keeps its counts (a workflow improves; it does not multiply).
- Presets without such a type fall back to the closest one they have (listed below), so every
  preset can record both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from memdir.core.errors import InvalidMemoryError, MemoryNotFoundError
from memdir.core.model import Memory, Scope, format_time
from memdir.core.taxonomy import Taxonomy

if TYPE_CHECKING:
    from memdir.memdir import Memdir

__all__ = ["episode_type", "procedure_body", "procedure_type", "record_episode",
           "record_run", "save_procedure"]

_EPISODE_FALLBACK = ("episode", "incidents", "summary", "project", "fact", "decision")
_PROCEDURE_FALLBACK = ("procedure", "workflow", "procedures", "reference", "pattern", "fact")


def _first(taxonomy: Taxonomy, layer: str, fallback: Sequence[str]) -> str:
    for spec in taxonomy.types:
        if spec.layer == layer and (layer != "episodic" or spec.name != "summary"):
            return spec.name
    for name in fallback:
        found = taxonomy.lookup(name)
        if found is not None:
            return found.name
    return taxonomy.types[0].name


def episode_type(taxonomy: Taxonomy) -> str:
    return _first(taxonomy, "episodic", _EPISODE_FALLBACK)


def procedure_type(taxonomy: Taxonomy) -> str:
    return _first(taxonomy, "procedural", _PROCEDURE_FALLBACK)


def record_episode(md: Memdir, event: str, *, outcome: str | None, tags: Iterable[str],
                   scope: Scope, at: datetime) -> Memory:
    if not isinstance(event, str) or not event.strip():
        raise InvalidMemoryError("an episode needs the event", 'e.g. memdir episode '
                                 '"Migrated the orders table" --outcome success')
    body = event.strip()
    if outcome:
        body += f"\n\n**Outcome:** {outcome.strip()}"
    meta = {"outcome": outcome.strip() if outcome else "",
            "event_at": format_time(at)}
    kind = episode_type(md.directory(scope).taxonomy)
    return md.store(body, type=kind, scope=scope, tags=tags, meta=meta, source="manual")


def procedure_body(steps: Sequence[str]) -> str:
    return "\n".join(f"{n}. {' '.join(step.split())}" for n, step in enumerate(steps, 1))


def _find(md: Memdir, name: str, scope: Scope | None) -> Memory | None:
    wanted = " ".join(name.split()).lower()
    scopes: list[Scope] = [scope] if scope else ["project", "user", "team"]
    for where in scopes:
        kind = procedure_type(md.directory(where).taxonomy)
        for memory in md.list(types=[kind], scopes=[where], status="all"):
            if memory.name.lower() == wanted or str(memory.meta.get("procedure", "")).lower() \
                    == wanted:
                return memory
    return None


def save_procedure(md: Memdir, name: str, steps: Sequence[str], *, scope: Scope,
                   tags: Iterable[str], description: str | None) -> Memory:
    clean = [s for s in (" ".join(str(step).split()) for step in steps) if s]
    if not isinstance(name, str) or not name.strip():
        raise InvalidMemoryError("a procedure needs a name", 'e.g. memdir procedure "Release" '
                                 '--step "bump the version" --step "tag and push"')
    if not clean:
        raise InvalidMemoryError(f"procedure {name!r} has no steps",
                                 "give each step with --step (in order)")
    body = procedure_body(clean)
    existing = _find(md, name, scope)
    if existing is not None:
        return md.update(existing.id, content=body, tags=tuple(dict.fromkeys(
            (*existing.tags, *tags))), description=description, reinforce=True)
    kind = procedure_type(md.directory(scope).taxonomy)
    meta = {"procedure": " ".join(name.split()), "success_count": 0, "failure_count": 0}
    return md.store(body, type=kind, scope=scope, name=" ".join(name.split()),
                    description=description, tags=tags, meta=meta)


def record_run(md: Memdir, name_or_ref: str, *, success: bool, at: datetime) -> Memory:
    """Count one run of a procedure (by name, id or file name)."""
    found = _find(md, name_or_ref, None)
    if found is None:
        try:
            found = md.get(name_or_ref)
        except MemoryNotFoundError:
            raise MemoryNotFoundError(
                f"no procedure named {name_or_ref!r}",
                "save it first: memdir procedure NAME --step ... (see memdir list --type "
                "procedure)") from None
    key = "success_count" if success else "failure_count"
    count = found.meta.get(key, 0)
    count = count if isinstance(count, int) else 0
    return md.update(found.id, meta={key: count + 1, "last_run": format_time(at)},
                     reinforce=success)
