"""MEMORY.md and its overflow pages, regenerated from the index rows inside every write.

MEMORY.md lists one line per active memory, most relevant first. Over ``INDEX_KEEP`` memories
it keeps the first ``INDEX_HEAD`` lines and, per type, a link to ``index/<type>.md``. That
page lists the next ``OVERFLOW_LINES`` memories of the type. So MEMORY.md stays under its
200-line cap however large the store grows.

Invariants:
- What is written is a function of the active rows alone: regenerating again without a change
  writes the same bytes.
- A type's page depends only on that type's rows and on how many of them MEMORY.md shows. A
  write that says which types it touched (:class:`Touched`) rewrites only the pages of those
  types, of types whose share of MEMORY.md changed, and of missing pages. The result is byte
  for byte what a full regeneration writes (``tests/test_listing.py``). Without a
  :class:`Touched` (reconcile, reindex, a batch's end) every page is regenerated, which also
  repairs pages changed or removed by hand.
- Inside :func:`index_deferred` (a batch of many changes) a directory is regenerated once, at
  the end.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memdir.core.files import (
    INDEX_HEAD,
    INDEX_KEEP,
    OVERFLOW_DIR,
    OVERFLOW_LINES,
    Overflow,
    write_index,
    write_overflow,
)
from memdir.core.shorten import shorten

if TYPE_CHECKING:
    from memdir.core.index import Index
    from memdir.core.store import MemoryDir

__all__ = ["Touched", "index_deferred", "index_line", "regenerate_index", "touching",
           "written_by_memdir"]

MAX_LINE_CHARS = 150  # of one MEMORY.md entry

_LISTING = "relevance DESC, updated DESC, file"  # MEMORY.md's order (the listing index's)

_deferred: set[str] = set()  # directories whose MEMORY.md waits for the end of a batch


def index_line(name: str, file: str, type_name: str, description: str) -> str:
    """One MEMORY.md entry: ``- [name](file) (type) — description``, at most ~150 chars, a
    long description cut between words with '…'. A description that merely continues the
    name (both derived from the text) becomes the link text: the text is said once."""
    name = " ".join(_bracketless(name).split())
    desc = " ".join(description.split())
    stem = name.rstrip("…").rstrip().lower()
    if not desc or (stem and desc.lower().startswith(stem)):
        label = _bracketless(desc) or name
        tail = f"]({file}) ({type_name})"
        return f"- [{shorten(label, max(MAX_LINE_CHARS - len(tail) - 3, 20))}{tail}"
    head = f"- [{name}]({file}) ({type_name}) — "
    return head + shorten(desc, max(MAX_LINE_CHARS - len(head), 1))


def _bracketless(text: str) -> str:
    """Square brackets would end a link's text early: round ones read the same."""
    return text.replace("[", "(").replace("]", ")")


@dataclass(frozen=True)
class Touched:
    """What one write transaction is about to change in a directory: the types of the rows it
    writes or removes, and how many lines of each type MEMORY.md showed before it."""

    types: frozenset[str]
    shown_before: Mapping[str, int]


def _head(conn: sqlite3.Connection, key: str) -> list[tuple[str, str]]:
    """(type, line) of MEMORY.md's first ``INDEX_HEAD`` lines, when it has overflow pages."""
    return [(str(r[0]), str(r[1])) for r in conn.execute(
        "SELECT type, index_line FROM memories WHERE dir = ? AND status = 'active' "
        f"ORDER BY {_LISTING} LIMIT ?", (key, INDEX_HEAD))]


def touching(conn: sqlite3.Connection, mdir: MemoryDir, types: Collection[str]) -> Touched:
    """Before a write that changes rows of ``types`` only: what :func:`regenerate_index` needs
    afterwards to rewrite only what the write affects. Call it inside the write transaction."""
    shown = Counter(kind for kind, _ in _head(conn, mdir.key))
    return Touched(frozenset(types), dict(shown))


@contextlib.contextmanager
def index_deferred(index: Index, dirs: Sequence[MemoryDir]) -> Iterator[None]:
    """Many changes, one MEMORY.md regeneration per directory at the end (consolidation
    applies hundreds of changes; rewriting a 10k-line index after each costs minutes)."""
    keys = {d.key for d in dirs} - _deferred
    _deferred.update(keys)
    try:
        yield
    finally:
        _deferred.difference_update(keys)
        with index.write() as conn:
            for mdir in dirs:
                if mdir.key in keys:
                    regenerate_index(conn, mdir)


def _page(conn: sqlite3.Connection, key: str, kind: str, total: int, shown: int) -> Overflow:
    """A type's overflow page: its lines after the ``shown`` ones MEMORY.md lists."""
    return Overflow(total - shown, [r[0] for r in conn.execute(
        "SELECT index_line FROM memories WHERE dir = ? AND status = 'active' "
        f"AND type = ? ORDER BY {_LISTING} LIMIT ? OFFSET ?",
        (key, kind, OVERFLOW_LINES, shown))])


