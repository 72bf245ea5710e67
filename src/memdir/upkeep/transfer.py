"""Export and import: a folder of Markdown files, or JSON Lines, in and out of any store.

The stores are a home (:class:`memdir.Memdir`: files written through :mod:`memdir.core.store`)
or any store that can write memories as they are (:class:`BulkStore`, e.g.
:class:`memdir.team.postgres.PostgresStore`), so memories move between them both ways.

Invariants:
- Export then import is lossless: ids, timestamps, reinforcements, status, tags, paths,
  relevance, source and unknown frontmatter keys all survive (a Markdown export keeps their
  YAML types too: dates stay dates, integer keys stay integers; JSON Lines has no dates).
- Import never trusts its input: every item goes through the same validation as ``store``
  (type, relevance, secrets refused, ``<private>`` stripped), and every field is checked
  before anything is written (a value of the wrong type or out of range, a date that does
  not fit in UTC, text that is not UTF-8: :mod:`memdir.upkeep.transfer_items`), so no item can
  fail only at write time; file names in the source are never used to build destination
  paths. A bad item is reported with where it came from (file, or file and line), why and
  how to fix it, and the rest are imported. The report always says exactly what was
  written, even when the write of one scope fails after another scope's was committed.
- Importing the same export twice adds nothing: items whose id or exact content is already in
  the target directory (or store) are skipped.
- A Markdown export goes into a new or empty folder, or one that holds only the files this
  export writes (the same export again): a folder with other files (an older export's, whose
  memories were deleted since) is refused, since importing it would bring them back.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO, runtime_checkable

from memdir.core import placing
from memdir.core import store as st
from memdir.core.errors import InvalidMemoryError, MemdirError, UnsafeFileError
from memdir.core.files import atomic_write, slugify
from memdir.core.markdown import render
from memdir.core.model import SCOPES, Memory, Scope
from memdir.core.safe_open import MEMORY_FILE, read_text
from memdir.core.taxonomy import Taxonomy
from memdir.upkeep.transfer_items import read_items, validate

if TYPE_CHECKING:
    from memdir.core.memory_store import MemoryStore
    from memdir.memdir import Memdir

__all__ = ["BulkStore", "ImportReport", "export_memories", "import_memories"]


@runtime_checkable
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


# -- export ----------------------------------------------------------------------------------


def export_memories(store: MemoryStore, dest: str | Path, *, fmt: str = "markdown",
                    scopes: Sequence[Scope] | None = None) -> int:
    """Write every memory (active and archived) of the scopes to ``dest``. Returns the count.

    Markdown: ``dest`` is a folder, new, empty, or holding only files this export writes
    (anything else is refused: see the module's invariants). JSON Lines: ``dest`` is a file
    (replaced if it exists) in an existing folder, or '-' for stdout."""
    if fmt not in ("markdown", "jsonl"):
        raise InvalidMemoryError(f"unknown export format {fmt!r}", "use markdown or jsonl")
    if fmt == "markdown" and str(dest) == "-":
        raise InvalidMemoryError("a Markdown export needs a folder, not '-' (stdout)",
                                 "give a folder, or use --format jsonl to write to stdout")
    memories = sorted(store.list(scopes=scopes, status="all"), key=lambda m: (m.name, m.file))
    if fmt == "jsonl":
        if str(dest) == "-":
            _write_jsonl(sys.stdout, memories)
            return len(memories)
        path = Path(dest)
        _check_jsonl_dest(path)
        try:
            with open(path, "w", encoding="utf-8") as fh:
                _write_jsonl(fh, memories)
        except OSError as exc:
            raise _cannot_write(path, exc) from None
        return len(memories)
    root = Path(dest)
    plan = _export_plan(root, memories)
    _check_export_folder(root, plan)
    try:
        root.mkdir(parents=True, exist_ok=True)  # an empty export is an empty folder
        for target, memory in plan.items():
            target.parent.mkdir(exist_ok=True)
            atomic_write(target, _file_text(memory), fsync=False)
    except OSError as exc:
        raise _cannot_write(root, exc) from None
    return len(memories)


def _file_text(memory: Memory) -> str:
    """The file itself, byte for byte (YAML types in unknown keys survive), or rendered."""
    try:  # never through a symlink, never more than a memory file's cap
        return read_text(memory.path, MEMORY_FILE) if memory.path else render(memory)
    except (OSError, UnicodeDecodeError, UnsafeFileError):
        return render(memory)


def _export_plan(root: Path, memories: Sequence[Memory]) -> dict[Path, Memory]:
    """Where each memory goes: ``<scope>/<its file name>``, or a free name for a memory
    that has no file (a database's), chosen after every real name is taken."""
    plan = {root / m.scope / m.file: m for m in memories if m.file}
    for memory in memories:
        if not memory.file:
            folder = root / memory.scope
            plan[folder / _free_name(folder, memory, plan)] = memory
    return plan


def _free_name(folder: Path, memory: Memory, used: Mapping[Path, Memory]) -> str:
    """A file name for a memory that has none (a database's): ``<type>_<slug>[-n].md``."""
    base = f"{slugify(memory.type)}_{slugify(memory.name)}"
    name, n = f"{base}.md", 1
    while folder / name in used:
        n += 1
        name = f"{base}-{n}.md"
    return name


def _check_export_folder(root: Path, plan: Mapping[Path, Memory]) -> None:
    """Refuse a destination that is not a folder, or a folder holding files this export
    would not write: they would come back with the next import of the folder."""
    fix = ("export into a new or empty folder (or delete the old export first): files left "
           "in it would come back with the next import of the folder")
    if root.exists() and not root.is_dir():
        raise InvalidMemoryError(
            f"{root} is a file, not a folder: a Markdown export is a folder of files",
            "give a new or empty folder, or a .jsonl file name (or --format jsonl) to write "
            "JSON Lines")
    if not root.is_dir():
        return
    others: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        links = [d for d in dirnames if (here / d).is_symlink()]  # not walked: not ours
        others.extend(str((here / name).relative_to(root)) for name in (*filenames, *links)
                      if here / name not in plan)
        if len(others) > 3:
            break
    if others:
        shown = ", ".join(sorted(others)[:3]) + (", ..." if len(others) > 3 else "")
        raise InvalidMemoryError(
            f"{root} already holds files this export would not write ({shown})", fix)


def _check_jsonl_dest(path: Path) -> None:
    if path.is_dir():
        raise InvalidMemoryError(
            f"{path} is a folder: a JSON Lines export is one file",
            "give a file name (e.g. memories.jsonl), or --format markdown to export a folder "
            "of Markdown files")
    if not path.parent.is_dir():
        raise InvalidMemoryError(f"cannot write {path}: the folder {path.parent} does not exist",
                                 "create the folder first, or give a path in an existing one")


def _cannot_write(path: Path, exc: OSError) -> InvalidMemoryError:
    return InvalidMemoryError(
        f"cannot write the export to {path}: {exc.strerror or exc}"
        + (f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""),
        "check that the destination's folder exists and that you may write there")


def _write_jsonl(fh: TextIO, memories: Sequence[Memory]) -> None:
    for memory in memories:
        data = memory.to_dict()
        for key in ("file", "access_count", "last_accessed", "used_count", "last_used"):
            data.pop(key)
        fh.write(json.dumps(data, ensure_ascii=False) + "\n")


# -- import ----------------------------------------------------------------------------------


def import_memories(store: Memdir | BulkStore, src: str | Path, *,
                    scope: Scope | None = None) -> ImportReport:
    """Import a folder of memory files (recursively), one memory file, or a JSON Lines file
    ('-': stdin). Every item is validated in full before anything is written; a bad item is
    reported (where, why, how to fix it) and the rest are imported."""
    report = ImportReport()
    items = read_items(src)
    home: Memdir | None = None
    bulk: BulkStore | None = None
    if isinstance(store, BulkStore):  # a Memdir has no put(): it stores through its own
        bulk = store                  # write path
    else:
        home = store
    if home is not None:
        home.reconcile()
    pending: list[tuple[str, Memory]] = []
    seen: set[tuple[str, str]] = set()
    for where, item in items:
        if isinstance(item, MemdirError):
            report.errors.append((where, _reason(item)))
            continue
        given = item.scope if isinstance(item, Memory) else item.get("scope")
        target: Scope = scope or (given if given in SCOPES else "project")
        if bulk is not None:
            taxonomy, clock = bulk.taxonomy, bulk.clock
        else:
            assert home is not None
            taxonomy, clock = home.directory(target).taxonomy, home._clock
        try:
            memory = validate(item, taxonomy=taxonomy, clock=clock, scope=target,
                              bulk=bulk is not None)
        except MemdirError as exc:
            report.errors.append((where, _reason(exc)))
            continue
        except (TypeError, ValueError, ArithmeticError, RecursionError) as exc:
            # a shape no validator foresaw: report, go on
            report.errors.append((where, f"invalid item: {exc.__class__.__name__}: {exc} "
                                         "(compare the item with what memdir export writes)"))
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
        _put(bulk, pending, report)
    elif home is not None:
        batches: dict[Scope, list[tuple[str, Memory]]] = {}
        for where, memory in pending:
            batches.setdefault(memory.scope, []).append((where, memory))
        for target, batch in batches.items():
            try:  # one transaction per scope: all of it is written, or none of it
                written = placing.write_new(home.index, home.directory(target),
                                            [memory for _, memory in batch])
            except Exception as exc:  # whatever it was, the report must say what was written
                _not_written(report, batch, exc, f"the write of the {target} scope")
                continue
            report.imported.extend(written)
    return report


def _reason(exc: MemdirError) -> str:
    return f"{exc.message} ({exc.hint})"


def _put(bulk: BulkStore, pending: Sequence[tuple[str, Memory]], report: ImportReport) -> None:
    wheres = {id(memory): where for where, memory in pending}
    try:  # one transaction: all of it is written, or none of it
        written, skipped = bulk.put([memory for _, memory in pending])
    except Exception as exc:  # whatever it was, the report must say what was written
        _not_written(report, pending, exc, "the write")
        return
    report.imported.extend(written)
    report.skipped.extend((wheres.get(id(memory), memory.id), why) for memory, why in skipped)


def _not_written(report: ImportReport, batch: Sequence[tuple[str, Memory]],
                 exc: Exception, what: str) -> None:
    """A write that failed as a whole (its transaction rolled back): each of its items is
    reported, so that the report still says exactly what was imported."""
    if isinstance(exc, MemdirError):
        reason = _reason(exc)
    elif isinstance(exc, OSError) and exc.strerror:
        reason = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    else:
        reason = f"{exc.__class__.__name__}: {exc}"
    for where, _ in batch:
        report.errors.append((where, f"not imported, {what} failed: {reason} "
                                     "(fix the cause and import again: what was imported "
                                     "is skipped)"))


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
