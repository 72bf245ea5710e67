"""Secrets and ``<private>`` text never land anywhere: on every write path, in every field.

The labelled corpus is ``bench/secrets_corpus.py`` (fake, format-valid secrets built at run
time from a fixed seed, and benign look-alikes); the scoring is the benchmark's
(``bench/secret_detection.py``), so the thresholds asserted here and the table it prints
agree. Then one representative secret, and one private span, through each write path for real:
the library, the CLI (a subprocess), the HTTP API on the SQLite and PostgreSQL stores, MCP,
extraction and import; and a memory file written by hand that holds a secret is flagged by
doctor and never injected or found.
"""

from __future__ import annotations

import base64
import json
import random
import string
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import TextContent

from conftest import CLI
from llm_support import ScriptedServer
from memdir import Memdir, SecretDetectedError
from memdir.agents.mcp_server import build_server
from memdir.capture.extract import SECRET_SKIPPED
from memdir.core.private import strip_private
from memdir.core.safety import find_secrets, redact_secrets
from pg_support import DSN, fresh_database, fresh_schema
from server_support import Server, assert_error, running_server, store_memory

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.secret_detection import run
from bench.secrets_corpus import corpus

# Built from parts, like the corpus: no live-looking key sits in the repository.
PASSWORD = "DB_PASSWORD=" + "Xk9#" + "qT2v" + "Lw8p"
AWS_SECRET = "export AWS_SECRET_ACCESS_KEY=" + "wJalrX" + "Ut9FEMIK7MDENGbPxRfiCY" + "q3Zk81mA"
SECRET_TEXTS = [PASSWORD, AWS_SECRET]


def _value(text: str) -> str:
    return text.split("=", 1)[1]


# -- the detector, on the labelled corpus -----------------------------------------------------

def test_the_library_refuses_98_percent_of_secrets_and_at_most_3_percent_of_look_alikes() -> None:
    entries = corpus()
    secrets = [e for e in entries if e.secret]
    assert len(secrets) >= 100 and len({e.provider for e in secrets}) >= 30
    assert sum(not e.secret for e in entries) >= 60
    assert corpus() == entries  # deterministic: the same texts on every run
    (tally,) = run(["library"], entries)
    assert tally.errors == []
    assert tally.recall >= 0.98, tally.misses
    assert tally.false_rate <= 0.03, tally.misses


def _rand(n: int, alphabet: str = string.ascii_letters + string.digits, seed: int = 7) -> str:
    rng = random.Random(seed * 1000 + n)
    return "".join(rng.choice(alphabet) for _ in range(n))


B64 = string.ascii_letters + string.digits + "+/"


@pytest.mark.parametrize("text", [
    PASSWORD, AWS_SECRET, "aws_secret_access_key = " + _rand(40, B64),
    '"apiKey": "' + _rand(32) + '"', "redis://:" + _rand(20) + "@cache.internal:6379/0",
    "Authorization: Basic " + base64.b64encode(b"deploy:S3cr3t!x").decode(),
    "AccountKey=" + _rand(86, B64) + "==",
    "SLACK_APP_TOKEN=xapp-1-A0B1C2D3E4F5-1234567890123-" + _rand(64, "0123456789abcdef"),
    "https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF12/" + _rand(24),
    "npm_" + _rand(36), "hf_" + _rand(34, string.ascii_letters),
    "SG." + _rand(22) + "." + _rand(43), "TWILIO_AUTH_TOKEN=" + _rand(32, "0123456789abcdef"),
    "1234567890:AA" + _rand(33), "DISCORD_TOKEN=M" + _rand(25) + ".GaBcDe." + _rand(38),
])
def test_the_kinds_that_leaked_are_refused(text: str) -> None:
    assert find_secrets([text]), text


@pytest.mark.parametrize("text", [
    "pwd is /workspace/app2", "git checkout sk-1234-fix-login-redirect-bug",
    "DATABASE_URL=postgres://${DB_USER}:${DB_PASSWORD}@db:5432/app",
])
def test_look_alikes_that_were_refused_are_allowed(text: str) -> None:
    assert find_secrets([text]) == []


