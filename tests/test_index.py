"""The index database: migrations, connection settings, FTS sanitising, directory fingerprints."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memdir import Memdir
from memdir.index import Index
from memdir.index_schema import MIGRATIONS, statements
from memdir.search import fts_query


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
