"""Export and import: a folder of Markdown files, or JSON Lines, in and out of any store.

The stores are a home (:class:`memdir.Memdir`: files written through :mod:`memdir.store`)
or any store that can write memories as they are (:class:`BulkStore`, e.g.
:class:`memdir.postgres.PostgresStore`), so memories move between them both ways.

Invariants:
- Export then import is lossless: ids, timestamps, reinforcements, status, tags, paths,
  relevance, source and unknown frontmatter keys all survive.
- Import never trusts its input: every item goes through the same validation as ``store``
  (type, relevance, secrets refused, ``<private>`` stripped); file names in the source are
  never used to build destination paths. A bad item is reported with where it came from and
  why, and the rest are imported.
- Importing the same export twice adds nothing: items whose id or exact content is already in
  the target directory (or store) are skipped.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from memdir import placing
from memdir import store as st
from memdir.draft import draft
from memdir.errors import InvalidMemoryError, MemdirError
from memdir.files import INDEX_FILE, atomic_write, slugify
from memdir.markdown import parse, render
from memdir.model import SCOPES, Memory, Scope, parse_time
from memdir.taxonomy import Taxonomy

if TYPE_CHECKING:
    from memdir.memdir import Memdir
    from memdir.memory_store import MemoryStore

__all__ = ["BulkStore", "ImportReport", "export_memories", "import_memories"]


class BulkStore(Protocol):
    """A store that imports by writing validated memories as they are (ids, timestamps)."""

    taxonomy: Taxonomy
    clock: Callable[[], datetime]

    def put(self, memories: Iterable[Memory]) -> tuple[list[Memory], list[tuple[Memory, str]]]:
        """Write what is new; return (written, skipped with why), skipped as given."""
        ...


@dataclass
class ImportReport:
    imported: list[Memory] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (where, why)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (where, message)

    def to_dict(self) -> dict[str, Any]:
        return {
            "imported": len(self.imported),
            "skipped": [{"where": w, "why": y} for w, y in self.skipped],
            "errors": [{"where": w, "error": e} for w, e in self.errors],
        }


def export_memories(store: MemoryStore, dest: str | Path, *, fmt: str = "markdown",
                    scopes: Sequence[Scope] | None = None) -> int:
    """Write every memory (active and archived) of the scopes to ``dest``. Returns the count."""
    memories = sorted(store.list(scopes=scopes, status="all"), key=lambda m: (m.name, m.file))
    if fmt == "jsonl":
        if str(dest) == "-":
            _write_jsonl(sys.stdout, memories)
        else:
            with open(dest, "w", encoding="utf-8") as fh:
                _write_jsonl(fh, memories)
        return len(memories)
    if fmt != "markdown":
        raise InvalidMemoryError(f"unknown export format {fmt!r}", "use markdown or jsonl")
    root = Path(dest)
    used: set[Path] = set()
    for memory in memories:
        folder = root / memory.scope
        folder.mkdir(parents=True, exist_ok=True)
        try:  # the file itself, byte for byte: YAML types in unknown keys survive
            text = memory.path.read_text(encoding="utf-8") if memory.path else render(memory)
        except OSError:
            text = render(memory)
        target = folder / (memory.file or _free_name(folder, memory, used))
        used.add(target)
        atomic_write(target, text, fsync=False)
    return len(memories)


def _free_name(folder: Path, memory: Memory, used: set[Path]) -> str:
    """A file name for a memory that has none (a database's): ``<type>_<slug>[-n].md``."""
    base = f"{slugify(memory.type)}_{slugify(memory.name)}"
    name, n = f"{base}.md", 1
    while folder / name in used:
        n += 1
        name = f"{base}-{n}.md"
    return name


def _write_jsonl(fh: TextIO, memories: Sequence[Memory]) -> None:
    for memory in memories:
        data = memory.to_dict()
        for key in ("file", "access_count", "last_accessed"):
            data.pop(key)
        fh.write(json.dumps(data, ensure_ascii=False) + "\n")


def _from_folder(src: Path) -> Iterator[tuple[str, dict[str, Any] | Exception]]:
    for path in sorted(src.rglob("*.md")):
        if path.name == INDEX_FILE or path.name.startswith(".") or not path.is_file():
            continue
        rel = path.relative_to(src)
        hinted = rel.parts[0] if len(rel.parts) > 1 and rel.parts[0] in SCOPES else None
        try:
            memory = parse(path.read_text(encoding="utf-8"), stem=path.stem)
        except (MemdirError, OSError, UnicodeDecodeError) as exc:
            yield str(path), exc
            continue
        item = memory.to_dict()
        item["scope"] = hinted or _file_scope(path)
        yield str(path), item


def _file_scope(path: Path) -> str:
    try:
        head = path.read_text(encoding="utf-8").split("\n---", 1)[0]
    except OSError:
        return "project"
    for line in head.splitlines():
        if line.startswith("scope:"):
            value = line.split(":", 1)[1].strip()
            return value if value in SCOPES else "project"
    return "project"


def _from_jsonl(fh: TextIO, name: str) -> Iterator[tuple[str, dict[str, Any] | Exception]]:
    for n, line in enumerate(fh, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            yield f"{name}:{n}", exc
            continue
        if not isinstance(item, dict):
            yield f"{name}:{n}", InvalidMemoryError("each line must be a JSON object")
            continue
        yield f"{name}:{n}", item


def _memory_from_item(taxonomy: Taxonomy, clock: Callable[[], datetime],
                      item: dict[str, Any], scope: Scope) -> Memory:
    created = parse_time(item.get("created")) or clock()
    updated = parse_time(item.get("updated")) or created
    meta = item.get("meta") or {}
    if not isinstance(meta, dict):
        raise InvalidMemoryError("'meta' must be an object")
    content = item.get("content", item.get("body"))
    if not isinstance(content, str):
        raise InvalidMemoryError("each memory needs a 'content' string")
    memory = draft(
        content, type=str(item.get("type", "")), scope=scope,
        taxonomy=taxonomy, now=created, anchor=None,
        name=item.get("name"), description=item.get("description"),
        tags=item.get("tags") or (), paths=item.get("paths") or (),
        relevance=item.get("relevance"), meta=meta, source=str(item.get("source") or "imported"))
    reinforced = item.get("reinforced", 0)
    status = item.get("status", "active")
    if status not in ("active", "archived"):
        raise InvalidMemoryError(f"unknown status {status!r}")
    return memory.replace(
        id=str(item.get("id") or ""), updated=updated, status=status,
        reinforced=reinforced if isinstance(reinforced, int) and not isinstance(reinforced, bool)
        and reinforced >= 0 else 0,
        superseded_by=item.get("superseded_by") or None)


def _read(src: str | Path) -> list[tuple[str, dict[str, Any] | Exception]]:
    source = Path(src)
    if str(src) == "-":
        return list(_from_jsonl(sys.stdin, "stdin"))
    if source.is_dir():
        return list(_from_folder(source))
    if source.is_file():
        with open(source, encoding="utf-8") as fh:
            return list(_from_jsonl(fh, source.name))
    raise InvalidMemoryError(f"nothing to import at {src}",
                             "give a folder of .md files or a .jsonl file")


def import_memories(store: Memdir | BulkStore, src: str | Path, *,
                    scope: Scope | None = None) -> ImportReport:
    """Import a folder of memory files (recursively) or a JSON Lines file ('-': stdin)."""
    from memdir.memdir import Memdir

    report = ImportReport()
    items = _read(src)
    home, bulk = (store, None) if isinstance(store, Memdir) else (None, store)
    if home is not None:
        home.reconcile()
    pending: list[tuple[str, Memory]] = []
    seen: set[tuple[str, str]] = set()
    for where, item in items:
        if isinstance(item, Exception):
            report.errors.append((where, getattr(item, "message", str(item))))
            continue
        given = item.get("scope")
        target: Scope = scope or (given if given in SCOPES else "project")
        try:
            if bulk is not None:
                memory = _memory_from_item(bulk.taxonomy, bulk.clock, item, target)
            else:
                assert home is not None
                memory = _memory_from_item(home.directory(target).taxonomy, home._clock, item,
                                           target)
        except MemdirError as exc:
            report.errors.append((where, f"{exc.message} ({exc.hint})"))
            continue
        except (TypeError, ValueError) as exc:  # a shape no validator foresaw: report, go on
            report.errors.append((where, f"invalid item: {exc}"))
            continue
        digest = st.norm_hash(memory.body)
        why = _known(home, memory, digest) if home is not None else None
        if why is None and (target, digest) in seen:
            why = "same content already stored"
        if why is not None:
            report.skipped.append((where, why))
            continue
        seen.add((target, digest))
        pending.append((where, memory))
    if bulk is not None:
        wheres = {id(memory): where for where, memory in pending}
        written, skipped = bulk.put([memory for _, memory in pending])
        report.imported.extend(written)
        report.skipped.extend((wheres.get(id(memory), memory.id), why)
                              for memory, why in skipped)
    elif home is not None:
        batches: dict[Scope, list[Memory]] = {}
        for _, memory in pending:
            batches.setdefault(memory.scope, []).append(memory)
        for target, memories in batches.items():
            report.imported.extend(placing.write_new(home.index, home.directory(target), memories))
    return report


def _known(md: Memdir, memory: Memory, digest: str) -> str | None:
    """Why a home already has this memory (its id or its content in the scope), or None."""
    key, conn = md.directory(memory.scope).key, md.index.conn
    if memory.id and conn.execute("SELECT 1 FROM memories WHERE dir = ? AND id = ?",
                                  (key, memory.id)).fetchone():
        return f"id {memory.id} already exists"
    if conn.execute("SELECT 1 FROM memories WHERE dir = ? AND norm_hash = ?",
                    (key, digest)).fetchone():
        return "same content already stored"
    return None