def test_redaction_uses_the_same_rules() -> None:
    text = f"run with {PASSWORD} and {AWS_SECRET}"
    redacted = redact_secrets(text)
    assert _value(PASSWORD) not in redacted and _value(AWS_SECRET) not in redacted
    assert "[redacted: a password or key assignment]" in redacted


# -- <private> ------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ('keep <private class="x">HIDDEN</private> this', "keep  this"),
    ("keep <private >HIDDEN</private > this", "keep  this"),
    ("keep < PRIVATE >HIDDEN</ private> this", "keep  this"),
    ("keep <private>HIDDEN <private>X</private> HIDDEN</private> this", "keep  this"),
    ("keep <pri<b></b>vate>HIDDEN</private> this", "keep  this"),
    ("keep <p<x>r<x>i<x>v<x>a<x>t<x>e>HIDDEN</private> this", "keep  this"),
    ("keep <pri\u200bvate>HIDDEN</private> this", "keep  this"),
    ("keep <private>HIDDEN</pri<i>vate> this", "keep  this"),
    ("keep <Private data-x='1'>HIDDEN", "keep "),
    ("keep </private> this", "keep  this"),
])
def test_every_spelling_of_a_private_span_is_stripped(text: str, expected: str) -> None:
    assert strip_private(text) == expected


def test_private_is_stripped_from_every_field(md: Memdir) -> None:
    memory = md.store("Prod DB <private class='x'>HIDDEN</private> is Postgres 16", type="fact",
                      name="DB <private >HIDDEN</private >", description="<private>HIDDEN",
                      tags=["db", "<private>HIDDEN</private>"],
                      meta={"note": "ok <private>HIDDEN</private>",
                            "<private>HIDDEN</private>": "gone", "list": ["<private>HIDDEN"]})
    assert memory.meta == {"note": "ok ", "list": [""]}
    assert memory.tags == ("db",)
    assert memory.path is not None and "HIDDEN" not in memory.path.read_text()
    assert "gone" not in memory.path.read_text()


def test_a_secret_inside_a_private_meta_value_is_stripped_not_refused(md: Memdir) -> None:
    memory = md.store("CI notes", type="fact", meta={"ci": f"<private>{PASSWORD}</private>"})
    assert memory.meta == {"ci": ""}


