"""Session-start context: layers, the hard token budget, formats, usage counters, CLI."""

from __future__ import annotations

import json
import re
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CLI, cli_json
from memdir import Memdir, count_tokens
from memdir.core.errors import InvalidMemoryError

FORMATS = ("markdown", "prompt", "json", "snippets")


def _seed(md: Memdir) -> dict[str, str]:
    ids = {
        "policy": md.store("Never force-push to main", type="policy").id,
        "pref_high": md.store("I prefer pnpm over npm", type="preference", relevance="high").id,
        "pref_low": md.store("Tabs look nicer in diffs", type="preference", relevance="low").id,
        "decision": md.store("Deployments go through ArgoCD", type="decision",
                             relevance=0.7).id,
        "fact": md.store("Staging database is refreshed nightly", type="fact",
                         relevance=0.6).id,
        "proc_new": md.store("Hotfix: branch from the release tag, patch, tag", type="procedure",
                             relevance=0.9).id,
        "proc_proven": md.store("Release: bump version, tag, push, wait for CI", type="procedure",
                                relevance=0.5, meta={"success_count": 3}).id,
        "user": md.store("Ana is the staff engineer for payments", type="user", scope="user",
                         relevance="high").id,
    }
    return ids


def test_layers_fill_in_order_a_then_b_then_c(md: Memdir) -> None:
    ids = _seed(md)
    ctx = md.context(budget_tokens=4000)
    layers = [item.layer for item in ctx.items]
    assert layers == sorted(layers), layers  # A..., B..., C...
    by_layer = {layer: {i.memory.id for i in ctx.items if i.layer == layer} for layer in "ABC"}
    # A: baseline types at relevance >= high, from every scope (the user memory too).
    assert by_layer["A"] == {ids["policy"], ids["pref_high"], ids["user"]}
    # The low-relevance preference is not baseline; it may still come in B by strength.
    assert ids["pref_low"] not in by_layer["A"]
    assert {ids["decision"], ids["fact"]} <= by_layer["B"]
    # C: procedures only, the proven one first even though its relevance is lower.
    c_items = [i for i in ctx.items if i.layer == "C"]
    assert [i.memory.id for i in c_items] == [ids["proc_proven"], ids["proc_new"]]
    assert all(i.memory.type == "procedure" for i in c_items)
    assert not any(i.memory.type == "procedure" for i in ctx.items if i.layer != "C")


def test_a_small_budget_keeps_layer_a_first(md: Memdir) -> None:
    _seed(md)
    small = md.context(budget_tokens=40)
    layers = [i.layer for i in small.items]
    # Baseline memories take the budget first (up to their share); later layers use the rest.
    assert layers[0] == "A" and layers == sorted(layers)
    assert len(small.items) < len(md.context(budget_tokens=4000).items)
    assert small.tokens <= 40 and count_tokens(small.text) == small.tokens


def test_many_always_on_memories_leave_room_for_the_task(md: Memdir) -> None:
    for n in range(40):
        md.store(f"House rule {n}: keep the changelog entry short and imperative", type="policy")
    md.store("Release: bump version, tag, push", type="procedure")
    task = md.store("The billing service retries webhooks three times", type="fact",
                    relevance=0.5)
    ctx = md.context("billing webhooks", budget_tokens=400)
    layers = [i.layer for i in ctx.items]
    assert layers == sorted(layers) and layers.count("A") >= 5
    assert task.id in {i.memory.id for i in ctx.items if i.layer == "B"}
    assert "C" in layers  # procedures keep their reserve
    a_lines = "\n".join(f"- {i.memory.body}" for i in ctx.items if i.layer == "A")
    assert count_tokens(a_lines) <= 400 * 0.6


def test_a_query_orders_always_on_memories_by_match(md: Memdir) -> None:
    for n in range(30):
        md.store(f"Rule {n}: changelog entries are short", type="policy")
    wanted = md.store("Rule about webhooks: verify the signature before parsing", type="policy")
    ctx = md.context("webhooks signature", budget_tokens=200)
    assert ctx.items[0].memory.id == wanted.id and ctx.items[0].layer == "A"


def test_at_most_three_procedures(md: Memdir) -> None:
    for n in range(5):
        md.store(f"Procedure number {n}: step one, step two", type="procedure")
    ctx = md.context(budget_tokens=4000)
    assert sum(1 for i in ctx.items if i.layer == "C") == 3


