"""The history of consolidation plans: ``$MEMDIR_HOME/history.jsonl``, and per plan the
journal of its before-images (:mod:`memdir.core.journal`) in ``history/<plan-id>/``.

Records, one JSON object per line:
- ``{"begin": id, "at", "by", "plan"}``: appended and fsynced once the plan's journal holds
  the before-images of the memories it changes, before any file changes;
- ``{"complete": id, "at"}``: the plan ran to its end;
- ``{"undo": id, "at"}``: the plan was reversed;
- ``{"at", "plan", "before", "created"}``: a plan applied before the journal existed (written
  at its end, with the before-images inline); still listed and undone, its id is its ``at``.

Invariants:
- The log is only appended, never rewritten, and each record starts on a line of its own,
  even after a torn last line left by a killed writer (which is skipped when read).
- A plan begun and never completed (killed, or failed half-way) is listed as
  ``interrupted`` and undone like any other, from its journal: files it created are removed
  (while they hold what it wrote), every other file it touched gets its bytes back.
- ``undo`` reverses the newest plan not undone yet, interrupted or not, never an older one
  behind it. It only writes before-images and removes files the plan created, then appends
  its record: killed half-way, running it again gives the same result.
- The journals of the newest ``KEEP_JOURNALS`` (20) plans are kept, older ones removed when a
  plan completes: undo goes back that far, and the home does not grow with every dream.
- Restoring never follows a symlink out of a memory directory (:func:`memdir.core.paths.safe_join`),
  nor into a directory that was moved or replaced since the plan.
- The history and the journals are data anyone with the home could have edited: undo writes
  only inside memdir's own directories (the home and the memory directories of the project
  it runs in), reads only a journal at ``history/<plan-id>/`` (an id of memdir's form, real
  folders), and every read or append goes through :mod:`memdir.core.safe_open` (bounded, never
  through a symlink, never waiting on a FIFO).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdir.core.model import format_time

if TYPE_CHECKING:
    from memdir.memdir import Memdir

__all__ = ["HISTORY_DIR", "HISTORY_FILE", "append_record", "history", "journalled",
           "undo_last"]

HISTORY_FILE = "history.jsonl"
HISTORY_DIR = "history"
KEEP_JOURNALS = 20  # plans whose before-images are kept: undo goes back this far
_PLAN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{8}\Z")
_ORPHAN_SECONDS = 3600.0  # a journal with no begin record yet may be another process's


def append_record(home: Path, record: dict[str, Any]) -> None:
    """Append one record to the history and fsync it; on a line of its own."""
    from memdir.core.safe_open import open_append

    home.mkdir(parents=True, exist_ok=True)
    fd = open_append(home / HISTORY_FILE, read=True)
    try:
        size = os.fstat(fd).st_size
        torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        data = (json.dumps(record) + "\n").encode("ascii")
        os.write(fd, b"\n" + data if torn else data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _plan_id(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y%m%dT%H%M%SZ}-{os.urandom(4).hex()}"


@contextlib.contextmanager
def journalled(md: Memdir, plan: dict[str, Any], first: Sequence[Path], at: datetime,
               by: str) -> Iterator[str]:
    """Apply a plan inside this block: its journal gets the before-images of ``first`` (the
    files it is known to change) and then of every file written in the block, each before
    the write; the begin record precedes any change, the complete record follows the last.
    An exception leaves the plan interrupted (undo puts it back)."""
    from memdir.core.journal import recording
    from memdir.core.safe_open import real_folder

    plan_id = _plan_id(at)
    roots = [d.path for d in md._dirs()]
    md.home.mkdir(parents=True, exist_ok=True)
    # A real history/ folder (UnsafeFileError if a symlink): journals are never written, nor
    # later read back by undo, anywhere but in the home.
    folder = real_folder(md.home, HISTORY_DIR, create=True) or md.home / HISTORY_DIR
    with recording(folder / plan_id, roots, first):
        append_record(md.home, {"begin": plan_id, "at": format_time(at), "by": by,
                                "plan": plan})
        yield plan_id
    append_record(md.home, {"complete": plan_id, "at": format_time(md._clock())})
    _prune(md.home)


def _prune(home: Path) -> None:
    """Drop the journals of all but the newest ``KEEP_JOURNALS`` plans (and journals an
    hour old that no plan began: a process killed before its begin record)."""
    listed = [r["id"] for r in history(home) if "before" not in r]
    keep = set(listed[-KEEP_JOURNALS:])
    known = set(listed)
    folder = home / HISTORY_DIR
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if not _PLAN_ID.match(name) or name in keep:
            continue
        path = folder / name
        with contextlib.suppress(OSError):
            if name in known or time.time() - os.lstat(path).st_mtime > _ORPHAN_SECONDS:
                shutil.rmtree(path)


def history(home_dir: Any) -> list[dict[str, Any]]:
    """The applied plans, oldest first: ``id``, ``at``, ``plan``, ``undone`` and
    ``interrupted`` (begun, never completed)."""
    from memdir.core.safe_open import HISTORY_LOG, read_file

    try:
        lines = read_file(Path(home_dir) / HISTORY_FILE, HISTORY_LOG).splitlines()
    except FileNotFoundError:
        return []
    records: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn line of a killed writer: the rest is still history
        if not isinstance(record, dict):
            continue
        if isinstance(record.get("begin"), str):
            entry = {"id": record["begin"], "at": record.get("at"), "by": record.get("by"),
                     "plan": record.get("plan") or {"operations": []}, "undone": False,
                     "interrupted": True}
        elif isinstance(record.get("complete"), str):
            if record["complete"] in by_id:
                by_id[record["complete"]]["interrupted"] = False
            continue
        elif record.get("undo") is not None:
            for earlier in records:
                if earlier["id"] == record["undo"]:
                    earlier["undone"] = True
            continue
        elif isinstance(record.get("plan"), dict) and isinstance(record.get("at"), str):
            entry = {**record, "id": record["at"], "undone": False, "interrupted": False}
        else:
            continue
        records.append(entry)
        by_id[entry["id"]] = entry
    return records


def undo_last(md: Memdir, at: datetime) -> dict[str, Any] | None:
    """Put back every file the newest plan not undone yet changed (an interrupted one too);
    None when there is nothing to undo."""
    pending = [r for r in history(md.home) if not r["undone"]]
    if not pending:
        return None
    record = pending[-1]
    if "before" in record:
        _undo_inline(md, record)
    else:
        folder = _journal_folder(md.home, record["id"])
        if folder is None:
            from memdir.core.errors import MemoryNotFoundError

            raise MemoryNotFoundError(
                f"the files of the plan of {record['at']} ({record['id']}) are no longer kept "
                f"(memdir keeps those of the last {KEEP_JOURNALS} plans), so it cannot be "
                "undone; nothing was changed",
                "restore the memory directory from version control or a backup if you need "
                "the state before that plan")
        record = {**record, "kept": _undo_journal(folder, _own_dirs(md))}
    md.reconcile()
    append_record(md.home, {"undo": record["id"], "at": format_time(at)})
    return record


def _undo_inline(md: Memdir, record: dict[str, Any]) -> None:
    """A plan recorded before the journal existed: its before-images are in the record."""
    from memdir.core.errors import MemdirError
    from memdir.core.files import atomic_write

    own = _own_dirs(md)
    before = record["before"] if isinstance(record["before"], list) else []
    # Every target is checked before anything is written: a hand-edited record that names a
    # file outside memdir's directories undoes nothing at all.
    targets = [(_inside_own(own, entry.get("file")), entry.get("text"))
               for entry in before if isinstance(entry, dict)]
    for ref in record.get("created", []):  # gathered from logs: archived, not deleted
        with contextlib.suppress(MemdirError):
            md.archive(ref)
    for target, text in targets:  # the exact bytes each file had before the plan
        if isinstance(text, str):
            atomic_write(target, text)


def _own_dirs(md: Memdir) -> list[str]:
    """The directories undo may write in: the home and the project's memory directories."""
    return [os.path.abspath(p) for p in (md.home, *(d.path for d in md._dirs()))]


