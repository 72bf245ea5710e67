"""Search context and dates as words (issue 20): text and days that find a memory and that
nothing shows.

A memory's search context (``context=``, ``context:`` in its file) and the words of its days
(``created`` and ``date``) are indexed in FTS5 columns of their own; no search result,
``memdir context``, prompt hook or MCP recall shows them. Real stores, real CLI and hook
processes, the real MCP server in process.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import CLI
from memdir import Memdir
from memdir.agents.mcp_server import build_server
from memdir.capture.transcript import parse_transcript
from memdir.core.errors import InvalidMemoryError, SecretDetectedError
from memdir.core.index_schema import MIGRATIONS, statements
from memdir.core.model import MAX_CONTEXT, date_words

SECRET = "ghp_" + "a1B2" * 9
CONTEXT = "Kevin: are you going to the zeppelin concert on Friday?"
BODY = "Yes, I bought tickets for both of us"


def ids(hits: list[Any]) -> list[str]:
    return [h.memory.id for h in hits]


def test_a_query_matching_only_the_context_finds_the_memory(md: Memdir) -> None:
    memory = md.store(BODY, type="fact", context=CONTEXT)
    md.store("Tickets for the museum are free on Sundays", type="fact")
    assert memory.context == CONTEXT
    assert ids(md.search("zeppelin", mode="fts")) == [memory.id]
    assert ids(md.search("zeppelin concert", mode="hybrid")) == [memory.id]
    # The body still weighs more than the context: a memory that says it comes first.
    said = md.store("The zeppelin concert was loud", type="fact")
    assert ids(md.search("zeppelin", mode="fts")) == [said.id, memory.id]


def test_store_many_items_take_context_and_date(md: Memdir) -> None:
    stored = md.store_many([
        {"content": BODY, "type": "fact", "context": CONTEXT, "date": "2024-01-12"},
        {"content": "Nothing planned", "type": "fact"}])
    assert stored[0].context == CONTEXT and stored[0].date == date(2024, 1, 12)
    assert stored[1].context == "" and stored[1].date is None
    assert ids(md.search("zeppelin", mode="fts")) == [stored[0].id]
    assert ids(md.search("January 2024", mode="fts")) == [stored[0].id]
    with pytest.raises(InvalidMemoryError, match="not a date"):
        md.store("x", type="fact", date="next week")
    with pytest.raises(InvalidMemoryError, match="context must be text"):
        md.store_many([{"content": "x", "type": "fact", "context": ["a"]}])


def test_the_context_is_never_shown(md: Memdir, cli: CLI, home: Path, repo: Path) -> None:
    memory = md.store(BODY, type="fact", context=CONTEXT)
    hits = md.search("zeppelin", mode="fts")
    assert "context" not in hits[0].to_dict()["memory"]
    assert "zeppelin" not in json.dumps(hits[0].to_dict())
    out = cli("search", "zeppelin", check=True).stdout
    assert memory.id in out and "zeppelin" not in out.lower()
    as_json = cli("search", "zeppelin", "--json", check=True).stdout
    assert memory.id in as_json and "zeppelin" not in as_json.lower()
    for fmt in ("markdown", "json"):
        shown = cli("context", "--query", "zeppelin concert tickets", "--format", fmt,
                    check=True).stdout
        assert "bought tickets" in shown and "zeppelin" not in shown.lower()
    prompt = {"session_id": "s1", "cwd": str(repo), "transcript_path": "",
              "hook_event_name": "UserPromptSubmit",
              "prompt": "are we going to the zeppelin concert? tickets?"}
    hook = subprocess.run([sys.executable, "-m", "memdir", "hook", "prompt"],
                          input=json.dumps(prompt), cwd=repo, capture_output=True, text=True,
                          timeout=60, env={**_env(home)})
    assert hook.returncode == 0, hook.stderr
    assert "bought tickets" in hook.stdout and "zeppelin" not in hook.stdout.lower()
    recalled = _mcp_recall(md, "zeppelin")
    assert memory.id in recalled and "zeppelin" not in recalled.lower()


def _env(home: Path) -> dict[str, str]:
    import os

    return {**os.environ, "MEMDIR_HOME": str(home)}


def _mcp_recall(md: Memdir, query: str) -> str:
    server = build_server(md=md)
    out: list[str] = []

    async def main() -> None:
        async with Client(server, read_timeout_seconds=30) as client:
            result = await client.call_tool("memory_recall", {"query": query})
            assert not result.is_error
            out.append(json.dumps(result.structured_content))
            out.extend(getattr(c, "text", "") for c in result.content)

    anyio.run(main)
    return "\n".join(out)


def test_the_cli_stores_context_and_date(cli: CLI, md: Memdir) -> None:
    assert "--context TEXT" in cli("store", "--help", check=True).stdout
    cli("store", BODY, "--type", "fact", "--context", CONTEXT, "--date", "2026-03-05",
        check=True)
    [memory] = md.list()
    assert memory.context == CONTEXT and memory.date == date(2026, 3, 5)
    assert memory.path is not None
    text = memory.path.read_text()
    assert f"context: {json.dumps(CONTEXT)}\n" in text and "date: 2026-03-05\n" in text
    assert ids(md.search("Thursday zeppelin", mode="fts")) == [memory.id]


def test_the_context_line_is_editable_by_hand(md: Memdir) -> None:
    memory = md.store(BODY, type="fact", context=CONTEXT)
    assert memory.path is not None
    text = memory.path.read_text()
    memory.path.write_text(text.replace(json.dumps(CONTEXT),
                                        '"Elise: shall we see the opera in Vienna?"'))
    assert ids(md.search("opera vienna", mode="fts")) == [memory.id]
    assert md.search("zeppelin", mode="fts") == []
    # Several lines written by hand are read as one, and rewritten so.
    memory.path.write_text(text.replace(f"context: {json.dumps(CONTEXT)}",
                                        "context: |\n  first line\n  second line"))
    assert md.get(memory.id).context == "first line second line"
    md.update(memory.id, tags=["music"])
    assert "context: first line second line\n" in memory.path.read_text()
    assert ids(md.search("second", mode="fts")) == [memory.id]


def test_secrets_and_private_spans_in_the_context(md: Memdir) -> None:
    with pytest.raises(SecretDetectedError):
        md.store(BODY, type="fact", context=f"Kevin: the token is {SECRET}")
    assert md.list() == []
    memory = md.store(BODY, type="fact",
                      context="Kevin: <private>my pin is 4711</private>see you at the concert")
    assert memory.context == "Kevin: see you at the concert"
    assert memory.path is not None and "4711" not in memory.path.read_text()
    assert md.search("4711", mode="fts") == []
    # A secret written into the context by hand: the file is not indexed, doctor says why.
    text = memory.path.read_text()
    memory.path.write_text(text.replace("see you at the concert", f"token {SECRET}"))
    assert md.search("concert", mode="fts") == [] and md.list() == []
    assert any(p.where.endswith(memory.path.name) and "secret" in p.message
               for p in md.doctor())
    # A <private> span written by hand is never indexed.
    memory.path.write_text(text.replace("see you at the concert",
                                        "<private>opera</private> ballet"))
    assert ids(md.search("ballet", mode="fts")) == [memory.id]
    assert md.search("opera", mode="fts") == []


def test_a_long_context_is_one_bounded_line(md: Memdir) -> None:
    words = " ".join(f"word{n}\n" for n in range(400))
    memory = md.store(BODY, type="fact", context=words)
    assert "\n" not in memory.context and len(memory.context) <= MAX_CONTEXT
    assert words.split()[: len(memory.context.split())] == memory.context.split()
    assert memory.context.split()[-1].startswith("word")  # cut between words
    assert ids(md.search("word3", mode="fts")) == [memory.id]
    assert md.search("word399", mode="fts") == []
    assert memory.path is not None
    text = memory.path.read_text()
    memory.path.write_text(text.replace(json.dumps(memory.context),
                                        json.dumps("long " * 600)))
    assert len(md.get(memory.id).context) <= MAX_CONTEXT


def test_dates_as_words(home: Path, repo: Path) -> None:
    march = datetime(2026, 3, 5, 10, 0, tzinfo=UTC)  # a Thursday
    assert date_words(march) == "March 2026 Thursday 2026-03-05"
    with Memdir(home=home, project=repo, clock=lambda: march, sync_interval=0) as md:
        decided = md.store("We chose Postgres for the billing service", type="decision")
    later = datetime(2026, 6, 9, 10, 0, tzinfo=UTC)  # a Tuesday
    with Memdir(home=home, project=repo, clock=lambda: later, sync_interval=0) as md:
        other = md.store("We chose Redis for the session cache", type="decision")
        talked = md.store("Kevin said the concert is sold out", type="fact", date="2024-01-12")
        assert ids(md.search("what did we decide in March", mode="fts")) == [decided.id]
        assert ids(md.search("Thursday", mode="fts")) == [decided.id]
        assert ids(md.search("Tuesday", mode="fts")) == [other.id, talked.id] or \
            ids(md.search("Tuesday", mode="fts")) == [talked.id, other.id]
        assert ids(md.search("January", mode="fts")) == [talked.id]  # its date, a Friday
        assert ids(md.search("Friday", mode="fts")) == [talked.id]
        # Never shown: not in a hit, the context or recall.
        hit = md.search("March", mode="fts")[0]
        assert "March" not in json.dumps(hit.to_dict())
        assert "March" not in md.context("postgres billing").text
        assert talked.path is not None and "date: 2024-01-12\n" in talked.path.read_text()


def test_a_rebuild_from_the_files_gives_the_same_index(md: Memdir) -> None:
    md.store_many([{"content": f"Note {n} on caching", "type": "fact",
                    "context": f"Elise: what about cache {n}?", "date": f"2025-0{n + 1}-01"}
                   for n in range(5)])
    columns = "file, context, date, dates, body"

    def rows() -> list[tuple[Any, ...]]:
        return [tuple(r) for r in md.index.conn.execute(
            f"SELECT {columns} FROM memories ORDER BY file")]

    def matched(word: str) -> list[str]:
        return [r[0] for r in md.index.conn.execute(
            "SELECT m.file FROM memories_fts f JOIN memories m ON m.rowid = f.rowid "
            "WHERE memories_fts MATCH ? ORDER BY m.file", (word,))]

    before = rows()
    found = {w: matched(w) for w in ("cache", "April", "Saturday", "caching")}
    assert len(found["cache"]) == 5 and len(found["April"]) == 1
    md.reindex()
    assert rows() == before
    assert {w: matched(w) for w in found} == found


def test_an_index_at_version_18_is_migrated(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        memory = md.store(BODY, type="fact", context=CONTEXT, date="2024-01-12")
    for suffix in ("", "-wal", "-shm"):
        Path(str(home / "index.sqlite") + suffix).unlink(missing_ok=True)
    old = sqlite3.connect(home / "index.sqlite", isolation_level=None)
    old.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                " applied TEXT NOT NULL)")
    for version, (name, sql) in enumerate(MIGRATIONS[:18], start=1):
        for statement in statements(sql):
            old.execute(statement)
        old.execute("INSERT INTO schema_migrations VALUES (?, ?, '2026-01-01T00:00:00Z')",
                    (version, name))
    # A session chunk indexed at version 18: kept, and still found by its text.
    old.execute("INSERT INTO session_chunks (dir, session_id, chunk, first_message, "
                "last_message, started, text) VALUES ('d', 's', 0, 0, 1, NULL, "
                "'user: the harpsichord is tuned')")
    old.close()
    with Memdir(home=home, project=repo) as md:
        assert ids(md.search("zeppelin", mode="fts")) == [memory.id]
        assert ids(md.search("January", mode="fts")) == [memory.id]
        assert md.index.conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] \
            == len(MIGRATIONS)
        assert md.index.conn.execute("SELECT text FROM session_fts WHERE session_fts MATCH "
                                     "'harpsichord'").fetchone() is not None


def test_a_session_chunk_is_searched_by_the_message_before_it(md: Memdir) -> None:
    messages = [{"role": "user", "content": "Kevin: are you going to the zeppelin concert?"},
                {"role": "assistant", "content": "Sure, " + "word " * 900},
                {"role": "user", "content": "Yes, with two tickets"}]
    md.index_session(parse_transcript(messages), "sess-ctx")
    chunks = md.index.conn.execute(
        "SELECT chunk, first_message, text, context FROM session_chunks ORDER BY chunk"
    ).fetchall()
    assert len(chunks) >= 2 and chunks[0]["context"] == ""
    for chunk in chunks[1:]:  # each starts inside the assistant's message
        assert chunk["first_message"] == 1 and "zeppelin" not in chunk["text"]
        assert chunk["context"] == "user: Kevin: are you going to the zeppelin concert?"
    hits = md.search("zeppelin", sources=("sessions",), mode="fts")
    assert {h.session.chunk for h in hits if h.session} == {c["chunk"] for c in chunks}
    # The chunk's own words rank first; the others are found, their text shown, not context.
    assert hits[0].session is not None and hits[0].session.chunk == 0
    assert all("zeppelin" not in h.memory.body for h in hits[1:])


def test_rule_extraction_keeps_the_message_before(md: Memdir) -> None:
    transcript = parse_transcript([
        {"role": "user", "content": "Can you set up the build?"},
        {"role": "assistant", "content": f"Which package manager, npm or pnpm? key {SECRET}"},
        {"role": "user", "content": "I prefer pnpm over npm for this repo."}])
    report = md.extract(transcript, llm=False, session_id="sess-x")
    [item] = report.stored
    assert item.memory is not None
    stored = md.get(item.memory.id)
    assert stored.context.startswith("assistant: Which package manager, npm or pnpm?")
    assert SECRET not in stored.context  # redacted, not refused
    assert ids(md.search("which package manager", mode="fts")) == [stored.id]


def test_a_merge_keeps_one_context(md: Memdir) -> None:
    first = md.store("The staging database is refreshed every night at two", type="fact")
    second = md.store("The staging database is refreshed every night at two am", type="fact",
                      context="Paola: when is staging refreshed?")
    plan = md.consolidate(dry_run=False)
    assert any(op.op == "merge" for op in plan.operations)
    kept = [m for m in md.list() if m.id in (first.id, second.id)]
    assert len(kept) == 1 and kept[0].context == "Paola: when is staging refreshed?"
    assert ids(md.search("paola", mode="fts")) == [kept[0].id]


@pytest.mark.parametrize("fmt", ["jsonl", "markdown"])
def test_export_and_import_keep_context_and_date(md: Memdir, tmp_path: Path,
                                                 fmt: str) -> None:
    memory = md.store(BODY, type="fact", context=CONTEXT, date="2024-01-12")
    md.export(tmp_path / "out", format=fmt)
    with Memdir(home=tmp_path / "other-home", project=tmp_path, sync_interval=0) as other:
        report = other.import_(tmp_path / "out")
        assert [m.id for m in report.imported] == [memory.id]
        got = other.get(memory.id)
        assert got.context == CONTEXT and got.date == date(2024, 1, 12)
        assert ids(other.search("zeppelin", mode="fts")) == [memory.id]


def test_the_http_api_stores_context_and_never_returns_it_in_hits(home: Path,
                                                                  repo: Path) -> None:
    from server_support import running_server, store_memory

    with running_server(home, repo) as server, server.client() as api:
        stored = store_memory(api, BODY, "fact", context=CONTEXT, date="2024-01-12")
        assert stored["context"] == CONTEXT and stored["date"] == "2024-01-12"
        found = api.get("/api/memory/search", params={"q": "zeppelin"}).json()
        assert [h["memory"]["id"] for h in found["hits"]] == [stored["id"]]
        assert "zeppelin" not in json.dumps(found["hits"])
        context = api.get("/api/memory/context", params={"query": "zeppelin tickets"}).json()
        assert "zeppelin" not in json.dumps(context)
        refused = api.post("/api/memory/store", json={"content": "x", "type": "fact",
                                                      "context": f"token {SECRET}"})
        assert refused.status_code == 422 and SECRET not in refused.text


def test_recall_never_brings_a_memory_back_for_its_day_alone(home: Path, repo: Path) -> None:
    friday = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)  # a Friday
    with Memdir(home=home, project=repo, clock=lambda: friday, sync_interval=0,
                semantic=False) as md:
        dated = md.store("The office coffee machine is broken", type="fact")
        shipping = md.store("Releases ship through the staging cluster first", type="decision")
    later = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
    with Memdir(home=home, project=repo, clock=lambda: later, sync_interval=0,
                semantic=False) as md:
        # A person's search for the day finds what was written that day...
        assert dated.id in ids(md.search("Friday", touch=False))
        # ...but with dates=False (what recall and extraction ask) the day alone is no
        # evidence, while a word of the memory's own still is.
        assert ids(md.search("Friday", touch=False, dates=False)) == []
        assert ids(md.search("ship it on Friday", touch=False, dates=False)) == [shipping.id]
        recalled = md.recall("let's ship it on Friday", "session-1")
        assert [m.id for m in recalled.memories] == [shipping.id]
        assert md.recall("see you on Friday", "session-2").memories == []