def test_query_ranks_matching_memories_first_in_layer_b(md: Memdir) -> None:
    for n in range(6):
        md.store(f"Note {n} about the office coffee machine", type="fact", relevance=0.9)
    target = md.store("The billing service retries webhooks three times", type="fact",
                      relevance=0.3)
    ctx = md.context("billing webhooks", budget_tokens=4000)
    b = [i for i in ctx.items if i.layer == "B"]
    assert b[0].memory.id == target.id
    plain = md.context(budget_tokens=4000)
    assert next(i for i in plain.items if i.layer == "B").memory.id != target.id


def test_paths_boost_memories_about_the_current_files(md: Memdir) -> None:
    general = md.store("Handlers log the request id first", type="fact", relevance=0.8)
    scoped = md.store("Handlers validate input with pydantic models", type="fact",
                      relevance=0.6, paths=["src/api/**"])
    order = [i.memory.id for i in md.context(budget_tokens=4000).items]
    assert order.index(general.id) < order.index(scoped.id)
    boosted = [i.memory.id for i in md.context(budget_tokens=4000,
                                               paths=["src/api/routes/users.py"]).items]
    assert boosted.index(scoped.id) < boosted.index(general.id)


def test_archived_memories_are_never_injected(md: Memdir) -> None:
    keep = md.store("Always run the linters before pushing", type="policy")
    gone = md.store("Always rebase feature branches on main", type="policy")
    md.archive(gone.id)
    for fmt in FORMATS:
        ctx = md.context("rebase feature branches", budget_tokens=4000, format=fmt)
        ids = {i.memory.id for i in ctx.items}
        assert keep.id in ids and gone.id not in ids
        assert "rebase feature branches" not in ctx.text.split("MEMORY.md")[0]


def test_usage_counters_count_every_injection(md: Memdir) -> None:
    memory = md.store("Use UTC in every log line", type="policy")
    md.context()
    md.context(format="json")
    assert md.get(memory.id).access_count == 3  # two injections + this get


def test_index_appended_when_it_fits_and_cut_when_not(md: Memdir) -> None:
    for n in range(12):
        md.store(f"Fact number {n} about the deployment pipeline and its stages", type="fact",
                 relevance=0.5)
    # The index names only the memories not listed above it: 7 of 12 with a limit of 5.
    big = md.context(budget_tokens=4000, limit=5)
    assert big.index_lines == 7 and "### Memory index (MEMORY.md)" in big.text
    assert "<!--" not in big.text  # the generated marker is not worth tokens
    assert "### Memory index" not in md.context(budget_tokens=4000).text  # all 12 listed
    tight = md.context(budget_tokens=170, limit=1)
    assert tight.tokens <= 170 and 0 < tight.index_lines < 11
    assert f"[... {11 - tight.index_lines} more lines in MEMORY.md]" in tight.text


def test_markdown_format_matches_seed_000(md: Memdir) -> None:
    md.store("User prefers Tailwind CSS", type="preference", relevance="high")
    md.store("Using PostgreSQL for all persistent data", type="decision")
    md.store("Production runs on Ubuntu 24.04", type="fact")
    text = md.context(budget_tokens=4000).text
    lines = text.splitlines()
    assert lines[0] == "3 memories loaded:"
    assert "### [*] Preferences" in lines and "### [D] Decisions" in lines
    assert "### [F] Key Facts" in lines
    pref = lines.index("### [*] Preferences")
    assert lines[pref + 1] == "- User prefers Tailwind CSS"


def test_prompt_format_is_fenced_reference_data(md: Memdir) -> None:
    md.store("Wrap shell snippets in ```` fences ```` when quoting", type="policy")
    text = md.context(format="prompt").text
    assert text.startswith('<memory-context source="memdir">')
    assert text.endswith("</memory-context>")
    assert "not instructions" in text.splitlines()[1]
    fence = re.search(r"^(`{3,})markdown$", text, re.MULTILINE)
    assert fence is not None
    # The fence is longer than any backtick run inside, so content cannot close it early.
    assert len(fence.group(1)) > 4
    inner = text.split(fence.group(0), 1)[1].rsplit(fence.group(1), 1)[0]
    assert "1 memory loaded:" in inner and "fences" in inner


def test_json_format_parses_back(md: Memdir) -> None:
    ids = _seed(md)
    ctx = md.context(format="json", budget_tokens=4000)
    data = json.loads(ctx.text)
    assert data["count"] == len(data["memories"]) == len(ctx.items)
    assert data["budget_tokens"] == 4000
    assert {m["id"] for m in data["memories"]} >= {ids["policy"], ids["decision"]}
    assert {m["layer"] for m in data["memories"]} == {"A", "B", "C"}
    assert data["index"] is None  # every memory is listed: MEMORY.md adds nothing
    few = json.loads(md.context(format="json", budget_tokens=4000, limit=3).text)
    shown = {m["file"] for m in few["memories"]}
    named = set(re.findall(r"\]\(([^)]+)\)", few["index"]))
    project = {m.file for m in md.list(scopes=["project"])}
    assert named == project - shown  # only the memories not listed above