def _all_pages(conn: sqlite3.Connection, key: str, count: int,
               shown: Counter[str]) -> dict[str, Overflow]:
    if count <= 10 * OVERFLOW_LINES:
        # Few enough to read every line once: cheaper than a query per type, each scanning
        # the listing index for its own type (10k memories: 25 ms against 50 ms).
        rows = conn.execute(
            "SELECT type, index_line FROM memories WHERE dir = ? AND status = 'active' "
            f"ORDER BY {_LISTING} LIMIT -1 OFFSET ?", (key, INDEX_HEAD)).fetchall()
        counts = Counter(kind for kind, _ in rows)
        pages: dict[str, list[str]] = {}
        for kind, line in rows:
            page = pages.setdefault(kind, [])
            if len(page) < OVERFLOW_LINES:
                page.append(line)
        return {kind: Overflow(counts[kind], pages[kind]) for kind in sorted(pages)}
    # Past that, read only what the pages show: at most OVERFLOW_LINES per type.
    return {kind: _page(conn, key, kind, total, shown[kind]) for kind, total in conn.execute(
        "SELECT type, COUNT(*) FROM memories WHERE dir = ? AND status = 'active' "
        "GROUP BY type ORDER BY type", (key,)) if total > shown[kind]}


def regenerate_index(conn: sqlite3.Connection, mdir: MemoryDir,
                     touched: Touched | None = None) -> None:
    """Rewrite MEMORY.md and the overflow pages from the rows (only the pages ``touched``
    affects, when given). Call it inside the write transaction that changed the rows."""
    if mdir.key in _deferred:
        return
    key = mdir.key
    count = conn.execute("SELECT COUNT(*) FROM memories WHERE dir = ? AND status = 'active'",
                         (key,)).fetchone()[0]
    if count <= INDEX_KEEP:
        # Each row carries its rendered line, so SQLite assembles the whole index in C.
        lines = conn.execute(
            "SELECT group_concat(index_line, char(10)) FROM (SELECT index_line FROM memories "
            f"WHERE dir = ? AND status = 'active' ORDER BY {_LISTING})",
            (key,)).fetchone()[0] or ""
        write_overflow(mdir.path, {})
        if lines or (mdir.path / "MEMORY.md").exists():
            _record(conn, key, write_index(mdir.path, lines))
        return
    head = _head(conn, key)
    shown = Counter(kind for kind, _ in head)
    keep: set[str] | None = None
    if touched is None:
        rest = _all_pages(conn, key, count, shown)
        more = [(kind, page.count) for kind, page in rest.items()]
    else:
        totals = {str(r[0]): int(r[1]) for r in conn.execute(
            "SELECT type, COUNT(*) FROM memories WHERE dir = ? AND status = 'active' "
            "GROUP BY type ORDER BY type", (key,))}
        more = [(kind, total - shown[kind]) for kind, total in totals.items()
                if total > shown[kind]]
        keep = {kind for kind, _ in more}
        folder = mdir.path / OVERFLOW_DIR
        rest = {kind: _page(conn, key, kind, totals[kind], shown[kind]) for kind, _ in more
                if kind in touched.types or shown[kind] != touched.shown_before.get(kind, 0)
                or not os.path.lexists(folder / f"{kind}.md")}
    _record(conn, key, write_index(mdir.path, "\n".join([
        *(line for _, line in head), "",
        f"## More ({count - INDEX_HEAD} memories not listed above)",
        *(f"- [{n} more {kind} memories](index/{kind}.md)" for kind, n in more)])))
    write_overflow(mdir.path, rest, keep=keep)


def _record(conn: sqlite3.Connection, key: str, st: os.stat_result | None) -> None:
    """Remember which MEMORY.md memdir wrote (None: it wrote none, e.g. a symlink was left)."""
    if st is None:
        conn.execute("DELETE FROM listing_written WHERE dir = ?", (key,))
    else:
        conn.execute("INSERT OR REPLACE INTO listing_written VALUES (?, ?, ?, ?)",
                     (key, st.st_ino, st.st_size, st.st_mtime_ns))


def written_by_memdir(conn: sqlite3.Connection, key: str, st: os.stat_result | None) -> bool:
    """Whether ``st`` is the MEMORY.md memdir last wrote for ``key``, unedited since (same
    inode, size and nanosecond mtime): then it lists only indexed memories, each already
    checked for secrets, and its lines need no check of their own."""
    if st is None:
        return False
    try:
        row = conn.execute("SELECT ino, size, mtime_ns FROM listing_written WHERE dir = ?",
                           (key,)).fetchone()
    except sqlite3.Error:  # an index too old to have the table, opened read-only
        return False
    return row is not None and tuple(row) == (st.st_ino, st.st_size, st.st_mtime_ns)
