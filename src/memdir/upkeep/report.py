"""Reports on a home: ``stats`` (what is stored, and how useful it was) and ``doctor`` (what is
wrong and how to fix it).

Both only read. Doctor never modifies a file: it lists broken memory files with the parse
error and a hint, settings ignored for trust reasons, a team directory that leaves its
repository, MEMORY.md files over their caps, ids used twice, secrets written into files by
hand, temp files left by a killed writer, consolidation plans a kill interrupted, and
symlinks, special files and oversized files where memdir reads (which every other
command skips). Where semantic search is on, both say how many memories still lack a vector
(doctor as a notice, kind ``vectors-missing``: the background worker or ``memdir reindex
--embeddings`` fills them; a notice alone does not make ``memdir doctor`` fail). Memories
that conflict (:mod:`memdir.upkeep.conflicts`) are a notice too, kind ``memory-conflict``, with
how to resolve them: the first ``LISTED``, then one notice with how many more there are.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memdir.core.errors import PathTraversalError
from memdir.core.files import INDEX_FILE, MAX_INDEX_BYTES, MAX_INDEX_LINES, utf8_name
from memdir.core.model import SCOPES, Memory, Problem, Scope, Stats
from memdir.core.safety import SECRET_IN_FILE, find_secrets
from memdir.core.usefulness import NEVER_USED_AFTER, Counts, MemoryUse, Usefulness, usefulness

if TYPE_CHECKING:
    from memdir.core.store import MemoryDir
    from memdir.memdir import Memdir
    from memdir.upkeep.conflicts import Conflict

__all__ = ["NOTICES", "IndexStats", "doctor", "stats"]

# doctor's kinds that are no fault
NOTICES = frozenset({"vectors-missing", "memory-conflict", "http-hooks"})


@dataclass(frozen=True)
class IndexStats(Stats):
    """The stats of the Markdown + SQLite store, with how many of its memories have no
    vector for their current text yet (None when semantic search is off)."""

    missing_vectors: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "missing_vectors": self.missing_vectors}


# Every memory of the directories with its usage counters and injections (sessions it was
# shown to, used in or whose uses were checked: memdir.capture.uses): what stats counts, in
# one pass.
_COUNTED = (
    "SELECT m.type, m.scope, m.status, COALESCE(u.access_count, 0), m.rowid, "
    "COALESCE(u.used_count, 0), COALESCE(s.n, 0), max(0, m.reinforced) FROM memories m "
    "LEFT JOIN usage u ON u.dir = m.dir AND u.id = m.id LEFT JOIN (SELECT dir, id, count(*) "
    "AS n FROM recall_surfaced WHERE used IS NOT NULL OR checked = 1 GROUP BY dir, id) s "
    "ON s.dir = m.dir AND s.id = m.id WHERE m.dir IN ({marks})")


def stats(md: Memdir, dirs: Sequence[MemoryDir]) -> IndexStats:
    conn = md.index.conn
    keys = [d.key for d in dirs]
    marks = ",".join("?" * len(keys)) or "NULL"
    rows = conn.execute(_COUNTED.format(marks=marks), keys).fetchall()
    broken = conn.execute(f"SELECT COUNT(*) FROM broken WHERE dir IN ({marks})", keys).fetchone()
    return IndexStats(
        total=len(rows),
        by_type=dict(Counter(r[0] for r in rows).most_common()),
        by_scope=dict(Counter(r[1] for r in rows).most_common()),
        by_status=dict(Counter(r[2] for r in rows).most_common()),
        never_accessed=sum(1 for r in rows if not r[3]),
        broken_files=int(broken[0]),
        directories={d.scope: str(d.path) for d in dirs},
        index_path=str(md.index.path),
        taxonomy={d.scope: d.taxonomy.preset for d in dirs},
        llm=_llm_usage(md),
        strength=_strength_histogram(md, dirs),
        last_dream=_last_dream(md),
        missing_vectors=md.missing_vectors(),
        usefulness=_usefulness(conn, rows),
    )


def _usefulness(conn: sqlite3.Connection, rows: Sequence[sqlite3.Row]) -> Usefulness:
    """How useful the counted memories were (:mod:`memdir.core.usefulness`): counts per scope, and
    as values only the memories that may be listed (used, reinforced, or injected often)."""
    scopes: dict[str, list[int]] = {}
    listed: dict[int, tuple[Any, ...]] = {}
    for type_, scope, status, shown, rowid, used, injected, reinforced in rows:
        counts = scopes.setdefault(scope, [0, 0, 0])
        counts[0] += shown
        counts[1] += injected
        counts[2] += used
        if used or reinforced or (status == "active" and injected >= NEVER_USED_AFTER):
            listed[rowid] = (type_, scope, status, shown, injected, used, reinforced)
    names = {}
    ids = list(listed)
    for start in range(0, len(ids), 500):  # SQLite's limit on parameters, with room
        part = ids[start:start + 500]
        names.update({r[0]: (r[1], r[2]) for r in conn.execute(
            f"SELECT rowid, id, name FROM memories WHERE rowid IN ({','.join('?' * len(part))})",
            part)})
    return usefulness(((scope, Counts(*c)) for scope, c in scopes.items()),
                      (MemoryUse(*names[rowid], *values) for rowid, values in listed.items()
                       if rowid in names))


STRENGTH_BINS = ((0.05, "< 0.05 (archived by consolidation)"), (0.1, "0.05-0.1"),
                 (0.25, "0.1-0.25"),
                 (0.5, "0.25-0.5"), (0.75, "0.5-0.75"), (float("inf"), ">= 0.75"))


def _strength_histogram(md: Memdir, dirs: Sequence[MemoryDir]) -> dict[str, int]:
    """Active memories per strength band, strength as context ranks it (one SQL formula)."""
    from memdir.retrieval.ranking import active_strengths

    out = {label: 0 for _, label in STRENGTH_BINS}
    for value in active_strengths(md.index.conn, dirs, md._clock()):
        out[next(label for bound, label in STRENGTH_BINS if value < bound)] += 1
    return out


def _last_dream(md: Memdir) -> str | None:
    from datetime import UTC, datetime

    from memdir.core.model import format_time
    from memdir.upkeep.dream import last_dream

    when = last_dream(md.home)
    return format_time(datetime.fromtimestamp(when, UTC)) if when else None


def _llm_usage(md: Memdir) -> dict[str, object]:
    from datetime import datetime

    from memdir.core.errors import ConfigError
    from memdir.llm.client import llm_settings
    from memdir.llm.ledger import Ledger

    usage = Ledger(md.index).usage(datetime.now().astimezone().date().isoformat())
    out: dict[str, object] = {
        "calls_today": usage.calls, "failures_today": usage.failures,
        "input_tokens_today": usage.input_tokens, "output_tokens_today": usage.output_tokens,
    }
    try:
        settings = llm_settings(md.home)
    except ConfigError as exc:
        return {"provider": "invalid", "error": exc.message, "hint": exc.hint, **out}
    return {"provider": settings.provider, "model": settings.effective_model,
            "daily_budget": settings.daily_budget, **out}


def doctor(md: Memdir, dirs: Sequence[MemoryDir]) -> list[Problem]:
    problems = list(md.config.problems)
    stale = _stale_temp_problems(md, dirs)
    conn = md.index.conn
    if md.index.read_only:  # memdir.core.readonly
        problems.append(Problem(
            "read-only-home", str(md.home), "the home cannot be written: memories are read "
            "from the files, nothing is stored and usage is not counted",
            f"make it writable (`chmod -R u+w {md.home}`, or mount it read-write), or set "
            "MEMDIR_HOME to a writable folder"))
    for scope in SCOPES:
        if scope == "team" and os.path.lexists(md.roots.worktree / ".memdir" / "team"):
            try:
                md.directory("team")
            except PathTraversalError as exc:
                problems.append(Problem("team-dir", str(md.roots.worktree / ".memdir" / "team"),
                                        exc.message, "remove the symlink; the team memory "
                                        "directory must be a real folder inside the repository"))
    for mdir in dirs:
        for row in conn.execute("SELECT file, error, hint FROM broken WHERE dir = ? ORDER BY file",
                                (mdir.key,)):
            kind = "secret" if row[1].startswith(SECRET_IN_FILE) else "broken-file"
            problems.append(Problem(kind, str(mdir.path / row[0]), row[1], row[2]))
        for row in conn.execute(
            "SELECT id, group_concat(file, ', ') FROM memories WHERE dir = ? GROUP BY id "
            "HAVING COUNT(*) > 1", (mdir.key,)):
            problems.append(Problem(
                "duplicate-id", str(mdir.path), f"id {row[0]!r} is used by {row[1]}",
                "give each file its own 'id:' (or delete the line to use the file name)"))
        problems.extend(_index_problems(mdir))
        problems.extend(_secret_problems(conn, mdir))
        try:
            listed = os.listdir(mdir.path)
        except OSError:
            listed = []
        leftovers = [n for n in listed if n.startswith(".") and n.endswith(".tmp")]
        for name in listed:
            if name.endswith(".md") and not utf8_name(name):
                shown = os.fsencode(name).decode("utf-8", "backslashreplace")
                problems.append(Problem(
                    "broken-file", str(mdir.path / shown),
                    "the file name is not valid UTF-8, so memdir cannot index it",
                    "rename the file to a UTF-8 name (e.g. with `mv` in a UTF-8 terminal)"))
        for name in leftovers:
            if str(mdir.path / name) not in stale:
                problems.append(Problem("temp-file", str(mdir.path / name),
                                        "temporary file left by an interrupted write",
                                        "delete it; the memory it belonged to was not affected"))
        problems.extend(_unsafe_problems(mdir, listed))
    problems.extend(stale.values())
    missing = md.missing_vectors()
    if missing:
        problems.append(Problem(
            "vectors-missing", str(md.index.path), f"{missing} memories have no vector for "
            "their current text yet: search ranks them by words alone",
            "a long-lived memdir (the MCP server, `memdir serve`, the daemon) embeds them in "
            "the background; or run `memdir reindex --embeddings`"))
    problems.extend(_interrupted_plans(md))
    problems.extend(_unsafe_home_files(md))
    problems.extend(_conflicts(md, dirs))
    return problems


def _conflicts(md: Memdir, dirs: Sequence[MemoryDir]) -> list[Problem]:
    """Memories that disagree (:mod:`memdir.upkeep.conflicts`), a notice each: consolidation
    reports them and never merges them by rules. The first ``LISTED``, then one notice with
    how many more there are."""
    from memdir.upkeep.conflicts import RESOLVE
    from memdir.upkeep.consolidate import LISTED

    scopes = list(dict.fromkeys(d.scope for d in dirs))
    found_all = _found_conflicts(md, scopes) if scopes else []
    out = []
    for found in found_all[:LISTED]:
        older, newer = found.older, found.newer
        which = "the newer " if found.ordered else ""  # the reason says it is unknown
        out.append(Problem(
            "memory-conflict", f"{older.path or older.id} and {newer.path or newer.id}",
            f"{older.id} and {which}{newer.id} disagree: {found.explained}", RESOLVE))
    if len(found_all) > LISTED:
        more = len(found_all) - LISTED
        out.append(Problem(
            "memory-conflict", str(md.index.path),
            f"{more} more conflicts not listed here ({len(found_all)} in all)",
            "`memdir consolidate --dry-run --limit 0` lists every one"))
    return out


def _found_conflicts(md: Memdir, scopes: Sequence[Scope]) -> list[Conflict]:
    """The store's conflicts: the remembered scan read against the index rows alone (whole
    memories only for the pairs it names), else a scan (:mod:`memdir.upkeep.conflict_scan`)."""
    from memdir.upkeep.conflict_scan import digest_rows, remembered, scan
    from memdir.upkeep.conflicts import Conflict as Found

    dirs = md._dirs(scopes)
    if md.home is not None and dirs:
        marks = ",".join("?" * len(dirs))
        rows = [(r[0] if r[0] in ("user", "team") else "project", r[1], r[2], r[3], r[4], r[5])
                for r in md.index.conn.execute(
                    "SELECT scope, id, type, status, updated, body FROM memories "
                    f"WHERE dir IN ({marks}) AND status = 'active'", [d.key for d in dirs])]
        found = remembered(md.home, digest_rows(rows))
        if found is not None:
            ids = sorted({key[1] for pair in found for key in pair[:2]})
            named = md.index.select(
                f"m.dir IN ({marks}) AND m.id IN ({','.join('?' * len(ids))})",
                [*(d.key for d in dirs), *ids]) if ids else []
            whole: dict[tuple[str, str], Memory] = {(m.scope, m.id): m for m in named}
            if all(older in whole and newer in whole for older, newer, _, _ in found):
                return [Found(whole[older], whole[newer], reason, ordered)
                        for older, newer, reason, ordered in found]
    return scan(md.home, md.list(scopes=scopes))


def _stale_temp_problems(md: Memdir, dirs: Sequence[MemoryDir]) -> dict[str, Problem]:
    """memdir's own temp files whose writer is gone (:mod:`memdir.core.temp_files`), by path."""
    from memdir.core.temp_files import stale_temps

    return {str(t.path): Problem(
        "temp-file", str(t.path),
        f"temporary file left by a killed memdir process (pid {t.pid}, "
        f"{t.age / 60:.0f} min old)",
        "the next write command (e.g. `memdir reindex`) removes it once it is a minute old; "
        "or delete it") for t in stale_temps([d.path for d in dirs], md.home)}