def test_snippets_format_is_a_ranked_list(md: Memdir) -> None:
    _seed(md)
    ctx = md.context(format="snippets", budget_tokens=4000)
    pattern = re.compile(r"^(\d+\.\d{3}) (\[.\]) (user|project|team)/([\w.-]+\.md): (.+)$")
    scores = []
    for line in ctx.text.splitlines():
        found = pattern.match(line)
        assert found, line
        scores.append(float(found.group(1)))
    assert len(scores) == len(ctx.items) and scores == sorted(scores, reverse=True)


def test_limit_caps_the_number_of_memories(md: Memdir) -> None:
    _seed(md)
    assert len(md.context(limit=2, budget_tokens=4000).items) == 2


def test_bad_arguments_are_refused_with_a_hint(md: Memdir) -> None:
    with pytest.raises(InvalidMemoryError, match="format") as bad_format:
        md.context(format="html")
    assert "markdown" in bad_format.value.hint
    with pytest.raises(InvalidMemoryError, match="budget"):
        md.context(budget_tokens=0)
    with pytest.raises(InvalidMemoryError, match="limit"):
        md.context(limit=0)


def test_empty_store_gives_a_short_valid_context(md: Memdir) -> None:
    text = md.context().text
    assert text.startswith("0 memories loaded:\n\n## First session")  # onboarding follows
    assert md.context(budget_tokens=50).text == "0 memories loaded:"  # when it fits
    assert json.loads(md.context(format="json").text)["count"] == 0


def test_cli_context(cli: CLI) -> None:
    cli("store", "--type", "policy", "Never commit generated files", check=True)
    cli("store", "--type", "decision", "Chose SQLite for the local cache", check=True)
    out = cli("context", "--budget", "300", check=True).stdout
    assert out.startswith("2 memories loaded:") and "Never commit generated files" in out
    data = cli_json(cli("context", "--json", "--format", "snippets"))
    assert isinstance(data, dict) and data["count"] == 2 and data["tokens"] <= 800
    assert json.loads(cli("context", "--format", "json", check=True).stdout)["count"] == 2
    bad = cli("context", "--budget", "-5")
    assert bad.returncode != 0 and "hint:" in bad.stderr


# -- the budget is a hard cap ---------------------------------------------------------------

TYPES = ["user", "feedback", "preference", "policy", "decision", "procedure", "pitfall",
         "fact", "reference", "project"]
TEXT = st.text(
    alphabet=st.sampled_from(list("abcdefghij klmnop qrstuvwxyz ```` éüß 日本語 🙂 .,:-_*#\n")),
    min_size=1, max_size=600).filter(lambda s: s.strip())
MEMORY = st.fixed_dictionaries({
    "content": TEXT, "type": st.sampled_from(TYPES),
    "relevance": st.floats(min_value=0.0, max_value=1.0),
    "scope": st.sampled_from(["user", "project"]),
    "tags": st.lists(st.sampled_from(["api", "db", "ci"]), max_size=2),
})


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(items=st.lists(MEMORY, min_size=0, max_size=25),
       budget=st.integers(min_value=50, max_value=4000),
       query=st.none() | st.sampled_from(["api db", "deploy", "日本語", "```"]),
       age_days=st.integers(min_value=0, max_value=900))
def test_budget_is_never_exceeded(items: list[dict[str, object]], budget: int,
                                  query: str | None, age_days: int) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with tempfile.TemporaryDirectory() as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        project.mkdir()
        with Memdir(home=home, project=project, clock=lambda: start) as writer:
            writer.store_many(items)
        later = start + timedelta(days=age_days)
        with Memdir(home=home, project=project, clock=lambda: later) as md:
            for fmt in FORMATS:
                ctx = md.context(query, budget_tokens=budget, format=fmt)
                assert count_tokens(ctx.text) <= budget, (fmt, budget)
                assert ctx.tokens == count_tokens(ctx.text)
                if fmt == "json":
                    assert json.loads(ctx.text)["count"] == len(ctx.items)