def _inside_own(own: list[str], name: object) -> Path:
    """``name`` (an absolute path from the history) if it lies inside one of ``own``, checked
    by :func:`memdir.core.paths.safe_join` (no '..', no symlink out); PathTraversalError if not."""
    from memdir.core.errors import PathTraversalError
    from memdir.core.paths import safe_join

    if isinstance(name, str) and "\0" not in name:
        path = os.path.normpath(os.path.abspath(name))
        for base in own:
            if path.startswith(base + os.sep):
                return safe_join(Path(base), os.path.relpath(path, base))
    raise PathTraversalError(
        f"{HISTORY_FILE} names {name!r}, outside memdir's directories, as a file to put back; "
        "undo writes only inside the memdir home and the project's memory directories, so "
        "nothing was changed",
        f"remove that line from {HISTORY_FILE} (someone edited it), or run undo from the "
        "project the plan was applied in")


def _journal_folder(home: Path, plan_id: str) -> Path | None:
    """``history/<plan_id>`` if it is there; never a folder an edited id leads elsewhere."""
    from memdir.core.errors import PathTraversalError
    from memdir.core.safe_open import real_folder

    if not _PLAN_ID.match(plan_id):
        raise PathTraversalError(
            f"{HISTORY_FILE} names the plan {plan_id!r}, which is not an id memdir writes, so "
            "its journal is not read and nothing was changed",
            f"remove that line from {home / HISTORY_FILE} (someone edited it)")
    return real_folder(home, HISTORY_DIR, plan_id)


