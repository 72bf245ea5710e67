"""Capture: LLM extraction (scripted and real), the write-time safety every candidate goes
through, the per-session cursor, indexed sessions, episodes, procedures and onboarding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import CLI, cli_json
from llm_support import ScriptedServer
from memdir import Memdir
from memdir.llm.client import LLMSettings

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
SESSION = FIXTURES / "claude_code_session.jsonl"


def _chat(*texts: str) -> list[dict[str, str]]:
    roles = ["user", "assistant"]
    return [{"role": roles[n % 2], "content": text} for n, text in enumerate(texts)]


def _use_llm(monkeypatch: pytest.MonkeyPatch, url: str, model: str = "m") -> None:
    monkeypatch.setenv("MEMDIR_LLM", f"openai:{model}")
    monkeypatch.setenv("OPENAI_BASE_URL", url)


def _reply(server: ScriptedServer, *items: Any) -> None:
    server.reply_openai(json.dumps({"memories": list(items)}), prompt_tokens=300,
                        completion_tokens=40)


# -- LLM extraction, scripted ---------------------------------------------------------------

def test_llm_extraction_stores_checked_items(md: Memdir, scripted_llm: ScriptedServer,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _use_llm(monkeypatch, scripted_llm.url + "/v1")
    _reply(scripted_llm,
           {"type": "decision", "content": "Using Drizzle ORM instead of Prisma",
            "relevance": 0.9},
           {"type": "feedback", "content": "Skip the summary at the end of answers",
            "relevance": 0.8, "why": "The user reads the diff.",
            "how_to_apply": "End right after the last change."},
           {"type": "preference", "content": "No semicolons in TypeScript", "relevance": 0.8})
    report = md.extract(_chat("We use Drizzle, not Prisma. And stop summarising, I read the "
                              "diff. No semicolons please.", "Understood."), session_id="s1")
    assert report.method == "llm" and len(report.stored) == 3 and not report.skipped
    feedback = next(i.memory for i in report.items if i.type == "feedback")
    assert feedback is not None and feedback.source == "extracted"
    assert "**Why:** The user reads the diff." in feedback.body
    assert "**How to apply:** End right after the last change." in feedback.body
    sent = scripted_llm.requests[0].body
    system = sent["messages"][0]["content"]
    assert "Do NOT extract" in system and "- policy:" in system and "today is 20" in system
    assert "stop summarising" in sent["messages"][-1]["content"]
    schema = sent["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["memories"]["items"]["properties"]["content"]["maxLength"] == 100


def test_a_malformed_or_oversized_reply_stores_nothing_broken(
        md: Memdir, scripted_llm: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_llm(monkeypatch, scripted_llm.url + "/v1")
    good = {"type": "fact", "content": "Staging resets every night at 02:00 UTC",
            "relevance": 0.6}
    bad: list[Any] = [
        "not an object",
        {"type": "gossip", "content": "The intern likes tea", "relevance": 0.5},
        {"type": "fact", "content": "x" * 101, "relevance": 0.5},
        {"type": "fact", "content": "Relevance out of range", "relevance": 7},
        {"type": "fact", "content": "Relevance not a number", "relevance": "high"},
        {"type": "fact", "content": "   ", "relevance": 0.5},
        {"type": "summary", "content": "System types are not for the model", "relevance": 0.5},
    ]
    filler = [{"type": "fact", "content": f"Filler fact number {n}", "relevance": 0.5}
              for n in range(8)]
    _reply(scripted_llm, good, *bad, *filler)  # 16 items: over the cap of 10
    report = md.extract(_chat("long chat", "ok"), session_id="s2")
    stored = [i.memory for i in report.stored]
    assert [m.body for m in stored if m] == [good["content"], "Filler fact number 0",
                                             "Filler fact number 1"]
    reasons = " | ".join(i.reason for i in report.skipped)
    for expected in ("not an object", "unknown type 'gossip'", "over 100 characters",
                     "not a number in 0-1", "no content", "unknown type 'summary'",
                     "more than 10 items"):
        assert expected in reasons
    assert len(md.list()) == 3


@pytest.mark.parametrize("reply", ["this is not json", json.dumps({"memories": "none"}),
                                   json.dumps([1, 2, 3])])
def test_a_reply_that_is_not_the_schema_falls_back_to_rules(
        md: Memdir, scripted_llm: ScriptedServer, monkeypatch: pytest.MonkeyPatch,
        reply: str) -> None:
    _use_llm(monkeypatch, scripted_llm.url + "/v1")
    scripted_llm.reply_openai(reply)
    report = md.extract(_chat("Let me look at the logs first", "Sure."), session_id="s3")
    assert report.method == "rules" and report.stored == []
    assert len(scripted_llm.requests) == 1


SECRETS = [
    "AWS key AKIAIOSFODNN7EXAMPL3 goes in the deploy env",
    "GitHub token ghp_abcdefghijklmnopqrstuvwxyz0123456789 for CI",
    "OpenAI key sk-proj-abcdefghijklmnopqrstuvwxyz123456 for evals",
    "Anthropic key sk-ant-api03-abcdefghijklmnopqrstuvwx is shared",
    "JWT eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N works",
    "-----BEGIN RSA PRIVATE KEY----- is in the vault",
    "DB is postgres://admin:hunter22@db.internal:5432/app",
    "the password=Sup3rSecret! for the admin panel",
]


def test_secrets_from_the_llm_are_refused(md: Memdir, scripted_llm: ScriptedServer,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _use_llm(monkeypatch, scripted_llm.url + "/v1")
    _reply(scripted_llm, *[{"type": "fact", "content": s[:100], "relevance": 0.9}
                           for s in SECRETS])
    report = md.extract(_chat("here are our credentials", "noted"), session_id="s4")
    assert report.stored == [] and len(report.skipped) == len(SECRETS)
    assert all("secret" in i.reason for i in report.skipped)
    assert md.list(status="all") == []
    for path in md.directory("project").path.glob("*.md"):
        assert "AKIA" not in path.read_text()


def test_duplicates_reinforce_and_near_duplicates_are_flagged(
        md: Memdir, scripted_llm: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    existing = md.store("Deploys go through ArgoCD, never kubectl apply", type="decision")
    _use_llm(monkeypatch, scripted_llm.url + "/v1")
    _reply(scripted_llm,
           {"type": "decision", "content": "deploys go through argocd,  never kubectl apply",
            "relevance": 0.8},
           {"type": "decision", "content": "Deploys go through ArgoCD and never kubectl",
            "relevance": 0.8})
    report = md.extract(_chat("how do we deploy?", "ArgoCD."), session_id="s5")
    actions = [i.action for i in report.items]
    assert actions == ["reinforced", "stored"]
    assert md.get(existing.id).reinforced == 1
    assert report.items[1].near_duplicates == (existing.file,)


def test_each_message_of_a_session_is_extracted_once(
        md: Memdir, scripted_llm: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_llm(monkeypatch, scripted_llm.url + "/v1")
    chat = _chat("We deploy on Tuesdays only", "Noted.")
    dry = md.extract(chat, session_id="s6", dry_run=True, llm=False)
    assert dry.dry_run and dry.messages == 2
    _reply(scripted_llm, {"type": "policy", "content": "Deploys happen on Tuesdays only",
                          "relevance": 0.9})
    first = md.extract(chat, session_id="s6")
    assert first.messages == 2 and len(first.stored) == 1
    again = md.extract(chat, session_id="s6")  # the Stop hook fires again: nothing new
    assert again.messages == 0 and again.items == ()
    longer = md.extract([*chat, *_chat("Also: staging is frozen in December", "OK")],
                        session_id="s6", llm=False)
    assert longer.messages == 2
    assert len(scripted_llm.requests) == 1


def test_dry_run_writes_nothing(md: Memdir, scripted_llm: ScriptedServer,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    _use_llm(monkeypatch, scripted_llm.url + "/v1")
    _reply(scripted_llm, {"type": "fact", "content": "CI runs on self-hosted runners",
                          "relevance": 0.7})
    report = md.extract(_chat("our CI is self-hosted", "ok"), session_id="s7", dry_run=True)
    assert [i.action for i in report.items] == ["would-store"]
    assert md.list() == [] and not list(md.directory("project").path.glob("*_*.md"))
    _reply(scripted_llm, {"type": "fact", "content": "CI runs on self-hosted runners",
                          "relevance": 0.7})
    assert len(md.extract(_chat("our CI is self-hosted", "ok"), session_id="s7").stored) == 1


def test_ranges_the_agent_already_saved_are_skipped(md: Memdir, scripted_llm: ScriptedServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    memory_file = str(md.directory("project").path / "preference_pnpm.md")
    messages = [
        {"role": "user", "content": "Remember that I prefer pnpm"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Write",
             "input": {"file_path": memory_file, "content": "---\nname: pnpm\n---\npnpm"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "ok"}]},
        {"role": "assistant", "content": "Saved."},
        {"role": "user", "content": "Now fix the flaky billing test"},
    ]
    _use_llm(monkeypatch, scripted_llm.url + "/v1")
    scripted_llm.reply_openai(json.dumps({"memories": []}))
    report = md.extract(messages, session_id="s8")
    assert report.agent_wrote_through == 1
    sent = scripted_llm.requests[0].body["messages"][-1]["content"]
    assert "fix the flaky billing test" in sent and "I prefer pnpm" not in sent


def test_cli_extract(cli: CLI, tmp_path: Path, scripted_llm: ScriptedServer,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    _use_llm(monkeypatch, scripted_llm.url + "/v1")
    _reply(scripted_llm, {"type": "decision", "content": "Chose Caddy over Nginx for TLS",
                          "relevance": 0.9})
    transcript = tmp_path / "chat.json"
    transcript.write_text(json.dumps(_chat("we went with caddy for tls", "ok")))
    data = cli_json(cli("extract", "--transcript", str(transcript), "--session", "c1",
                        "--json"))
    assert isinstance(data, dict) and data["method"] == "llm"
    assert [i["action"] for i in data["items"]] == ["stored"]
    text = cli("extract", "--transcript", str(transcript), "--session", "c2", "--dry-run",
               "--no-llm", check=True).stdout
    assert text.startswith("would store 0") and "method: rules" in text
    missing = cli("extract", "--transcript", str(tmp_path / "nope.jsonl"))
    assert missing.returncode != 0 and "hint:" in missing.stderr


@pytest.mark.llm
def test_extraction_against_the_real_local_model(md: Memdir, local_llm: LLMSettings,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _use_llm(monkeypatch, local_llm.base_url, local_llm.model)
    (md.home / "config.toml").parent.mkdir(parents=True, exist_ok=True)
    (md.home / "config.toml").write_text("[llm]\ntimeout = 60\n")
    report = md.extract(SESSION, session_id="real")
    # A 135M model's judgement is not asserted; whatever it returned was checked, and what
    # was stored is a valid memory of a known type within the limits.
    assert report.method in ("llm", "rules")
    tax = md.directory("project").taxonomy
    for item in report.stored:
        assert item.memory is not None and tax.lookup(item.memory.type) is not None
        assert len(item.memory.body.split("\n")[0]) <= 100
    assert md.stats().to_dict()["llm"]["calls_today"] == 1


# -- indexed sessions -------------------------------------------------------------------------

def test_index_session_makes_what_was_said_searchable(md: Memdir) -> None:
    result = md.index_session(SESSION)
    assert result.session_id == "5c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f" and result.chunks >= 1
    assert md.search("due date test", sources=("memories",)) == []
    hits = md.search("due date test", sources=("memories", "sessions"))
    assert hits and hits[0].session is not None
    ref = hits[0].session
    assert ref.session_id == result.session_id and ref.first_message <= ref.last_message
    assert hits[0].source.startswith(f"session {result.session_id} messages ")
    assert hits[0].to_dict()["session"]["transcript"] == str(SESSION)
    # Never injected.
    assert md.context(budget_tokens=4000).items == ()


def test_reindexing_a_session_replaces_its_chunks(md: Memdir) -> None:
    md.index_session(_chat("the quokka migration failed twice", "ok"), "sx")
    assert md.search("quokka", sources=("sessions",))
    md.index_session(_chat("the wombat migration succeeded", "great"), "sx")
    assert md.search("quokka", sources=("sessions",)) == []
    assert len(md.search("wombat", sources=("sessions",))) == 1


def test_session_chunks_leave_out_secrets_and_tool_output(md: Memdir) -> None:
    messages = [
        {"role": "user", "content": "the token is ghp_abcdefghijklmnopqrstuvwxyz0123456789 ok"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "Bash", "input": {"command": "cat .env"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                      "content": "ZEBRA_SECRET=zebra-value"}]},
        {"role": "user", "content": "thanks <private>my home address</private> bye"},
    ]
    md.index_session(messages, "sy")
    rows = md.index.conn.execute("SELECT text FROM session_chunks").fetchall()
    text = "\n".join(r[0] for r in rows)
    assert "ghp_" not in text and "[redacted: a GitHub token]" in text
    assert "zebra" not in text.lower() and "home address" not in text
    assert md.search("zebra", sources=("sessions",)) == []


def test_cli_index_session_and_search_sessions(cli: CLI) -> None:
    out = cli("index-session", str(SESSION), check=True).stdout
    assert out.startswith("indexed session 5c1d2e3f")
    data = cli_json(cli("search", "due date", "--sessions", "--json"))
    assert isinstance(data, list) and data[0]["session"]["session_id"].startswith("5c1d2e3f")
    bad = cli("search", "x", "--sessions", "--json")
    assert bad.returncode == 0


# -- episodes and procedures ------------------------------------------------------------------

def test_episodes_record_the_outcome(md: Memdir) -> None:
    memory = md.episode("Migrated orders to partitioned tables", outcome="success",
                        tags=["db"])
    assert memory.type == "episode" and memory.meta["outcome"] == "success"
    assert memory.body.endswith("**Outcome:** success") and memory.tags == ("db",)


@pytest.mark.parametrize(("preset", "episode", "procedure"), [
    ("memdir", "episode", "procedure"), ("claude-code", "project", "reference"),
    ("cognitive", "fact", "workflow"), ("records", "incidents", "procedures"),
    ("cognova", "summary", "pattern")])
def test_every_preset_can_record_both(home: Path, repo: Path, preset: str, episode: str,
                                      procedure: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'taxonomy = "{preset}"\n')
    with Memdir(home=home, project=repo) as md:
        assert md.episode("Rolled back release 4.2", outcome="failure").type == episode
        assert md.procedure("Rollback", ["revert", "redeploy"]).type == procedure


def test_procedures_keep_their_counts_and_lead_layer_c(md: Memdir) -> None:
    fresh = md.procedure("Hotfix", ["branch from the tag", "patch", "tag"])
    release = md.procedure("Release", ["bump", "tag", "push"])
    md.procedure_run("release")
    md.procedure_run("Release", success=False)
    updated = md.procedure("Release", ["bump", "tag", "push", "publish"])
    assert updated.id == release.id and updated.body.endswith("4. publish")
    assert updated.meta["success_count"] == 1 and updated.meta["failure_count"] == 1
    c = [i.memory.id for i in md.context(budget_tokens=4000).items if i.layer == "C"]
    assert c == [release.id, fresh.id]
    with pytest.raises(Exception, match="no procedure named"):
        md.procedure_run("Nonexistent")


def test_cli_episode_and_procedure(cli: CLI) -> None:
    out = cli("episode", "Rotated the TLS certificates", "--outcome", "success",
              check=True).stdout
    assert out.startswith("recorded episode")
    cli("procedure", "Release", "--step", "bump", "--step", "tag", check=True)
    data = cli_json(cli("procedure", "Release", "--success", "--json"))
    assert isinstance(data, dict) and data["meta"]["success_count"] == 1
    nothing = cli("procedure", "Release")
    assert nothing.returncode == 2 and "--step" in nothing.stderr


# -- onboarding -------------------------------------------------------------------------------

def test_onboarding_until_the_user_has_memories(md: Memdir) -> None:
    text = md.onboarding()
    assert text is not None and "role" in text and "memdir store --scope user" in text
    assert "First session" in md.context().text
    md.store("Deploys go through ArgoCD", type="decision")  # any memory at all
    assert md.onboarding() is None and "First session" not in md.context().text


def test_user_profile_section_never_clobbers_claude_md(md: Memdir, tmp_path: Path) -> None:
    claude = tmp_path / "CLAUDE.md"
    claude.write_text("# Project\n\nRun `make test` before pushing.\n")
    md.store("Backend engineer on the payments team", type="user", scope="user")
    md.write_user_profile(claude)
    first = claude.read_text()
    assert first.startswith("# Project\n\nRun `make test` before pushing.\n")
    assert "## User Profile" in first and "- Backend engineer on the payments team" in first
    claude.write_text(first + "\n## Notes\nhand-written\n")
    md.store("Prefers small pull requests", type="preference", scope="user")
    md.write_user_profile(claude)
    second = claude.read_text()
    assert second.count("## User Profile") == 1 and "- Prefers small pull requests" in second
    assert second.endswith("## Notes\nhand-written\n") and "make test" in second


def test_cli_onboard(cli: CLI, repo: Path) -> None:
    out = cli("onboard", check=True).stdout
    assert "First session" in out
    cli("store", "--scope", "user", "--type", "user", "Staff engineer", check=True)
    data = cli_json(cli("onboard", "--claude-md", "CLAUDE.md", "--json"))
    assert isinstance(data, dict) and data["needed"] is False and data["user_memories"] == 1
    assert "- Staff engineer" in (repo / "CLAUDE.md").read_text()
