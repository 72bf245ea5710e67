"""One write path for memory directories: files first, then their index rows, under one lock.

Invariants:
- Every change to a memory directory happens inside an index write transaction
  (``BEGIN IMMEDIATE``), which serialises writers across processes: choose a free file
  name, write the file atomically, upsert its row, regenerate ``MEMORY.md``, commit. A process
  killed between the file write and the commit leaves a complete file that the next
  reconcile indexes; nothing is lost and nothing is half-written.
- Reconcile makes the index match the files: new, edited, renamed and deleted files made by
  other programs are picked up; a file that cannot be parsed (or that escapes its directory
  through a symlink, or is over the size cap of a memory file) is recorded in ``broken`` for
  ``memdir doctor`` and never modified. A symlink or a special file named like a memory is
  not even read (:mod:`memdir.core.safe_open`): the scan skips it and doctor reports it.
- Exact duplicates (same body after :func:`normalise`: case, whitespace, trailing sentence
  punctuation and surrounding quotes ignored; same directory) reinforce the existing memory
  instead of adding a file. ``norm_hash`` is stored in both indexes (SQLite, PostgreSQL) and
  in their vectors; a change to :func:`normalise` needs migrations recomputing it (SQLite
  index migration 21, PostgreSQL migration 5).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memdir.core import fingerprint as fp
from memdir.core.errors import (
    DuplicateNameError,
    MemdirError,
    MemoryFileError,
    MemoryNotFoundError,
    PathTraversalError,
)
from memdir.core.files import (
    FileState,
    atomic_write,
    scan_dir,
    slugify,
)
from memdir.core.index import Index, memory_to_row
from memdir.core.journal import before_write
from memdir.core.listing import index_deferred, regenerate_index, touching
from memdir.core.markdown import parse, render
from memdir.core.model import Memory, Scope, meta_strings
from memdir.core.paths import safe_join
from memdir.core.private import strip_private_memory
from memdir.core.safe_open import MEMORY_FILE, read_text
from memdir.core.taxonomy import Taxonomy

__all__ = ["MemoryDir", "file_name", "first_free", "index_deferred", "load_file", "modify",
           "name_base", "name_taken", "norm_hash", "normalise", "reconcile", "regenerate_index",
           "reindex", "remove", "write_file"]

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class MemoryDir:
    scope: Scope
    path: Path
    taxonomy: Taxonomy

    @property
    def key(self) -> str:
        return str(self.path)


# Sentence ends and quotes that do not change what a memory says when they wrap it whole.
_ENDS = ".!?;:\u2026"
_QUOTES = "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb\u201e\u201a"


def normalise(body: str) -> str:
    """The text exact duplicates are compared by: trailing sentence punctuation (runs of
    ``. ! ? ; : \u2026``) and quotes or backticks around the whole text dropped, then case
    and whitespace folded. Punctuation inside stays significant ("v1.2" is not "v12"); a
    text that is nothing but punctuation keeps it."""
    text, before = body.strip(), None
    while text != before:
        before = text
        text = text.rstrip(_ENDS).rstrip()
        if len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
            text = text[1:-1].strip()
    return " ".join((text or body).lower().split())


def norm_hash(body: str) -> str:
    import hashlib

    return hashlib.sha1(normalise(body).encode("utf-8")).hexdigest()


def name_base(memory: Memory) -> str:
    """``<type>_<slug>``: a memory's file name before ``.md`` and any ``-2``, ``-3``..."""
    return f"{memory.type}_{slugify(memory.name)}"


def first_free(base: str, taken: Callable[[str], bool]) -> str:
    """``<base>.md``, or the first ``-2``, ``-3``... of it that is not ``taken``."""
    name, n = f"{base}.md", 1
    while taken(name):
        n += 1
        name = f"{base}-{n}.md"
    return name


def file_name(conn: sqlite3.Connection, mdir: MemoryDir, memory: Memory,
              taken: set[str]) -> str:
    """A free file name in ``mdir``: not in ``taken``, the index, or on disk."""
    base = name_base(memory)
    # One indexed prefix query instead of one query per candidate. Slugs and type names hold
    # only [a-z0-9-], so the GLOB pattern needs no escaping.
    used = {r[0] for r in conn.execute(
        "SELECT file FROM memories WHERE dir = ? AND file GLOB ?", (mdir.key, base + "*.md"))}
    return first_free(base, lambda name: name in taken or name in used
                      or os.path.lexists(mdir.path / name))