def _undo_journal(folder: Path, own: list[str]) -> list[str]:
    """Restore every journalled file; the files left as they are (with why), if any."""
    from memdir.core.errors import MemdirError, warn
    from memdir.core.journal import pause, pause_after, read_journal

    kept: list[str] = []
    limit, restored = pause_after(), 0
    for entry in reversed(read_journal(folder)):
        try:
            why = _restore(entry, own)
        except (MemdirError, OSError, ValueError) as exc:
            why = getattr(exc, "message", None) or str(exc)
        if why is True:
            restored += 1
            if restored == limit:
                pause(restored)  # test-only (MEMDIR_TEST_PAUSE_AFTER): killed here by tests
        elif why:
            kept.append(f"{entry['dir']}/{entry['file']}: {why}")
            warn("memdir: undo left %s/%s as it is: %s", entry["dir"], entry["file"], why)
    return kept


def _restore(entry: dict[str, Any], own: list[str]) -> bool | str:
    """One file back as the journal saw it before the plan: True if that changed it, False
    if it already was, else why it was left as it is."""
    import base64

    from memdir.core.files import atomic_write
    from memdir.core.paths import safe_join

    where = os.path.normpath(os.path.abspath(entry["dir"]))
    if not any(where == base or where.startswith(base + os.sep) for base in own):
        return ("its directory is not one of memdir's memory directories here (undo "
                "writes only inside the memdir home and this project's memory directories)")
    base = Path(entry["dir"])
    if os.path.realpath(base) != entry.get("real"):
        return "its directory was moved or replaced by a symlink since the plan"
    target = safe_join(base, entry["file"])
    if entry.get("absent"):  # the plan created it: removed while it holds what the plan wrote
        if not os.path.lexists(target):
            return False
        now = _read(target)
        if now is None or hashlib.sha256(now).hexdigest() not in entry.get("made", []):
            return "created by the plan but changed since, so it is kept"
        os.unlink(target)
        return True
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(entry.get("link"), str):
        if os.path.islink(target) and os.readlink(target) == entry["link"]:
            return False
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        os.symlink(entry["link"], tmp)
        os.replace(tmp, target)
        return True
    data = (entry["text"].encode("utf-8") if isinstance(entry.get("text"), str)
            else base64.b64decode(entry["b64"]))
    if _read(target) == data and not os.path.islink(target):
        return False  # already as it was (a re-run undo, or a file the kill spared)
    atomic_write(target, data)
    return True


def _read(path: Path) -> bytes | None:
    """A regular file's bytes (bounded, not through a symlink); None for anything else."""
    from memdir.core.errors import UnsafeFileError
    from memdir.core.journal import MAX_IMAGE
    from memdir.core.safe_open import read_head

    try:
        return read_head(path, MAX_IMAGE + 1)[0]
    except (OSError, UnsafeFileError):
        return None
