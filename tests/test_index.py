"""The index database: migrations, connection settings, FTS sanitising, directory fingerprints."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from memdir import Memdir
from memdir.core.index import BM25_WEIGHTS, DEFER_FTS_ROWS, Index, memory_to_row
from memdir.core.index_schema import MIGRATIONS, statements
from memdir.core.strength import boost
from memdir.retrieval.search import OVERFETCH, fts_query


def test_connection_settings(md: Memdir) -> None:
    conn = md.index.conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 10_000
    versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]
    assert versions == list(range(1, len(MIGRATIONS) + 1))


def test_an_old_index_is_migrated_and_rebuilt_from_the_files(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        memory = md.store("Feature flags live in LaunchDarkly", type="reference")
    for suffix in ("", "-wal", "-shm"):
        Path(str(home / "index.sqlite") + suffix).unlink(missing_ok=True)
    # An index as the first release wrote it: only migration 1.
    old = sqlite3.connect(home / "index.sqlite", isolation_level=None)
    old.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                " applied TEXT NOT NULL)")
    for statement in statements(MIGRATIONS[0][1]):
        old.execute(statement)
    old.execute("INSERT INTO schema_migrations VALUES (1, 'first', '2026-01-01T00:00:00Z')")
    old.close()
    with Memdir(home=home, project=repo) as md:
        assert [h.memory.id for h in md.search("launchdarkly")] == [memory.id]
        count = md.index.conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0]
    assert count == len(MIGRATIONS)
    Index(home / "index.sqlite").conn.close()  # opening again applies nothing twice


def test_rows_written_before_the_julian_day_column_get_it(home: Path, repo: Path) -> None:
    # Migration 14 adds updated_jd (what the strength ranking reads) to existing rows, and
    # every upsert fills it from the row's updated text.
    with Memdir(home=home, project=repo) as md:
        md.store_many([{"content": f"Note {n} on caching", "type": "fact"} for n in range(3)])
        with md.index.write() as w:
            w.execute("UPDATE memories SET updated_jd = NULL, updated = '2026-01-02T03:04:05Z'")
            w.execute("DELETE FROM schema_migrations WHERE version IN (14, 15)")
            w.execute("DROP INDEX memories_strength_key")  # as before migration 15
            w.execute("ALTER TABLE memories DROP COLUMN strength_key")
            w.execute("DROP INDEX memories_strength")  # as migration 10 made it
            w.execute("CREATE INDEX memories_strength ON memories "
                      "(dir, status, type, relevance, updated, reinforced, id, file)")
            w.execute("ALTER TABLE memories DROP COLUMN updated_jd")
    with Memdir(home=home, project=repo) as md:
        conn = md.index.conn
        rows = [tuple(r) for r in
                conn.execute("SELECT updated_jd, julianday(updated) FROM memories")]
        assert rows == [(2461042.627835648, 2461042.627835648)] * 3
        memory = md.list()[0]
        md.update(memory.id, content="Note on caching, edited")
        jd, expected = conn.execute("SELECT updated_jd, julianday(updated) FROM memories "
                                    "WHERE id = ?", (memory.id,)).fetchone()
        assert jd == expected and jd > rows[0][0]


def _rank(relevance: float, reinforced: int, shown: int, used: int, updated_jd: float,
          accessed_jd: float | None) -> float:
    """The strength key's formula (memdir.core.index.strength_key_sql), in Python."""
    last = max(updated_jd, accessed_jd or 0.0)
    return math.log2(relevance * boost(shown, reinforced + used)) + last / 90.0


def _ranks(conn: sqlite3.Connection) -> list[tuple[float, float]]:
    rows = conn.execute(
        "SELECT m.strength_key, m.relevance, m.reinforced, COALESCE(u.access_count, 0), "
        "COALESCE(u.used_count, 0), m.updated_jd, julianday(u.last_accessed) FROM memories m "
        "LEFT JOIN usage u ON u.dir = m.dir AND u.id = m.id ORDER BY m.rowid").fetchall()
    return [(row[0], _rank(*row[1:])) for row in rows]