def write_file(index: Index, conn: sqlite3.Connection, mdir: MemoryDir, memory: Memory,
                *, fsync: bool = True, exclusive: bool = False) -> Memory:
    """Write a memory's file and upsert its row. ``exclusive``: a new name, which must still
    be free (DuplicateNameError, nothing written, if another program took it meanwhile)."""
    assert memory.path is not None
    try:
        st = atomic_write(memory.path, render(memory), fsync=fsync, exclusive=exclusive)
    except FileExistsError:
        raise name_taken(memory.path) from None
    index.upsert(conn, memory_to_row(memory, mdir.key, norm_hash(memory.body),
                                     st.st_mtime_ns, st.st_size))
    return memory


def name_taken(path: Path) -> DuplicateNameError:
    """The error of an exclusive write whose new name another program took meanwhile."""
    return DuplicateNameError(
        f"another program created {path.name} while memdir was writing; nothing was written",
        "run the command again: memdir then picks another name")


def modify(index: Index, mdir: MemoryDir, path: Path, change: Callable[[Memory], Memory],
           *, rename: bool = False, memory_id: str | None = None) -> Memory:
    """Re-read a memory's file under the write lock, apply ``change``, write it back.

    The file on disk is the source of truth: a hand edit made since the last index read is
    kept. With ``rename`` the memory gets a fresh ``<type>_<slug>.md`` name (same id). With
    ``memory_id``, MemoryNotFoundError if the file no longer holds that memory (another
    program renamed it and put another file under its name): nothing is written.
    """
    with index.write() as conn:
        current = _load(mdir, FileState(path.name, 0, 0))
        if memory_id is not None and current.id != memory_id:
            raise _moved(path, memory_id)
        # memdir writes no <private> span: one written into the file by hand goes when memdir
        # rewrites the file (it was never indexed nor shown).
        updated = strip_private_memory(change(current))
        if rename:
            name = file_name(conn, mdir, updated, {path.name})
            updated = updated.replace(path=safe_join(mdir.path, name))
        touched = touching(conn, mdir, {current.type, updated.type, *_row_type(conn, mdir, path)})
        write_file(index, conn, mdir, updated, exclusive=updated.path != path)
        if updated.path != path:
            before_write(path)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            conn.execute("DELETE FROM memories WHERE dir = ? AND file = ?", (mdir.key, path.name))
        regenerate_index(conn, mdir, touched)
        fp.forget(conn, mdir.key)
    return updated


def _row_type(conn: sqlite3.Connection, mdir: MemoryDir, path: Path) -> list[str]:
    """The type the index holds for a file (a hand edit may have changed the file's)."""
    row = conn.execute("SELECT type FROM memories WHERE dir = ? AND file = ?",
                       (mdir.key, path.name)).fetchone()
    return [] if row is None else [str(row[0])]


def _moved(path: Path, memory_id: str) -> MemoryNotFoundError:
    return MemoryNotFoundError(
        f"{path.name} no longer holds memory {memory_id}: another program changed the "
        "directory since it was indexed", "run the command again: memdir looks it up afresh")


def remove(index: Index, mdir: MemoryDir, memory: Memory) -> None:
    """Delete a memory's file and rows. MemoryNotFoundError, deleting nothing, if its file now
    holds another memory or something unreadable (see :func:`modify`)."""
    assert memory.path is not None
    with index.write() as conn:
        try:
            on_disk: str | None = _load(mdir, FileState(memory.path.name, 0, 0)).id
        except FileNotFoundError:
            on_disk = memory.id  # already gone: the rows follow
        except (MemdirError, OSError):
            on_disk = None
        if on_disk != memory.id:
            raise _moved(memory.path, memory.id)
        touched = touching(conn, mdir, {memory.type, *_row_type(conn, mdir, memory.path)})
        before_write(memory.path)
        with contextlib.suppress(FileNotFoundError):
            memory.path.unlink()
        conn.execute("DELETE FROM memories WHERE dir = ? AND file = ?",
                     (mdir.key, memory.path.name))
        conn.execute("DELETE FROM usage WHERE dir = ? AND id = ?", (mdir.key, memory.id))
        regenerate_index(conn, mdir, touched)
        fp.forget(conn, mdir.key)


