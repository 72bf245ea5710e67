"""Export and import: a folder of Markdown files, or JSON Lines, in and out of a home.

Invariants:
- Export then import is lossless: ids, timestamps, reinforcements, status, tags, paths,
  relevance, source and unknown frontmatter keys all survive.
- Import never trusts its input: every item goes through the same validation as ``store``
  (type, relevance, secrets refused, ``<private>`` stripped); file names in the source are
  never used to build destination paths. A bad item is reported with where it came from and
  why, and the rest are imported.
- Importing the same export twice adds nothing: items whose id or exact content is already in
  the target directory are skipped.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from memdir import store as st
from memdir.draft import draft
from memdir.errors import InvalidMemoryError, MemdirError
from memdir.files import INDEX_FILE, atomic_write
from memdir.markdown import parse, render
from memdir.model import SCOPES, Memory, Scope, parse_time

if TYPE_CHECKING:
    from memdir.memdir import Memdir

__all__ = ["ImportReport", "export_memories", "import_memories"]


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


def export_memories(md: Memdir, dest: str | Path, *, fmt: str = "markdown",
                    scopes: Sequence[Scope] | None = None) -> int:
    """Write every memory (active and archived) of the scopes to ``dest``. Returns the count."""
    memories = md.list(scopes=scopes, status="all", order="name")
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
    for memory in memories:
        folder = root / memory.scope
        folder.mkdir(parents=True, exist_ok=True)
        try:  # the file itself, byte for byte: YAML types in unknown keys survive
            text = memory.path.read_text(encoding="utf-8") if memory.path else render(memory)
        except OSError:
            text = render(memory)
        atomic_write(folder / memory.file, text, fsync=False)
    return len(memories)


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


def _memory_from_item(md: Memdir, item: dict[str, Any], scope: Scope) -> Memory:
    created = parse_time(item.get("created")) or md._clock()
    updated = parse_time(item.get("updated")) or created
    meta = item.get("meta") or {}
    if not isinstance(meta, dict):
        raise InvalidMemoryError("'meta' must be an object")
    content = item.get("content", item.get("body"))
    if not isinstance(content, str):
        raise InvalidMemoryError("each memory needs a 'content' string")
    memory = draft(
        content, type=str(item.get("type", "")), scope=scope,
        taxonomy=md.directory(scope).taxonomy, now=created, anchor=None,
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


def import_memories(md: Memdir, src: str | Path, *, scope: Scope | None = None) -> ImportReport:
    """Import a folder of memory files (recursively) or a JSON Lines file ('-': stdin)."""
    report = ImportReport()
    source = Path(src)
    if str(src) == "-":
        items = list(_from_jsonl(sys.stdin, "stdin"))
    elif source.is_dir():
        items = list(_from_folder(source))
    elif source.is_file():
        with open(source, encoding="utf-8") as fh:
            items = list(_from_jsonl(fh, source.name))
    else:
        raise InvalidMemoryError(f"nothing to import at {src}",
                                 "give a folder of .md files or a .jsonl file")
    md.reconcile()
    batches: dict[Scope, list[Memory]] = {}
    seen: set[tuple[str, str]] = set()
    for where, item in items:
        if isinstance(item, Exception):
            report.errors.append((where, getattr(item, "message", str(item))))
            continue
        given = item.get("scope")
        target: Scope = scope or (given if given in SCOPES else "project")
        try:
            memory = _memory_from_item(md, item, target)
        except MemdirError as exc:
            report.errors.append((where, f"{exc.message} ({exc.hint})"))
            continue
        except (TypeError, ValueError) as exc:  # a shape no validator foresaw: report, go on
            report.errors.append((where, f"invalid item: {exc}"))
            continue
        mdir = md.directory(target)
        digest = st.norm_hash(memory.body)
        conn = md.index.conn
        if memory.id and conn.execute("SELECT 1 FROM memories WHERE dir = ? AND id = ?",
                                      (mdir.key, memory.id)).fetchone():
            report.skipped.append((where, f"id {memory.id} already exists"))
            continue
        if (target, digest) in seen or conn.execute(
                "SELECT 1 FROM memories WHERE dir = ? AND norm_hash = ?",
                (mdir.key, digest)).fetchone():
            report.skipped.append((where, "same content already stored"))
            continue
        seen.add((target, digest))
        batches.setdefault(target, []).append(memory)
    for target, memories in batches.items():
        report.imported.extend(st.write_new(md.index, md.directory(target), memories))
    return report