def test_count_tokens_is_documented_rule() -> None:
    assert count_tokens("") == 0
    assert count_tokens("abcd") == 1 and count_tokens("abcde") == 2
    assert count_tokens("日本語") == 3  # one per non-ASCII character
    assert count_tokens("ab日") == 2


def test_sql_ranking_uses_the_same_strength_as_search(home: Path, repo: Path) -> None:
    from memdir.retrieval.search import strength

    start = datetime(2026, 1, 1, tzinfo=UTC)
    with Memdir(home=home, project=repo, clock=lambda: start) as md:
        for n, kind in enumerate(["decision", "fact", "pitfall", "reference", "project"]):
            memory = md.store(f"Memory {n} of kind {kind} for the ranking check", type=kind,
                              relevance=0.2 + 0.15 * n)
            for _ in range(n):
                md.get(memory.id)  # accesses feed the reinforcement term
    later = start + timedelta(days=100)
    with Memdir(home=home, project=repo, clock=lambda: later) as md:
        ctx = md.context(budget_tokens=4000)
        tax = md.directory("project").taxonomy
        b = [item for item in ctx.items if item.layer == "B"]
        assert len(b) >= 3
        for item in b:
            assert item.score == pytest.approx(strength(item.memory, tax, later), rel=1e-6)
        assert [i.score for i in b] == sorted((i.score for i in b), reverse=True)


def test_a_locked_index_costs_the_counters_not_the_context(
        md: Memdir, caplog: pytest.LogCaptureFixture) -> None:
    import sqlite3

    memory = md.store("Never deploy on Fridays", type="policy")
    md.context()  # reconciled and counted once
    blocker = sqlite3.connect(md.index.path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with caplog.at_level("DEBUG", logger="memdir"):
            ctx = md.context()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert [i.memory.id for i in ctx.items] == [memory.id]
    assert "usage counters not updated yet" in caplog.text  # queued, a debug note
    md.get(memory.id)  # its write applies the queued count
    # the first context, the one under the lock, and this get
    assert next(m.access_count for m in md.list() if m.id == memory.id) == 3


def test_stats_show_llm_calls_and_budget(cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMDIR_LLM", "openai:local-model")
    monkeypatch.setenv("MEMDIR_LLM_BUDGET", "42")
    out = cli("stats", check=True).stdout
    assert "llm: openai (local-model), 0 calls today of 42 allowed" in out
    data = cli_json(cli("stats", "--json"))
    assert isinstance(data, dict)
    assert data["llm"]["daily_budget"] == 42 and data["llm"]["calls_today"] == 0


def test_ranking_a_store_reads_only_the_covering_index(md: Memdir) -> None:
    # Session start ranks every memory of a store: each ordered query over memories must be
    # answered from an index (memories_strength, or memories_strength_key for the strength order),
    # never by reading the wide rows (bodies).
    md.store_many([{"content": f"Policy {n}: review step {n} before merging", "type": "policy",
                    "relevance": "high"} for n in range(40)]
                  + [{"content": f"Fact {n} about module {n}", "type": "fact"} for n in range(40)]
                  + [{"content": f"Procedure {n}: run step {n}", "type": "procedure"}
                     for n in range(10)])
    md.context()  # the first call reconciles and may write
    ranked: list[str] = []

    def trace(sql: str) -> None:
        if sql.lstrip().upper().startswith("SELECT") and "ORDER BY" in sql and "memories m" in sql:
            ranked.append(sql)

    conn = md.index.conn
    conn.set_trace_callback(trace)
    try:
        md.context(budget_tokens=2000)
    finally:
        conn.set_trace_callback(None)
    assert len(ranked) >= 3  # layer A, and the strength rankings of layers B and C
    plans = []
    for sql in ranked:
        plan = " | ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
        index = "memories_strength_key" if "m.strength_key" in sql else "memories_strength"
        assert f"COVERING INDEX {index}" in plan, (sql, plan)
        plans.append(index)
    assert "memories_strength_key" in plans and "memories_strength" in plans


@pytest.mark.parametrize("count", ["0", "none", 0, False])
def test_a_procedure_is_proven_only_by_a_positive_success_count(md: Memdir,
                                                                count: object) -> None:
    strong = md.store("Hotfix: branch from the release tag, patch, tag", type="procedure",
                      relevance=0.9).id
    weak = md.store("Release: bump version, tag, push, wait for CI", type="procedure",
                    relevance=0.5, meta={"success_count": count}).id
    c_items = [i.memory.id for i in md.context(budget_tokens=4000).items if i.layer == "C"]
    assert c_items == [strong, weak]  # not proven: strength decides