def _load(mdir: MemoryDir, state: FileState, real_base: str | None = None) -> Memory:
    """Parse one file of a directory, vetting its path; MemdirError when unusable."""
    path = safe_join(mdir.path, state.name, real_base=real_base)  # a symlink out fails here
    try:
        # Never through a symlink, never a FIFO or a device, never more than the cap.
        text = read_text(path, MEMORY_FILE)
    except UnicodeDecodeError:
        raise MemoryFileError("the file is not UTF-8 text") from None
    memory = parse(text, stem=path.stem, scope=mdir.scope)
    return memory.replace(type=mdir.taxonomy.resolve(memory.type), path=path)


def _refuse_secrets(memory: Memory) -> None:
    """A file written by hand (or pulled with a team's commits) that holds a secret is never
    indexed, so no context, recall or search can show it (or find it by a secret in its
    search context): it is listed by ``doctor``."""
    from memdir.core.safety import SECRET_IN_FILE, find_secrets  # off the start-up path

    # The file name and the id too: both are shown (recall headers, MEMORY.md, search).
    found = find_secrets([memory.name, memory.description, memory.body, *memory.tags,
                          *memory.paths, *meta_strings(memory.meta), memory.id, memory.file,
                          memory.source, memory.superseded_by or "", memory.context])
    if found:
        raise MemoryFileError(f"{SECRET_IN_FILE}: {', '.join(found)}",
                              "remove the secret from the file (keep credentials in a secret "
                              "manager); memdir indexes the file again once it is clean")


def load_file(mdir: MemoryDir, name: str) -> Memory:
    """A memory file of the directory as it is on disk now (path vetted, type resolved);
    MemdirError or OSError when it is unusable or gone."""
    return _load(mdir, FileState(name, 0, 0))


def _apply(index: Index, conn: sqlite3.Connection, mdir: MemoryDir,
           changed: Sequence[FileState], progress: Progress | None = None) -> None:
    real_base = os.path.realpath(mdir.path)
    with index.deferred_fts(conn, len(changed)):
        _load_all(index, conn, mdir, changed, real_base, progress)


def _load_all(index: Index, conn: sqlite3.Connection, mdir: MemoryDir,
              changed: Sequence[FileState], real_base: str, progress: Progress | None) -> None:
    for n, state in enumerate(changed, start=1):
        try:
            memory = _load(mdir, state, real_base)
            _refuse_secrets(memory)
            if memory.body.strip() and not strip_private_memory(memory).body:
                raise MemoryFileError("the memory text is all inside <private>…</private>",
                                      "write the text to remember outside the private span, "
                                      "or delete the file")
            # The row too: a value the file allows but SQLite or UTC cannot hold (a huge
            # count, a date at the edge of the calendar) makes the file broken, not the read.
            row = memory_to_row(memory, mdir.key, norm_hash(memory.body), state.mtime_ns,
                                state.size)
            index.upsert(conn, row)
        except (MemdirError, OSError, OverflowError, ValueError) as exc:
            message = exc.message if isinstance(exc, MemdirError) else str(exc)
            hint = exc.hint if isinstance(exc, MemdirError) else MemoryFileError.default_hint
            if isinstance(exc, OverflowError | ValueError):
                message = f"a frontmatter value is out of range ({exc})"
                hint = ("keep reinforced a plain count and dates between the years 1 and "
                        "9999 (in UTC)")
            if isinstance(exc, PathTraversalError):
                hint = "remove the symlink; memory files must live inside their directory"
            conn.execute("DELETE FROM memories WHERE dir = ? AND file = ?", (mdir.key, state.name))
            conn.execute(
                "INSERT OR REPLACE INTO broken VALUES (?, ?, ?, ?, ?, ?)",
                (mdir.key, state.name, message, hint, state.mtime_ns, state.size))
        else:
            conn.execute("DELETE FROM broken WHERE dir = ? AND file = ?", (mdir.key, state.name))
        if progress:
            progress(n, len(changed))


