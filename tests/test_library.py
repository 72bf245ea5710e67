"""The library API end to end: store, search, get, update, reclassify, archive, restore,
delete, list, recent, stats, store_many, meta, dedup, usage counters, strength."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import CLI
from memdir import (
    InvalidMemoryError,
    Memdir,
    MemoryNotFoundError,
    SecretDetectedError,
    UnknownTypeError,
)
from memdir.core.markdown import parse


def test_store_writes_a_markdown_file_with_all_fields(md: Memdir) -> None:
    memory = md.store(
        "Don't mock the database in integration tests.\n\n**Why:** mocks diverged.",
        type="feedback", name="Testing policy",
        description="Integration tests must hit a real database, not mocks",
        tags=["testing", "database"], paths=["tests/**"], relevance="high",
        meta={"ticket": "QA-12", "owners": ["ana", "bo"]},
    )
    assert memory.path is not None and memory.path.name == "feedback_testing-policy.md"
    assert memory.path.parent == md.directory("project").path
    text = memory.path.read_text()
    assert text.startswith("---\nid: ")
    again = parse(text, stem=memory.path.stem, scope="project")
    assert again.replace(path=memory.path) == memory
    assert again.relevance == 0.8 and again.tags == ("testing", "database")
    assert again.paths == ("tests/**",) and again.source == "manual"
    assert memory.meta == {"ticket": "QA-12", "owners": ["ana", "bo"]}
    assert md.get(memory.id).meta == {"ticket": "QA-12", "owners": ["ana", "bo"]}


def test_manual_memories_default_to_relevance_point_nine(md: Memdir) -> None:
    assert md.store("Prod runs Ubuntu 24.04", type="fact").relevance == 0.9
    # A preset's own default wins (policy is critical in the default preset).
    assert md.store("Never commit to main", type="policy").relevance == 1.0


def test_unknown_type_lists_the_valid_ones(md: Memdir) -> None:
    with pytest.raises(UnknownTypeError) as info:
        md.store("x y", type="gossip")
    assert "decision" in info.value.hint and "procedure" in info.value.hint
    assert not list(md.directory("project").path.glob("*.md"))


def test_aliases_and_plurals_map_to_the_default_types(md: Memdir) -> None:
    assert md.store("Deploy: build, push, roll", type="workflow").type == "procedure"
    assert md.store("Auth is a separate service", type="architecture").type == "decision"
    assert md.store("Always run the linter", type="rule").type == "policy"
    assert md.store("CORS fixed by origin list", type="solution").type == "pitfall"
    assert md.store("We picked Caddy", type="Decisions").type == "decision"


def test_file_names_are_unique_on_collision(md: Memdir) -> None:
    a = md.store("first body", type="fact", name="Same name")
    b = md.store("second body", type="fact", name="Same name")
    assert a.path is not None and b.path is not None
    assert a.path.name == "fact_same-name.md" and b.path.name == "fact_same-name-2.md"
    assert a.id != b.id


def test_exact_duplicate_reinforces_instead_of_adding(md: Memdir) -> None:
    first = md.store("Use  pnpm, not npm", type="preference", tags=["tools"])
    second = md.store("use pnpm,\n not NPM", type="preference", tags=["js"])
    assert second.id == first.id and second.reinforced == 1
    assert second.tags == ("tools", "js")
    assert len(list(md.directory("project").path.glob("preference_*.md"))) == 1
    assert "reinforced: 1" in second.path.read_text()  # type: ignore[union-attr]


def test_private_spans_are_stripped_and_secrets_refused(md: Memdir) -> None:
    memory = md.store("Staging host is stage.internal <private>root pw hunter2</private>",
                      type="fact")
    assert "hunter2" not in memory.path.read_text()  # type: ignore[union-attr]
    with pytest.raises(SecretDetectedError) as info:
        md.store("token ghp_" + "a1B2" * 9, type="fact")
    assert "GitHub token" in info.value.message and "a1B2a1B2" not in str(info.value)
    with pytest.raises(InvalidMemoryError):
        md.store("<private>only secret</private>", type="fact")


def test_relative_dates_become_absolute(home: Path, repo: Path) -> None:
    fixed = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)  # a Monday
    with Memdir(home=home, project=repo, clock=lambda: fixed, sync_interval=0) as md:
        memory = md.store("Merge freeze after Thursday; release in 2 weeks", type="project")
    assert memory.body == ("Merge freeze after Thursday (2026-03-05); "
                           "release in 2 weeks (2026-03-16)")


def test_search_stems_ranks_and_filters(md: Memdir) -> None:
    deploy = md.store("Deployments go through ArgoCD", type="procedure", tags=["ops"])
    md.store("The cafeteria opens at nine", type="fact")
    old = md.store("Rollback deployments with argo rollback", type="pitfall", tags=["ops"])
    hits = md.search("deploy")
    assert {h.memory.id for h in hits} == {deploy.id, old.id}
    assert all(h.score > 0 and h.match > 0 and h.strength > 0 for h in hits)
    assert [h.memory.id for h in md.search("deploy", types=["pitfall"])] == [old.id]
    assert [h.memory.id for h in md.search("deploy", types=["workflow"])] == [deploy.id]
    assert md.search("deploy", tags=["nope"]) == []
    assert len(md.search("deploy", limit=1)) == 1
    assert md.search("deploy", scopes=["user"]) == []


def test_description_and_name_weigh_more_than_body(md: Memdir) -> None:
    body_only = md.store("misc notes that mention kubernetes once", type="fact",
                         name="Misc notes", description="Assorted notes")
    titled = md.store("see the runbook", type="fact", name="Kubernetes upgrades",
                      description="How kubernetes upgrades are rolled out")
    hits = md.search("kubernetes")
    assert [h.memory.id for h in hits] == [titled.id, body_only.id]


def test_search_updates_usage_counters(md: Memdir, home: Path) -> None:
    memory = md.store("Grafana dashboard lives at grafana.example.com/d/ops", type="reference")
    md.search("grafana")
    md.search("grafana dashboard")
    got = md.list()[0]
    assert got.id == memory.id and got.access_count == 2 and got.last_accessed is not None
    # Counters live in the index, never in the file (reads must not churn git diffs).
    assert "access" not in memory.path.read_text()  # type: ignore[union-attr]


def test_usage_update_failure_never_fails_the_read(md: Memdir, home: Path) -> None:
    md.store("Redis is the session cache", type="fact")
    blocker = sqlite3.connect(home / "index.sqlite", timeout=0)
    blocker.execute("BEGIN EXCLUSIVE")  # nobody else can write (or read in rollback mode)
    try:
        hits = md.search("redis", touch=True)
    finally:
        blocker.rollback()
        blocker.close()
    assert [h.memory.body for h in hits] == ["Redis is the session cache"]
    assert md.list()[0].access_count == 0  # the update really was blocked, and skipped


def test_archive_restore_delete(md: Memdir) -> None:
    memory = md.store("Old build uses make", type="fact")
    archived = md.archive(memory.id)
    assert archived.status == "archived" and "status: archived" in archived.path.read_text()  # type: ignore[union-attr]
    assert md.search("make") == [] and md.list() == []
    assert [h.memory.id for h in md.search("make", include_archived=True)] == [memory.id]
    assert [m.id for m in md.list(status="archived")] == [memory.id]
    assert md.restore(memory.id).status == "active"
    assert [h.memory.id for h in md.search("make")] == [memory.id]
    md.delete(memory.id)
    assert not memory.path.exists()  # type: ignore[union-attr]
    with pytest.raises(MemoryNotFoundError):
        md.get(memory.id)


def test_update_and_reinforce(md: Memdir) -> None:
    memory = md.store("CI runs on GitHub Actions", type="fact", tags=["ci"])
    updated = md.update(memory.id, content="CI runs on Buildkite", tags=["ci", "infra"],
                        reinforce=True, meta={"source_ticket": "OPS-1"})
    assert updated.id == memory.id and updated.path == memory.path
    assert updated.reinforced == 1 and updated.tags == ("ci", "infra")
    assert updated.meta == {"source_ticket": "OPS-1"}
    assert [h.memory.id for h in md.search("buildkite")] == [memory.id]
    assert md.search("actions") == []
    with pytest.raises(SecretDetectedError):
        md.update(memory.id, content="use key AKIAABCDEFGHIJKLMNOP")
    assert "Buildkite" in md.get(memory.id).body


def test_update_keeps_a_hand_edit_made_since_indexing(md: Memdir) -> None:
    memory = md.store("Staging is on fly.io", type="fact")
    assert memory.path is not None
    memory.path.write_text(memory.path.read_text().replace("fly.io", "render.com"))
    updated = md.update(memory.id, tags=["hosting"])
    assert "render.com" in updated.body


def test_reclassify_renames_the_file_and_keeps_id_and_usage(md: Memdir) -> None:
    memory = md.store("Release: tag, build, publish", type="fact", name="Release steps")
    md.search("release")
    moved = md.reclassify(memory.id, "procedure")
    assert moved.id == memory.id and moved.type == "procedure"
    assert moved.path is not None and moved.path.name == "procedure_release-steps.md"
    assert not memory.path.exists()  # type: ignore[union-attr]
    assert md.get(memory.id).access_count == 2  # one search + this get


def test_list_recent_and_path_filters(md: Memdir, home: Path, repo: Path) -> None:
    times = iter(datetime(2026, 1, d, tzinfo=UTC) for d in range(1, 10))
    with Memdir(home=home, project=repo, clock=lambda: next(times), sync_interval=0) as timed:
        a = timed.store("first thing", type="fact")
        b = timed.store("second thing", type="fact", paths=["tests/**", "*.toml"])
        c = timed.store("third thing", type="decision", tags=["db"])
    assert [m.id for m in md.recent(2)] == [c.id, b.id]
    assert [m.id for m in md.list(paths=["tests/unit/test_db.py"])] == [b.id]
    assert [m.id for m in md.list(paths=["pyproject.toml"])] == [b.id]
    assert md.list(paths=["src/app.py"]) == []
    assert [m.id for m in md.list(tags=["db"])] == [c.id]
    assert {m.id for m in md.list(types=["fact"])} == {a.id, b.id}


def test_store_many_is_one_batch(md: Memdir) -> None:
    items = [{"content": f"Service {n} listens on port {8000 + n}", "type": "fact",
              "tags": ["ports"]} for n in range(50)]
    items.append({"content": "Service 3 listens on port 8003", "type": "fact"})
    stored = md.store_many(items)
    assert len(stored) == 51 and len({m.id for m in stored}) == 50
    assert stored[-1].id == stored[3].id and stored[3].reinforced == 1
    assert md.stats().total == 50
    with pytest.raises(UnknownTypeError):
        md.store_many([{"content": "fine", "type": "fact"}, {"content": "bad", "type": "zzz"}])
    assert md.stats().total == 50  # validated before anything is written


def test_scopes_are_separate_directories(md: Memdir, home: Path) -> None:
    user = md.store("Prefers terse answers", type="preference", scope="user")
    team = md.store("Reviews need two approvals", type="policy", scope="team")
    assert user.path is not None and user.path.parent == home / "user"
    assert team.path is not None and team.path.parent == md.roots.worktree / ".memdir" / "team"
    assert {h.memory.scope for h in md.search("terse approvals")} == {"user", "team"}
    assert md.stats().by_scope == {"user": 1, "team": 1}


def test_strength_decays_with_a_90_day_half_life(md: Memdir) -> None:
    from memdir.retrieval.search import strength

    memory = md.store("Decays over time", type="fact", relevance=1.0)
    fresh = strength(memory, md.directory("project").taxonomy, memory.updated)
    later = strength(memory, md.directory("project").taxonomy,
                     memory.updated + timedelta(days=90))
    assert later == pytest.approx(fresh / 2)
    reinforced = memory.replace(reinforced=3)
    assert strength(reinforced, None, memory.updated) > strength(memory, None, memory.updated)


def test_an_old_exact_match_beats_a_fresh_weak_one(home: Path, repo: Path) -> None:
    old_time = datetime(2024, 1, 1, tzinfo=UTC)
    with Memdir(home=home, project=repo, clock=lambda: old_time, sync_interval=0) as past:
        exact = past.store("pgbouncer pool size is 40", type="fact", relevance=0.5,
                           name="pgbouncer pool size", description="pgbouncer pool size")
    with Memdir(home=home, project=repo, sync_interval=0) as md:
        md.store("notes mention a pool in passing among many other words about lunch "
                 "and coffee and meetings", type="fact", relevance=1.0)
        hits = md.search("pgbouncer pool size")
    assert hits[0].memory.id == exact.id


def test_memory_index_is_regenerated_on_every_change(md: Memdir) -> None:
    a = md.store("Use ruff for linting", type="preference", name="Linter")
    index = md.directory("project").path / "MEMORY.md"
    assert f"- [Linter]({a.file}) (preference) — Use ruff for linting" in index.read_text()
    md.archive(a.id)
    assert a.file not in index.read_text()
    md.restore(a.id)
    md.reclassify(a.id, "policy")
    assert "policy_linter.md" in index.read_text() and a.file not in index.read_text()


def test_a_write_blocked_too_long_is_a_clear_error(
        home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import memdir.core.index
    from memdir.core.errors import IndexBusyError

    with Memdir(home=home, project=repo) as md:
        md.store("warm up the index", type="fact")
    monkeypatch.setattr(memdir.core.index, "BUSY_TIMEOUT_MS", 200)
    blocker = sqlite3.connect(home / "index.sqlite")
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with Memdir(home=home, project=repo) as md, pytest.raises(IndexBusyError) as info:
            md.store("a new memory", type="fact")
    finally:
        blocker.rollback()
        blocker.close()
    assert "try again" in info.value.hint
    assert not list(md.directory("project").path.glob("fact_a-new-memory*.md"))


def test_import_keeps_ids_unique_per_directory(md: Memdir, tmp_path: Path) -> None:
    import json

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": "same1234", "type": "fact", "content": text}) + "\n"
                           for text in ("first imported fact", "second imported fact")))
    report = md.import_(src)
    ids = [m.id for m in report.imported]
    assert len(ids) == 2 and ids[0] == "same1234" and ids[1] != "same1234"
    assert [p.kind for p in md.doctor()] == []


def test_limits_out_of_range_are_refused_with_a_hint(md: Memdir) -> None:
    md.store("Deploys go out on Tuesdays", type="decision")
    for bad in (0, -1, 10**19):
        with pytest.raises(InvalidMemoryError, match="limit must be"):
            md.search("deploy", limit=bad)
        with pytest.raises(InvalidMemoryError, match="limit must be"):
            md.list(limit=bad)


def test_text_with_lone_surrogates_is_searched_not_crashed_on(md: Memdir) -> None:
    memory = md.store("Deploys go out on Tuesdays", type="decision", tags=["ops"])
    assert [h.memory.id for h in md.search("deploy \ud800", tags=["ops"])] == [memory.id]
    assert md.search("deploy", tags=["ops\udcff"]) == []
    assert [m.id for m in md.list(tags="ops")] == [memory.id]  # one tag, not o, p and s
    first = md.recall("when do deploys go out \ud800", "session\udcff")
    again = md.recall("when do deploys go out \ud800", "session\udcff")
    assert [m.id for m in first.memories] == [memory.id] and again.memories == []


def test_the_cli_refuses_a_huge_limit_and_survives_undecodable_arguments(cli: CLI) -> None:
    cli("store", "--type", "decision", "Deploys go out on Tuesdays", check=True)
    huge = cli("search", "deploy", "--limit", "10000000000000000000")
    assert huge.returncode != 0 and "limit must be" in huge.stderr
    assert "internal error" not in huge.stderr
    odd = cli("search", "deploy", "--tags", "\udcff")  # the byte 0xff on the command line
    assert odd.returncode == 0, odd.stderr