def _unsafe_home_files(md: Memdir) -> list[Problem]:
    """A symlink or a special file where memdir keeps a file of its own in the home (the
    history is checked by :func:`_interrupted_plans`): skipped by every command."""
    from memdir.core.safe_open import unsafe_entries
    from memdir.core.usage_queue import QUEUE_NAME
    from memdir.upkeep.dream import LOCK_FILE

    names = [QUEUE_NAME, LOCK_FILE, f"{LOCK_FILE}.guard", "config.toml"]
    return [Problem("unsafe-file", str(path), message, hint)
            for path, message, hint in unsafe_entries(md.home, names, {}, {})]


def _interrupted_plans(md: Memdir) -> list[Problem]:
    from memdir.core.errors import UnsafeFileError
    from memdir.upkeep.history import HISTORY_FILE, history

    try:
        plans = history(md.home)
    except UnsafeFileError as exc:  # a FIFO, a symlink or a huge file at history.jsonl
        return [Problem("unsafe-file", str(md.home / HISTORY_FILE), exc.message, exc.hint)]
    except OSError as exc:
        return [Problem("unsafe-file", str(md.home / HISTORY_FILE), f"cannot read it: {exc}",
                        f"check the permissions of {md.home / HISTORY_FILE}")]
    return [Problem("interrupted-plan", str(md.home / HISTORY_FILE),
                    f"the consolidation plan {r['id']} was interrupted after changing some "
                    "files (each file is whole, but the plan is half done)",
                    "run `memdir undo` to put every file it touched back, then `memdir "
                    "consolidate --yes` to plan again")
            for r in plans if r.get("interrupted") and not r["undone"]]