def test_the_strength_key_follows_every_write_and_every_access(md: Memdir) -> None:
    # The strength key (what session-start context reads the strongest memories by) is kept by the
    # one write statement and by usage updates; migration 15 gives it to existing rows.
    stored = md.store_many([{"content": f"Rule {n}: never deploy on friday {n}",
                             "type": "policy", "relevance": 0.3 + n / 10} for n in range(5)])
    conn = md.index.conn
    ranks = _ranks(conn)
    assert len(ranks) == 5 and all(got == pytest.approx(want, abs=1e-9) for got, want in ranks)
    before = dict(zip((m.id for m in stored), (r for r, _ in ranks), strict=True))
    md.get(stored[0].id)  # an access: more uses, a later last access
    md.store(stored[1].body, type="policy")  # a duplicate: reinforced
    md.update(stored[2].id, relevance=0.95)
    ranks = _ranks(conn)
    assert all(got == pytest.approx(want, abs=1e-9) for got, want in ranks)
    after = {m.id: conn.execute("SELECT strength_key FROM memories WHERE id = ?",
                                (m.id,)).fetchone()[0] for m in stored}
    assert [after[m.id] > before[m.id] for m in stored] == [True, True, True, False, False]
    # An index from before migration 15: the column, the index and the version go back, and
    # migration 22 (the bounded formula) gives the keys of today's formula again.
    with md.index.write() as w:
        w.execute("DROP INDEX memories_strength_key")
        w.execute("ALTER TABLE memories DROP COLUMN strength_key")
        w.execute("ALTER TABLE usage DROP COLUMN used_count")
        w.execute("ALTER TABLE usage DROP COLUMN last_used")
        w.execute("ALTER TABLE recall_surfaced DROP COLUMN used")
        w.execute("DELETE FROM schema_migrations WHERE version IN (15, 22)")
    md.index.close()
    conn = md.index.conn
    assert [round(r, 9) for r, _ in _ranks(conn)] == [round(after[m.id], 9) for m in stored]


def test_fts_query_is_always_valid_fts5() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
    conn.execute("INSERT INTO t VALUES ('deployments and rollbacks')")
    for text in ['"', "AND", "a OR", "NEAR(a b)", "x:y", "*", "^start", "(", "deploy*",
                 "\x00", "日本語", "-- drop", "{a b}", "a + b", "'"]:
        query = fts_query(text)
        if query is not None:
            conn.execute("SELECT * FROM t WHERE t MATCH ?", (query,)).fetchall()
    assert fts_query("") is None and fts_query("!!! ???") is None
    assert fts_query("the deploy") == '"deploy" OR "deployment"'
    assert conn.execute("SELECT COUNT(*) FROM t WHERE t MATCH ?",
                        (fts_query("deploy"),)).fetchone()[0] == 1


def test_an_unchanged_directory_is_not_rescanned_row_by_row(md: Memdir) -> None:
    memory = md.store("The CDN is Fastly", type="fact")
    md.search("fastly")  # first look after a write: full compare, fingerprint saved
    saved = md.index.conn.execute("SELECT fingerprint FROM dir_state WHERE dir = ?",
                                  (str(md.directory("project").path),)).fetchone()
    assert saved is not None
    assert md.reconcile() is False
    # A hand edit changes the fingerprint, so it is still found.
    assert memory.path is not None
    memory.path.write_text(memory.path.read_text().replace("Fastly", "Cloudflare"))
    assert md.reconcile() is True
    assert [h.memory.id for h in md.search("cloudflare")] == [memory.id]


def _plain_join(md: Memdir, query: str, *, include_archived: bool = False) -> list[str]:
    """The ids the unoptimised query (every match joined, then sorted) ranks first."""
    fts = fts_query(query)
    dirs = [str(md.directory(s).path) for s in ("project", "user")]
    status = "" if include_archived else "AND m.status = 'active'"
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    rows = md.index.conn.execute(
        f"SELECT m.id FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid "
        f"WHERE memories_fts MATCH ? AND m.dir IN (?, ?) {status} "
        f"ORDER BY bm25(memories_fts, {weights}), m.file", (fts, *dirs)).fetchall()
    return [r[0] for r in rows]


def test_search_finds_weak_matches_behind_many_better_ones_it_must_filter_out(
        home: Path, repo: Path, tmp_path: Path) -> None:
    """FTS5 ranks only OVERFETCH x the pool before the directory and status filters; when
    they reject all of those, search ranks every match instead of coming back short."""
    crowd = OVERFETCH * 40 + 50  # more strong matches than FTS5 ranks in its first pass
    other = tmp_path / "other-project"
    other.mkdir()
    with Memdir(home=home, project=other) as elsewhere:
        elsewhere.store_many([{"content": f"widget widget number {n}", "type": "fact"}
                              for n in range(crowd)])
    with Memdir(home=home, project=repo) as md:
        md.store_many([{"content": f"widget widget archived {n}", "type": "fact"}
                       for n in range(crowd)])
        weak = md.store_many([{"content": f"The {w} service renders one widget among many "
                               "other components of the dashboard page", "type": "fact"}
                              for w in ("billing", "search", "checkout")])
        # Archived in the index only (md.archive rewrites a file and MEMORY.md per call):
        # the directory fingerprint is unchanged, so no reconcile undoes it.
        md.index.conn.execute("UPDATE memories SET status = 'archived' WHERE body LIKE "
                              "'%archived%'")
        found = [h.memory.id for h in md.search("widget", limit=10, touch=False)]
        assert sorted(found) == sorted(m.id for m in weak)
        assert found == _plain_join(md, "widget")
        with_archived = [h.memory.id for h in md.search("widget", limit=50, touch=False,
                                                        include_archived=True)]
        assert len(with_archived) == 50
        assert set(with_archived) <= set(_plain_join(md, "widget", include_archived=True))