def _known(conn: sqlite3.Connection, mdir: MemoryDir) -> dict[str, tuple[int, int]]:
    known = {r[0]: (r[1], r[2]) for r in conn.execute(
        "SELECT file, mtime_ns, size FROM memories WHERE dir = ?", (mdir.key,))}
    known.update({r[0]: (r[1], r[2]) for r in conn.execute(
        "SELECT file, mtime_ns, size FROM broken WHERE dir = ?", (mdir.key,))})
    return known


def _diff(conn: sqlite3.Connection, mdir: MemoryDir,
          disk: dict[str, tuple[int, int]]) -> tuple[list[FileState], list[str]]:
    known = _known(conn, mdir)
    changed = [FileState(name, *state) for name, state in disk.items()
               if known.get(name) != state]
    gone = [name for name in known if name not in disk]
    return changed, gone


def reconcile(index: Index, dirs: Sequence[MemoryDir]) -> bool:
    """Bring the index in line with files changed outside memdir. True if anything changed."""
    any_change = False
    for mdir in dirs:
        # The saved row before the scan: a write committed after this read bumps its
        # generation, and the unlocked save below then leaves the newer row alone.
        saved = fp.load(index.conn, mdir.key)
        # First without listing the files (the usual case: nothing changed), else in full.
        probed = fp.probe(mdir.path) if saved is not None else None
        if probed is not None:
            fingerprint, names = probed
            unchanged = fp.matches(saved, fingerprint, names)
        else:
            fingerprint, disk = fp.scan(mdir.path)
            unchanged = fp.trusted(saved, fingerprint, disk)
        if unchanged:
            if (saved is not None and saved.racy and saved.names is not None
                    and fp.settled(fingerprint)):
                # Checked by names while racy (so saved.names is the listing's), and the
                # directory is old enough now: save it again so that the next command trusts
                # its mtime alone.
                _save_unlocked(index, mdir, fingerprint, saved.names, saved)
            continue
        if probed is not None:
            fingerprint, disk = fp.scan(mdir.path)
        changed, gone = _diff(index.conn, mdir, disk)
        if not changed and not gone:
            _save_unlocked(index, mdir, fingerprint, fp.names_sum(disk), saved)
            continue
        with index.write() as conn:
            # Again, under the lock: another process may have reconciled in the meantime.
            fingerprint, disk = fp.scan(mdir.path)
            changed, gone = _diff(conn, mdir, disk)
            for name in gone:
                conn.execute("DELETE FROM memories WHERE dir = ? AND file = ?", (mdir.key, name))
                conn.execute("DELETE FROM broken WHERE dir = ? AND file = ?", (mdir.key, name))
            _apply(index, conn, mdir, changed)
            fp.save(conn, mdir.key, fingerprint, fp.names_sum(disk))
            if changed or gone:
                regenerate_index(conn, mdir)
                # Rewriting MEMORY.md changed the directory's mtime: carry the fingerprint
                # over it, or the next command would compare every row again for nothing.
                fp.carry(conn, mdir.key, mdir.path, {})
                any_change = True
    return any_change


def _save_unlocked(index: Index, mdir: MemoryDir, fingerprint: str, names: int,
                   saved: fp.Saved | None) -> None:
    """The index matched this listing (its names checksum ``names``): remember it (best
    effort, on a read path), unless a write changed the directory's row since ``saved``."""
    sql, params = fp.save_unless_changed(mdir.key, fingerprint, names, saved)
    index.try_write(sql, [params], "directory fingerprint not saved")


def reindex(index: Index, dirs: Sequence[MemoryDir], progress: Progress | None = None) -> int:
    """Rebuild the derived rows of these directories from their files alone."""
    total = 0
    for mdir in dirs:
        states = [FileState(name, *state) for name, state in scan_dir(mdir.path).items()]
        with index.write() as conn:
            conn.execute("DELETE FROM memories WHERE dir = ?", (mdir.key,))
            conn.execute("DELETE FROM broken WHERE dir = ?", (mdir.key,))
            _apply(index, conn, mdir, states, progress)
            regenerate_index(conn, mdir)
            fp.forget(conn, mdir.key)  # the files may have changed while they were read
        total += len(states)
    return total