def test_the_cli_strips_private_from_meta(cli: CLI, home: Path) -> None:
    result = cli("store", "--type", "fact", "--meta", "note=<private >HIDDEN</private > kept",
                 "--meta", "<private>HIDDEN</private>=x", "Deploys run on Fridays", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["memory"]["meta"] == {"note": " kept"}
    assert "HIDDEN" not in "".join(p.read_text() for p in home.rglob("*.md"))


# -- each write path refuses a secret ------------------------------------------------------

def test_library_store_update_and_store_many_refuse(md: Memdir) -> None:
    kept = md.store("The deploy user is ci-bot", type="fact")
    for text in SECRET_TEXTS:
        with pytest.raises(SecretDetectedError) as err:
            md.store(text, type="fact")
        assert _value(text) not in str(err.value)
        with pytest.raises(SecretDetectedError):
            md.update(kept.id, content=text)
        with pytest.raises(SecretDetectedError):
            md.store_many([{"content": "fine", "type": "fact"}, {"content": text, "type": "fact"}])
        with pytest.raises(SecretDetectedError):
            md.store("Connection notes", type="fact", meta={"env": text})
    assert [m.body for m in md.list()] == ["The deploy user is ci-bot"]


def test_the_cli_refuses(cli: CLI, home: Path) -> None:
    result = cli("store", "--type", "fact", PASSWORD)
    assert result.returncode == 2 and "secret" in result.stderr, result.stderr
    assert _value(PASSWORD)[:4] not in result.stderr + result.stdout  # not even a prefix
    assert "DB_PASSWORD=…" in result.stderr  # the key names what was found
    assert not list(home.rglob("fact_*.md"))


def _api_refuses(srv: Server) -> None:
    with srv.client() as api:
        for text in SECRET_TEXTS:
            reply = api.post("/api/memory/store", json={"content": text, "type": "fact"})
            assert_error(reply, 422, "secret_detected")
            assert _value(text) not in reply.text
        memory = store_memory(api, "Staging is rebuilt on Sundays", "fact",
                              meta={"note": "<private class='x'>HIDDEN</private>ok"})
        assert memory["meta"] == {"note": "ok"}
        assert_error(api.patch(f"/api/memory/{memory['id']}",
                               json={"meta": {"k": PASSWORD}}), 422, "secret_detected")
        listed = api.get("/api/memory").json()["memories"]
        assert [m["content"] for m in listed] == ["Staging is rebuilt on Sundays"]


def test_the_http_api_refuses_on_sqlite(server: Server) -> None:
    _api_refuses(server)


def test_the_http_api_refuses_on_postgresql(home: Path, repo: Path) -> None:
    with fresh_database() as url, running_server(home, repo, "--database", url) as srv:
        _api_refuses(srv)


def test_the_postgresql_store_strips_private_and_refuses() -> None:
    from memdir.team.postgres import PostgresStore

    with fresh_schema() as schema, PostgresStore(DSN, schema=schema) as store:
        with pytest.raises(SecretDetectedError):
            store.store(AWS_SECRET, type="fact")
        memory = store.store("Deploys <private >HIDDEN</private > run on Fridays", type="fact",
                             tags=["<private>HIDDEN</private>ci"],
                             meta={"<private>k</private>": "v", "n": "<Private a=1>HIDDEN"})
        assert (memory.body, memory.tags, memory.meta) == ("Deploys  run on Fridays", ("ci",),
                                                           {"n": ""})


def test_mcp_refuses(md: Memdir) -> None:
    results: list[tuple[bool, str]] = []

    async def main() -> None:
        async with Client(build_server(md=md), read_timeout_seconds=30) as client:
            for text in SECRET_TEXTS:
                result = await client.call_tool("memory_learn", {"content": text, "type": "fact"})
                results.append((bool(result.is_error), "\n".join(
                    c.text for c in result.content if isinstance(c, TextContent))))

    anyio.run(main)
    for (error, text), secret in zip(results, SECRET_TEXTS, strict=True):
        assert error and "secret" in text and _value(secret) not in text
    assert md.list() == []


def test_extraction_reports_a_message_dropped_for_a_secret(md: Memdir) -> None:
    chat = [{"role": "user", "content": f"Always use {PASSWORD} for the staging database."},
            {"role": "assistant", "content": "OK."},
            {"role": "user", "content": "We always deploy with pnpm, never npm."}]
    report = md.extract(chat, llm=False, session_id="s1")
    skipped = [i for i in report.skipped if i.reason.startswith(SECRET_SKIPPED)]
    assert len(skipped) == 1 and "password or key assignment" in skipped[0].reason
    assert _value(PASSWORD) not in json.dumps(report.to_dict())
    assert [i.action for i in report.items if i not in skipped] == ["stored"]
    assert all(_value(PASSWORD) not in m.body for m in md.list())


def test_the_cli_extract_prints_skipped_contains_a_secret(cli: CLI, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"role": "user", "content": f"Remember {AWS_SECRET}"}) + "\n")
    result = cli("extract", "--transcript", str(transcript), "--no-llm")
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stdout and SECRET_SKIPPED in result.stdout, result.stdout
    assert _value(AWS_SECRET) not in result.stdout + result.stderr