_SECRET_BATCH = 64


def _secret_problems(conn: sqlite3.Connection, mdir: MemoryDir) -> list[Problem]:
    """Files written by hand bypass the write-time refusal; doctor still catches secrets."""
    out = []
    rows = conn.execute("SELECT file, name, description, body, tags, meta FROM memories "
                        "WHERE dir = ? ORDER BY file", (mdir.key,)).fetchall()
    for start in range(0, len(rows), _SECRET_BATCH):
        batch = rows[start:start + _SECRET_BATCH]
        # One search over a batch: the common case (no secret in any) costs one pass; a
        # batch with a hit is read again memory by memory, so each finding is one file's.
        if not find_secrets(["\n\n".join(text for text in row[1:] if text) for row in batch]):
            continue
        for row in batch:
            found = find_secrets(row[1:])
            if found:
                out.append(Problem("secret", str(mdir.path / row[0]),
                                   f"the file contains {', '.join(found)}",
                                   "remove the secret from the file (keep credentials in a "
                                   "secret manager); memdir refuses to store them itself"))
    return out


def _index_problems(mdir: MemoryDir) -> list[Problem]:
    from memdir.core.errors import UnsafeFileError
    from memdir.core.safe_open import INDEX_FILE as INDEX_CAP
    from memdir.core.safe_open import read_head

    path = mdir.path / INDEX_FILE
    try:  # a symlink or a FIFO is reported as an unsafe file; a huge one costs a bounded read
        data, st = read_head(path, INDEX_CAP.limit)
    except (OSError, UnsafeFileError):
        return []
    out = []
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if lines > MAX_INDEX_LINES:
        out.append(Problem("index-too-long", str(path),
                           f"{INDEX_FILE} has {lines} lines; only the first {MAX_INDEX_LINES} "
                           "are injected", "archive or consolidate memories (`memdir archive`, "
                           "`memdir consolidate`) so the index stays under 200 lines"))
    if st.st_size > MAX_INDEX_BYTES:
        out.append(Problem("index-too-large", str(path),
                           f"{INDEX_FILE} is {st.st_size} bytes; only {MAX_INDEX_BYTES} are "
                           "injected", "keep descriptions to one short line; move detail into "
                           "the memory files"))
    return out


def _unsafe_problems(mdir: MemoryDir, listed: list[str]) -> list[Problem]:
    """Symlinks, special files and files over their cap where memdir reads (memory files,
    MEMORY.md, logs/, index/): every command skips them and leaves them as they are."""
    from memdir.core.files import is_memory_file
    from memdir.core.safe_open import CONSUMED_STATE, DAILY_LOG, OVERFLOW_PAGE, unsafe_entries

    names = [n for n in listed if n in (INDEX_FILE, INDEX_FILE + ".orig") or is_memory_file(n)]
    found = unsafe_entries(mdir.path, names, {"logs": DAILY_LOG, "index": OVERFLOW_PAGE},
                           {".consumed.json": CONSUMED_STATE})
    return [Problem("unsafe-file", str(path), message, hint) for path, message, hint in found]
