"""The PostgreSQL store on its own: migrations, concurrency across threads and processes,
connection failures, and moving memories between a home and a database (library and CLI).

Everything runs against the real PostgreSQL (``MEMDIR_TEST_DATABASE``), each test in a fresh
schema or database, with real subprocesses; what both stores share is in
tests/test_store_contract.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pg_support
from conftest import git
from memdir import Memdir, Memory
from memdir.core.errors import DatabaseError, DuplicateNameError, InvalidMemoryError
from memdir.team.postgres import PostgresStore, redact
from memdir.team.postgres_schema import MIGRATIONS
from memdir.upkeep.transfer import export_memories, import_memories
from pg_support import DSN, drop_schema, fresh_database, fresh_schema

pg_schema, pg_store = pg_support.pg_schema, pg_support.pg_store  # fixtures: a fresh schema

FIELDS = ("id", "name", "description", "type", "scope", "relevance", "tags", "paths",
          "source", "created", "updated", "reinforced", "status", "superseded_by", "meta",
          "content")

# Each child imports memdir, says it is ready, waits for the "go" file so that all of them
# really start at once, then opens the store (running the migrations) and writes.
CHILD = textwrap.dedent("""
    import json, os, sys, time
    from memdir.team.postgres import PostgresStore

    args = json.loads(sys.argv[1])
    open(args["ready"], "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(args["go"]):
        if time.monotonic() > deadline:
            sys.exit("no go signal")
        time.sleep(0.002)
    store = PostgresStore(args["dsn"], schema=args["schema"])
    print(json.dumps([store.store(text, type="fact").id for text in args["texts"]]))
""")


def run_children(tmp_path: Path, schema: str, texts: list[list[str]]) -> list[list[str]]:
    """One process per list of texts, all released at once; the ids each stored."""
    go = tmp_path / "go"
    procs, ready = [], []
    for n, mine in enumerate(texts):
        flag = tmp_path / f"ready-{n}"
        ready.append(flag)
        payload = {"dsn": DSN, "schema": schema, "texts": mine, "ready": str(flag),
                   "go": str(go)}
        procs.append(subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(payload)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + 60
    while not all(f.exists() for f in ready) and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    results = [proc.communicate(timeout=120) for proc in procs]
    for proc, (_, stderr) in zip(procs, results, strict=True):
        assert proc.returncode == 0, stderr
    return [json.loads(stdout) for stdout, _ in results]


def schema_rows(schema: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return conn.execute(query.encode()).fetchall()


def portable(memory: Memory | dict[str, Any]) -> dict[str, Any]:
    data = memory.to_dict() if isinstance(memory, Memory) else memory
    return {key: data[key] for key in FIELDS}


def by_id(memories: list[Memory]) -> dict[str, dict[str, Any]]:
    return {m.id: portable(m) for m in memories}


def test_migrations_are_recorded_once_and_idempotent(pg_schema: str) -> None:
    with PostgresStore(DSN, schema=pg_schema) as store:
        kept = store.store("Backups run nightly at 02:00 UTC", type="fact")
        assert store.vectors is False  # no pgvector on this server: no embeddings table
        stats = store.stats()
        assert stats.directories == {"postgresql": redact(DSN)}
        assert stats.index_path == f"postgresql:{pg_schema}" and stats.total == 1
    for _ in range(2):
        with PostgresStore(DSN, schema=pg_schema) as again:
            assert again.get(kept.id).body == kept.body
    versions = schema_rows(pg_schema, "SELECT version FROM schema_migrations ORDER BY 1")
    assert [v for (v,) in versions] == list(range(1, len(MIGRATIONS) + 1))
    tables = {t for (t,) in schema_rows(pg_schema, "SELECT tablename FROM pg_tables WHERE "
                                                   "schemaname = current_schema()")}
    assert tables == {"memories", "plain_vectors", "recall_sessions", "recall_surfaced",
                      "schema_migrations"}


@pytest.mark.slow
def test_processes_starting_at_once_migrate_once_and_write_one_row_per_content(
        tmp_path: Path, pg_schema: str) -> None:
    workers, each = 5, 12
    texts = [[f"Worker {w} note {i}" if i % 2 else
              (f"The SHARED  note about caching {i}" if w % 2 else
               f"the shared note about CACHING {i}") for i in range(each)]
             for w in range(workers)]
    ids = run_children(tmp_path, pg_schema, texts)
    versions = schema_rows(pg_schema, "SELECT version FROM schema_migrations")
    assert sorted(v for (v,) in versions) == list(range(1, len(MIGRATIONS) + 1))
    rows = schema_rows(pg_schema, "SELECT id, body, reinforced FROM memories")
    shared = [r for r in rows if "shared" in r[1].lower()]
    assert len(shared) == each // 2 and all(r[2] == workers - 1 for r in shared)
    assert len(rows) == each // 2 + workers * each // 2
    for i in range(0, each, 2):  # every process got the same id back for the same content
        assert len({mine[i] for mine in ids}) == 1


def test_threads_writing_the_same_content_leave_one_row(pg_store: PostgresStore) -> None:
    threads, each = 8, 10
    got: list[Memory] = []
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def write(n: int) -> None:
        try:
            start.wait()
            for i in range(each):
                text = "Rotate the signing keys every quarter"
                got.append(pg_store.store(text.upper() if (n + i) % 2 else f"  {text} ",
                                          type="policy", tags=[f"t{n}"]))
        except BaseException as exc:  # reported below, with the assertion
            errors.append(exc)

    workers = [threading.Thread(target=write, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    [memory] = pg_store.list(status="all")
    assert memory.reinforced == threads * each - 1
    assert {m.id for m in got} == {memory.id}
    assert set(memory.tags) == {f"t{n}" for n in range(threads)}


def test_concurrent_recalls_of_one_session_never_share_a_memory(
        pg_store: PostgresStore) -> None:
    for n in range(12):
        pg_store.store(f"Incident {n}: the payment webhook timed out under load", type="pitfall")
    results: list[list[str]] = []
    start = threading.Barrier(4)

    def recall() -> None:
        start.wait()
        results.append([m.id for m in pg_store.recall("payment webhook timeouts", "s1").memories])

    workers = [threading.Thread(target=recall) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    surfaced = [i for ids in results for i in ids]
    assert len(surfaced) == len(set(surfaced)) == 12


def test_values_postgres_cannot_hold_and_content_clashes_are_memdir_errors(
        pg_store: PostgresStore) -> None:
    with pytest.raises(InvalidMemoryError):
        pg_store.store("a NUL \x00 byte", type="fact")
    first = pg_store.store("Logs are kept for 30 days", type="fact")
    second = pg_store.store("Metrics are kept for 90 days", type="fact")
    with pytest.raises(DuplicateNameError) as info:
        pg_store.update(second.id, content="logs are KEPT for 30 days")
    assert first.id in info.value.message
    assert pg_store.get(second.id).body == "Metrics are kept for 90 days"


def test_a_dropped_connection_fails_one_call_then_reconnects(pg_store: PostgresStore) -> None:
    memory = pg_store.store("The cron runs every five minutes", type="fact")
    with pg_store.connections.db() as conn:
        pid = conn.info.backend_pid
    with psycopg.connect(DSN, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(DatabaseError) as info:
        pg_store.list()
    assert "PostgreSQL" in info.value.hint
    assert pg_store.get(memory.id).id == memory.id


def test_connection_errors_say_how_to_fix_them_and_hide_the_password() -> None:
    with pytest.raises(DatabaseError) as info:
        PostgresStore("postgresql://postgres:sekrit@127.0.0.1:1/test")
    assert "sekrit" not in str(info.value) and "127.0.0.1:1" in info.value.message
    assert "Is PostgreSQL running" in info.value.hint
    assert redact("postgresql://me:pw@db.example:5433/team") == "postgresql://me@db.example:5433/team"
    assert "pw" not in redact("host=db user=me password=pw dbname=team")


HAND_WRITTEN = """---
id: handmade
name: Release checklist
description: What to check before tagging a release
type: procedure
priority: p1
reviewed: 2024-02-01
owner:
  team: platform
  oncall: true
created: 2024-01-15T12:00:00Z
updated: 2024-02-01T08:30:00Z
reinforced: 3
---
1. Run the full test suite.
2. Bump the version in pyproject.toml.
"""


def populated_home(home: Path, repo: Path) -> Memdir:
    md = Memdir(home=home, project=repo, sync_interval=0,
                clock=lambda: datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC))
    md.store("Integration tests hit a real database", type="feedback", name="Testing policy",
             tags=["testing", "db"], paths=["tests/**"], relevance=0.85,
             meta={"ticket": "ABC-12", "links": ["https://example.com/a"], "n": 3})
    again = md.store("We chose PostgreSQL for the team server", type="decision",
                     source="extracted", relevance="medium")
    md.store("we chose postgresql for the TEAM server", type="decision")  # reinforces
    gone = md.store("Old CI ran on Jenkins", type="fact", scope="user")
    md.archive(gone.id)
    md.store("Team rule: every PR gets one review", type="policy", scope="team")
    md._set(again.id, superseded_by="zzzz1234")
    (md.directory("project").path / "procedure_release-checklist.md").write_text(HAND_WRITTEN)
    md.reconcile()
    return md


def test_sqlite_to_postgres_and_back_is_lossless(tmp_path: Path, home: Path, repo: Path,
                                                 pg_schema: str) -> None:
    with populated_home(home, repo) as source:
        original = source.list(status="all")
        first = tmp_path / "first.jsonl"
        assert export_memories(source, first, fmt="jsonl") == 5
    assert len(original) == 5
    hand = next(m for m in original if m.id == "handmade")
    assert hand.meta["reviewed"] == date(2024, 2, 1) and hand.reinforced == 3
    with PostgresStore(DSN, schema=pg_schema) as pg:
        report = import_memories(pg, first)
        assert report.errors == [] and report.skipped == [] and len(report.imported) == 5
        assert by_id(pg.list(status="all")) == by_id(original)
        twice = import_memories(pg, first)
        assert twice.imported == [] and len(twice.skipped) == 5
        assert {why for _, why in twice.skipped} == {f"id {m.id} already exists"
                                                     for m in original}
        second = tmp_path / "second.jsonl"
        assert export_memories(pg, second, fmt="jsonl") == 5
        folder = tmp_path / "folder"
        assert export_memories(pg, folder, fmt="markdown") == 5
    def lines(path: Path) -> list[str]:
        return sorted(json.dumps(json.loads(x), sort_keys=True)
                      for x in path.read_text().splitlines())

    assert lines(first) == lines(second)
    for n, src in enumerate((second, folder)):
        other = tmp_path / f"other-{n}"
        other.mkdir()
        git("init", "-q", "-b", "main", cwd=other)
        with Memdir(home=tmp_path / f"home-{n}", project=other, sync_interval=0) as dest:
            report = import_memories(dest, src)
            assert report.errors == [] and len(report.imported) == 5
            assert by_id(dest.list(status="all")) == by_id(original)
            assert import_memories(dest, src).imported == []


def test_validation_holds_on_import_into_postgres(tmp_path: Path,
                                                  pg_store: PostgresStore) -> None:
    dump = tmp_path / "bad.jsonl"
    dump.write_text("\n".join([
        json.dumps({"content": "Good memory about queues", "type": "fact", "id": "good0001"}),
        json.dumps({"content": "key AKIAIOSFODNN7EXAMPL3", "type": "fact"}),
        json.dumps({"content": "no such type", "type": "thought"}),
        "not json",
        json.dumps({"content": "good memory ABOUT queues", "type": "fact"}),
    ]))
    report = import_memories(pg_store, dump)
    assert [m.id for m in report.imported] == ["good0001"]
    assert len(report.errors) == 3
    assert report.skipped == [("bad.jsonl:5", "same content already stored")]


def memdir_cli(*args: str, home: Path, cwd: Path, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memdir", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=120,
                          env={**os.environ, "MEMDIR_HOME": str(home), **(env or {})})


@pytest.mark.slow
def test_cli_exports_and_imports_with_a_database(tmp_path: Path, home: Path,
                                                 repo: Path) -> None:
    with populated_home(home, repo) as source:
        original = source.list(status="all")
    with fresh_database() as url:
        out = memdir_cli("export", "dump.jsonl", "--json", home=home, cwd=repo)
        assert json.loads(out.stdout)["exported"] == 5, out.stderr
        done = memdir_cli("import", "dump.jsonl", "--database", url, "--json", home=home,
                          cwd=repo)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["imported"] == 5
        again = json.loads(memdir_cli("import", "dump.jsonl", "--database", url, "--json",
                                      home=home, cwd=repo).stdout)
        assert again["imported"] == 0 and len(again["skipped"]) == 5
        back = memdir_cli("export", str(tmp_path / "back.jsonl"), "--json", home=home,
                          cwd=repo, env={"MEMDIR_DATABASE": url})
        assert json.loads(back.stdout)["exported"] == 5, back.stderr
        with PostgresStore(url) as pg:  # the default schema, as the CLI used it
            assert by_id(pg.list(status="all")) == by_id(original)
    other = tmp_path / "other"
    other.mkdir()
    git("init", "-q", "-b", "main", cwd=other)
    fresh_home = tmp_path / "fresh-home"
    loaded = memdir_cli("import", str(tmp_path / "back.jsonl"), "--json", home=fresh_home,
                        cwd=other)
    assert json.loads(loaded.stdout)["imported"] == 5, loaded.stderr
    with Memdir(home=fresh_home, project=other) as dest:
        assert by_id(dest.list(status="all")) == by_id(original)
    failed = memdir_cli("export", "x.jsonl", "--database",
                        "postgresql://postgres:sekrit@127.0.0.1:1/none", home=home, cwd=repo)
    assert failed.returncode == 1
    assert "error: cannot connect to PostgreSQL" in failed.stderr
    assert "hint: Is PostgreSQL running" in failed.stderr and "sekrit" not in failed.stderr


def test_fixture_schemas_are_dropped() -> None:
    with fresh_schema() as name, PostgresStore(DSN, schema=name):
        assert schema_rows(name, "SELECT count(*) FROM memories") == [(0,)]
    drop_schema(name)  # already gone: dropping again is harmless
    with psycopg.connect(DSN) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (name,)).fetchone()
    assert found is None