def test_a_path_filter_finds_matches_ranked_below_the_first_pool(md: Memdir) -> None:
    md.store_many([{"content": f"widget widget note {n}", "type": "fact"} for n in range(260)])
    covered = md.store_many([{"content": f"The {w} page renders one widget among many other "
                              "components of the dashboard", "type": "fact",
                              "paths": ["src/**"]} for w in ("billing", "search", "checkout")])
    found = md.search("widget", paths=["src/app.py"], limit=10, touch=False)
    assert sorted(h.memory.id for h in found) == sorted(m.id for m in covered)


# -- bulk writes add their FTS5 rows in one statement (Index.deferred_fts) --------------------

def _fts_consistent(conn: sqlite3.Connection) -> None:
    """FTS5's own check of the index against the memories table (rank 1: against the content
    too, which the plain check skips on SQLite 3.40): raises if a row is missing, doubled or
    stale."""
    conn.execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('integrity-check', 1)")


def _matching(conn: sqlite3.Connection, word: str) -> set[str]:
    return {r[0] for r in conn.execute(
        "SELECT m.file FROM memories_fts f JOIN memories m ON m.rowid = f.rowid "
        "WHERE memories_fts MATCH ?", (word,))}


def test_a_bulk_store_adds_its_words_to_the_fts_index(md: Memdir) -> None:
    before = md.store("The queue runs on RabbitMQ", type="fact")
    stored = md.store_many([{"content": f"Bulk note {n} about zanzibar{n}", "type": "fact"}
                            for n in range(DEFER_FTS_ROWS + 8)])
    conn = md.index.conn
    _fts_consistent(conn)
    assert conn.execute("SELECT COUNT(*) FROM fts_deferred").fetchone()[0] == 0
    assert [h.memory.id for h in md.search("zanzibar7", touch=False)] == [stored[7].id]
    assert [h.memory.id for h in md.search("rabbitmq", touch=False)] == [before.id]
    after = md.store("Single note about okapi", type="fact")  # row by row again
    assert [h.memory.id for h in md.search("okapi", touch=False)] == [after.id]
    _fts_consistent(conn)


def test_rows_changed_inside_a_deferred_block_reach_fts_as_the_block_left_them(
        md: Memdir) -> None:
    old = md.store("The cache is Redis", type="fact")
    mdir = md.directory("project")

    def row(n: int, body: str) -> tuple[object, ...]:
        memory = old.replace(path=mdir.path / f"fact_n{n}.md", body=body, id=f"id{n}",
                             name=f"note {n}", description=f"note {n}")
        return memory_to_row(memory, mdir.key, f"h{n}", 1, 1)

    with md.index.write() as conn, md.index.deferred_fts(conn, DEFER_FTS_ROWS):
        for n in range(DEFER_FTS_ROWS):
            md.index.upsert(conn, row(n, f"Note {n} about walrus{n}"))
        md.index.upsert(conn, row(1, "Note one rewritten about narwhal"))  # the block's own
        conn.execute("DELETE FROM memories WHERE file = 'fact_n2.md'")  # the block's own
        # A row from before the block: kept in FTS5 row by row as it changes.
        conn.execute("UPDATE memories SET body = 'The cache is Memcached', name = 'cache', "
                     "description = 'cache' WHERE id = ?", (old.id,))
    conn = md.index.conn
    _fts_consistent(conn)
    assert _matching(conn, "walrus0") == {"fact_n0.md"}
    assert _matching(conn, "walrus1") == set() and _matching(conn, "narwhal") == {"fact_n1.md"}
    assert _matching(conn, "walrus2") == set()
    assert _matching(conn, "redis") == set() and _matching(conn, "memcached") == {old.file}