def test_import_refuses_and_reports(md: Memdir, tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    items: list[dict[str, Any]] = [
        {"type": "fact", "content": "Staging is frozen in December"},
        {"type": "fact", "content": PASSWORD},
        {"type": "fact", "content": "Fine", "meta": {"k": AWS_SECRET}},
        {"type": "fact", "content": "Private <private a='1'>HIDDEN</private>meta",
         "meta": {"<private>HIDDEN</private>": 1}},
    ]
    src.write_text("".join(json.dumps(i) + "\n" for i in items))
    report = md.import_(src)
    problems = dict(report.errors + report.skipped)
    assert "secret" in problems["in.jsonl:2"] and "secret" in problems["in.jsonl:3"]
    assert sorted(m.body for m in md.list()) == ["Private meta", "Staging is frozen in December"]
    assert all(m.meta == {} for m in md.list())


# -- a memory file written by hand --------------------------------------------------------

def test_a_hand_written_file_with_a_secret_is_flagged_and_never_injected(md: Memdir) -> None:
    memory = md.store("The deploy user for launchpad is ci-bot", type="fact",
                      relevance="critical")
    assert memory.path is not None
    original = memory.path.read_text()
    memory.path.write_text(original.replace("ci-bot", f"ci-bot, {PASSWORD}"))
    problems = [p for p in md.doctor() if p.kind == "secret"]
    assert [p.where for p in problems] == [str(memory.path)]
    assert "password or key assignment" in problems[0].message and problems[0].hint
    assert _value(PASSWORD)[:4] not in problems[0].message
    context = md.context("launchpad deploy user", budget_tokens=4000)
    assert _value(PASSWORD) not in context.text and context.memories == []
    assert md.search("launchpad") == [] and md.list() == []
    assert _value(PASSWORD) not in md.memory_index()
    recalled = md.recall("who is the launchpad deploy user", "s1")
    assert _value(PASSWORD) not in json.dumps(recalled.to_dict())
    memory.path.write_text(original)  # cleaned by hand: indexed again
    assert [h.memory.id for h in md.search("launchpad")] == [memory.id]
    assert [p for p in md.doctor() if p.kind == "secret"] == []


def test_a_secret_written_into_memory_md_by_hand_is_never_injected(md: Memdir) -> None:
    md.store("The deploy user is ci-bot", type="fact")
    index_file = md.directory("project").path / "MEMORY.md"
    index_file.write_text(index_file.read_text() + f"- deploy with {AWS_SECRET}\n")
    assert _value(AWS_SECRET) not in md.memory_index()
    assert "[redacted:" in md.memory_index()
    assert _value(AWS_SECRET) not in md.context(budget_tokens=4000).text


def test_an_llm_candidate_with_a_secret_is_reported_without_it(
        md: Memdir, scripted_llm: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMDIR_LLM", "openai:m")
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_llm.url + "/v1")
    items = [{"type": "fact", "content": f"Staging DB uses {PASSWORD}", "relevance": 0.8},
             {"type": "fact", "content": "Staging is rebuilt on Sundays", "relevance": 0.8}]
    scripted_llm.reply_openai(json.dumps({"memories": items}))
    report = md.extract([{"role": "user", "content": "Staging notes, see above."},
                         {"role": "assistant", "content": "Noted."}], session_id="s1")
    assert report.method == "llm"
    (skipped,) = report.skipped
    assert skipped.reason.startswith(SECRET_SKIPPED)
    assert _value(PASSWORD) not in json.dumps(report.to_dict())
    assert "[redacted:" in skipped.content
    assert [m.body for m in md.list()] == ["Staging is rebuilt on Sundays"]


def test_extraction_into_postgresql_reports_a_secret() -> None:
    from memdir.capture.extract import extract_into
    from memdir.capture.transcript import parse_transcript
    from memdir.core.taxonomy import get_taxonomy
    from memdir.team.postgres import PostgresStore

    chat = parse_transcript([
        {"role": "user", "content": f"Always use {AWS_SECRET} when deploying."},
        {"role": "user", "content": "We always deploy with pnpm, never npm."}])
    with fresh_schema() as schema, PostgresStore(DSN, schema=schema) as store:
        report = extract_into(store, chat, taxonomy=get_taxonomy("memdir"), scope="team",
                              session_id="s1", dry_run=False)
        reasons = [i.reason for i in report.skipped]
        assert len(reasons) == 1 and reasons[0].startswith(SECRET_SKIPPED)
        assert _value(AWS_SECRET) not in json.dumps(report.to_dict())
        assert all(_value(AWS_SECRET) not in m.body for m in store.list())