def test_a_rowid_freed_inside_a_deferred_block_and_reused_reaches_fts(md: Memdir) -> None:
    # SQLite gives a new row the largest rowid + 1: deleting the newest row (a file turned
    # broken, in a reconcile that also meets many new files) hands its rowid out again.
    md.store("The cache is Redis", type="fact")
    newest = md.store("The newest note is about gazelles", type="fact")
    mdir = md.directory("project")
    top = md.index.conn.execute("SELECT max(rowid) FROM memories").fetchone()[0]
    with md.index.write() as conn, md.index.deferred_fts(conn, DEFER_FTS_ROWS):
        conn.execute("DELETE FROM memories WHERE id = ?", (newest.id,))
        for n in range(DEFER_FTS_ROWS):
            memory = newest.replace(path=mdir.path / f"fact_r{n}.md", id=f"r{n}",
                                    name=f"r {n}", description=f"r {n}",
                                    body=f"Note about ibex{n}")
            md.index.upsert(conn, memory_to_row(memory, mdir.key, f"r{n}", 1, 1))
        reused = conn.execute("SELECT file FROM memories WHERE rowid = ?", (top,)).fetchone()
        assert reused is not None  # the freed rowid went to one of the block's rows
        conn.execute("UPDATE memories SET body = 'Note about okapi' WHERE file = 'fact_r5.md'")
    conn = md.index.conn
    _fts_consistent(conn)
    assert _matching(conn, "gazelles") == set()
    assert _matching(conn, "ibex0") == {"fact_r0.md"}
    assert _matching(conn, "okapi") == {"fact_r5.md"} and _matching(conn, "ibex5") == set()
    for n in range(DEFER_FTS_ROWS):  # every row of the block is found by its own word
        assert _matching(conn, f"ibex{n}") == ({f"fact_r{n}.md"} if n != 5 else set())
    md.reindex()  # rebuilding works on it (an inconsistent FTS5 index made it fail)
    _fts_consistent(md.index.conn)


def test_a_failed_deferred_block_leaves_the_index_as_it_was(md: Memdir) -> None:
    old = md.store("The cache is Redis", type="fact")
    mdir = md.directory("project")
    rows = [memory_to_row(old.replace(path=mdir.path / f"fact_f{n}.md", id=f"f{n}"),
                          mdir.key, f"f{n}", 1, 1) for n in range(DEFER_FTS_ROWS)]
    with (pytest.raises(sqlite3.IntegrityError), md.index.write() as conn,
          md.index.deferred_fts(conn, DEFER_FTS_ROWS)):
        for r in rows:
            md.index.upsert(conn, r)
        conn.execute("INSERT INTO fts_deferred (one) VALUES (1)")  # fails: already there
    conn = md.index.conn
    assert conn.execute("SELECT COUNT(*) FROM fts_deferred").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM fts_pending").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0] == 1
    _fts_consistent(conn)
    later = md.store("Later note about quokka", type="fact")
    assert [h.memory.id for h in md.search("quokka", touch=False)] == [later.id]


def test_reindex_and_reconcile_of_many_files_fill_the_fts_index(md: Memdir) -> None:
    stored = md.store_many([{"content": f"Reindexed note about tapir{n}", "type": "fact"}
                            for n in range(DEFER_FTS_ROWS + 5)])
    md.reindex()
    conn = md.index.conn
    _fts_consistent(conn)
    assert [h.memory.id for h in md.search("tapir3", touch=False)] == [stored[3].id]
    # Files written by another program, many at once: the next reconcile indexes them.
    folder = md.directory("project").path
    for n in range(DEFER_FTS_ROWS + 5):
        (folder / f"fact_hand-{n}.md").write_text(
            f"---\nname: hand {n}\ntype: fact\n---\nHand written note about ibex{n}\n",
            encoding="utf-8")
    assert md.reconcile()
    _fts_consistent(conn)
    assert [h.memory.file for h in md.search("ibex4", touch=False)] == ["fact_hand-4.md"]


def test_math_functions_python_gives_where_sqlite_has_none() -> None:
    # SQLite builds without the math functions get Python ones; they must give what
    # SQLite's give, NULL outside the domain included, or the strength key would differ.
    from memdir.core.index_schema import _exp, _log

    conn = sqlite3.connect(":memory:")
    values = [0.25, 1.0, 3.5, 2461042.6, 0.0, -1.0, None]
    builtin = [conn.execute("SELECT ln(?), log2(?)", (v, v)).fetchone() for v in values]
    conn.create_function("ln", 1, _log(None), deterministic=True)  # overrides SQLite's own
    conn.create_function("log2", 1, _log(2.0), deterministic=True)
    python = [conn.execute("SELECT ln(?), log2(?)", (v, v)).fetchone() for v in values]
    assert python == [tuple(pytest.approx(x) if x is not None else None for x in row)
                      for row in builtin]
    assert python[-3:] == [(None, None)] * 3
    # exp (the strength's boost): the same values, and NULL for NULL.
    exps = [-0.5, 0.0, 1.0, -30.0, None]
    builtin_exp = [conn.execute("SELECT exp(?)", (v,)).fetchone()[0] for v in exps]
    conn.create_function("exp", 1, _exp, deterministic=True)
    python_exp = [conn.execute("SELECT exp(?)", (v,)).fetchone()[0] for v in exps]
    assert python_exp == [pytest.approx(x) if x is not None else None for x in builtin_exp]
