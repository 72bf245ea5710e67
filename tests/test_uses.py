"""Strength stays bounded, a use weighs more than a show, and the stop hook tells which
injected memories the agent drew on; `memdir stats` reports it.

Real parts: a real home and git repository, real SQLite, real `memdir hook` subprocesses over
a Claude Code transcript fixture (tests/fixtures/transcripts/claude_code_resumed.jsonl),
replayed at the current time so that the injection falls between its two halves.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hook_support import hooks_log, run_memdir
from memdir import Memdir
from memdir.capture.transcript import parse_transcript
from memdir.retrieval.ranking import active_strengths
from memdir.retrieval.search import (
    strength,  # where it always was (memdir.core.strength re-exported)
)

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
RESUMED = FIXTURES / "claude_code_resumed.jsonl"
RESUMED_AT = datetime(2026, 11, 20, 9, 10, tzinfo=UTC)  # where the fixture was resumed
DEPLOY = "Deploys go through `make release` on staging-3, never kubectl apply by hand"
DATABASE = "Integration tests hit the real PostgreSQL on port 5433, never mocks"


# -- bounded strength --------------------------------------------------------------------------

def test_strength_stays_within_1_after_10000_accesses_and_100_reinforcements(
        md: Memdir) -> None:
    memory = md.store("Reviews need two approvals before merging", type="policy",
                      relevance=1.0)
    plain = md.store("Releases are tagged from main", type="policy", relevance=1.0)
    md.index.touch([memory] * 10_000)  # one read returning it 10,000 times: 10,000 accesses
    for _ in range(100):
        md.update(memory.id, reinforce=True)
    counted = next(m for m in md.list() if m.id == memory.id)
    assert counted.access_count == 10_000 and counted.reinforced == 100
    at = md._clock()
    tax = md.directory("project").taxonomy
    python = strength(counted, tax, at)
    sql = active_strengths(md.index.conn, [md.directory("project")], at)
    hit = next(h for h in md.search("reviews approvals", touch=False) if h.memory.id == memory.id)
    assert 0.99 < python <= 1.0 and max(sql) <= 1.0 and hit.strength <= 1.0
    assert python == pytest.approx(max(sql), rel=1e-9)
    # Saturating: ten thousand more accesses add (almost) nothing.
    assert strength(counted.replace(access_count=20_000), tax, at) - python < 1e-6
    assert strength(next(m for m in md.list() if m.id == plain.id), tax, at) <= 0.5


@given(shown=st.integers(-5, 10**9), uses=st.integers(-5, 10**9),
       weight=st.floats(0, 1), relevance=st.floats(0, 1), days=st.floats(-1e4, 1e6))
def test_strength_is_in_0_1_whatever_the_counts(shown: int, uses: int, weight: float,
                                                relevance: float, days: float) -> None:
    from memdir.core.strength import BASE, boost, strength_of

    assert 0.0 <= strength_of(weight, 90.0, relevance, days, shown, uses) <= 1.0
    assert BASE <= boost(shown, uses) <= 1.0


@given(shown=st.integers(0, 10**6), uses=st.integers(0, 10**6))
def test_a_show_adds_less_than_a_use_and_both_saturate(shown: int, uses: int) -> None:
    from memdir.core.strength import boost

    now_ = boost(shown, uses)
    more_shown, more_used = boost(shown + 1, uses), boost(shown, uses + 1)
    assert now_ <= more_shown <= more_used
    if more_used - now_ > 1e-12:  # near 1 a step falls below float resolution: both are 0
        assert more_shown - now_ < more_used - now_
    assert boost(shown + 2, uses) - more_shown <= more_shown - now_ + 1e-15  # diminishing
    assert boost(10**9, 0) < boost(0, 2)  # shows alone never reach what two uses give


def test_an_access_adds_less_strength_than_a_use_in_sql_and_python(md: Memdir,
                                                                   tmp_path: Path) -> None:
    shown = md.store("Feature flags live in LaunchDarkly", type="reference", relevance=0.8)
    used = md.store("Error budgets are tracked in Grafana", type="reference", relevance=0.8)
    before = strength(next(m for m in md.list() if m.id == shown.id), None, md._clock())
    md.get(shown.id)  # two accesses ...
    md.get(shown.id)
    md.recall("Where are error budgets tracked in Grafana?", "s-1")  # ... against one ...
    transcript = parse_transcript([{"role": "user", "content": "check it"},
                                   {"role": "assistant", "content": "Opening Grafana: the "
                                    "error budgets dashboard shows 98.2%."}])
    assert md.record_uses("s-1", transcript) == 1  # ... and a use
    memories = {m.id: m for m in md.list()}
    assert memories[used.id].used_count == 1 and memories[shown.id].used_count == 0
    at = md._clock() + timedelta(seconds=1)
    tax = md.directory("project").taxonomy
    gain_shown = strength(memories[shown.id], tax, at) - before
    gain_used = strength(memories[used.id], tax, at) - before
    assert 0 < gain_shown < gain_used
    # An explicit reinforcement counts as a use, exactly.
    base = memories[shown.id].replace(access_count=0, used_count=0)
    assert strength(base.replace(reinforced=1), tax, at) == strength(
        base.replace(used_count=1), tax, at) > strength(base.replace(access_count=1), tax, at)
    # The SQL twin (session-start ranking, stats) agrees with Python on every memory.
    sql = sorted(active_strengths(md.index.conn, [md.directory("project")], at))
    assert sql == pytest.approx(sorted(strength(m, tax, at) for m in memories.values()),
                                rel=1e-9)


# -- what counts as a use ----------------------------------------------------------------------

def _transcript(*turns: tuple[str, str]) -> object:
    return parse_transcript([{"role": role, "content": text} for role, text in turns])


def test_distinctive_terms_decide_and_echoes_of_the_user_do_not() -> None:
    from memdir.capture.uses import Injected, drawn_on

    deploy = Injected("deploy", DEPLOY)
    database = Injected("db", DATABASE)
    pnpm = Injected("pnpm", "User prefers pnpm over npm for JavaScript packages")
    memories = [deploy, database, pnpm]

    def used(*turns: tuple[str, str]) -> list[str]:
        return drawn_on(memories, _transcript(*turns))  # type: ignore[arg-type]

    # An identifier is enough; generic words ("run", "tests", "never") are not.
    assert used(("user", "go"), ("assistant", "Releasing to staging-3 now.")) == ["deploy"]
    assert used(("user", "go"), ("assistant", "I will run the tests and never skip them.")) == []
    # Two plain distinctive words are enough; one is not.
    assert used(("user", "go"), ("assistant", "The integration suite needs PostgreSQL.")) == ["db"]
    assert used(("user", "go"), ("assistant", "PostgreSQL is installed.")) == []
    # The agent running the program a memory names is a use.
    tool = parse_transcript([{"role": "user", "content": "install the deps"},
                             {"role": "assistant", "content": [
                                 {"type": "tool_use", "id": "t", "name": "Bash",
                                  "input": {"command": "cd web && pnpm install"}}]}])
    assert drawn_on(memories, tool) == ["pnpm"]
    # Echoing the user's own words is no use of a memory: the user typed them.
    assert used(("user", "Is staging-3 up and is PostgreSQL on 5433?"),
                ("assistant", "staging-3 is up; PostgreSQL answers on 5433.")) == []
    # A code span of the memory, said by the agent, counts.
    assert used(("user", "how?"), ("assistant", "Run make release from the root.")) == [
        "deploy"]
    # A code span counts with its words whole, not inside longer ones.
    fmt = [Injected("fmt", "Format with `zq fmt` first")]
    assert drawn_on(fmt, _transcript(("user", "go"), ("assistant", "Ran zq fmt."))) == ["fmt"]
    assert drawn_on(fmt, _transcript(("user", "go"), ("assistant", "Ran xzq fmtx."))) == []


def test_words_two_injected_memories_share_tell_neither_apart() -> None:
    from memdir.capture.uses import Injected, drawn_on

    a = Injected("a", "Grafana dashboards live in the observability repo")
    b = Injected("b", "Grafana alerts page the on-call engineer")
    said = _transcript(("user", "where?"), ("assistant", "Grafana dashboards are in the "
                                                         "observability repo."))
    assert drawn_on([a, b], said) == ["a"]  # "grafana" alone would have matched b too
    assert drawn_on([b], _transcript(("user", "x"), ("assistant", "Grafana alerts."))) == ["b"]


def test_only_what_the_agent_did_after_the_injection_counts() -> None:
    from memdir.capture.uses import Injected, drawn_on

    at = datetime(2026, 11, 20, 9, 5, tzinfo=UTC)
    transcript = parse_transcript(RESUMED)
    injected = [Injected("deploy", DEPLOY, at), Injected("db", DATABASE, at)]
    assert drawn_on(injected, transcript) == ["deploy"]
    # Injected before the whole conversation, the database memory was drawn on too.
    early = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    assert drawn_on([Injected("deploy", DEPLOY, early), Injected("db", DATABASE, early)],
                    transcript) == ["deploy", "db"]


# -- the stop hook, for real ----------------------------------------------------------------------

def _replayed(tmp_path: Path, start: datetime) -> Path:
    """The resumed-session fixture with its times moved so that its resumption is ``start``:
    what was said before lies before the injection, the rest after it."""
    shift = start - RESUMED_AT
    lines = []
    for line in RESUMED.read_text().splitlines():
        row = json.loads(line)
        when = datetime.fromisoformat(row["timestamp"].replace("Z", "+00:00")) + shift
        row["timestamp"] = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        lines.append(json.dumps(row))
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _usage(home: Path) -> dict[str, tuple[int, int]]:
    """(shown, used) of each memory, by its text."""
    conn = sqlite3.connect(home / "index.sqlite")
    try:
        return {row[0]: (row[1], row[2]) for row in conn.execute(
            "SELECT m.body, COALESCE(u.access_count, 0), COALESCE(u.used_count, 0) "
            "FROM memories m LEFT JOIN usage u ON u.dir = m.dir AND u.id = m.id")}
    finally:
        conn.close()


def test_the_stop_hook_marks_the_memory_the_agent_drew_on_as_used(home: Path, repo: Path,
                                                                  tmp_path: Path) -> None:
    run_memdir(["store", "--type", "procedure", DEPLOY], home, repo)
    run_memdir(["store", "--type", "policy", DATABASE], home, repo)
    session = "7e2a9c41-5b3d-4f60-9a1e-2c8d4b6f0a13"
    started = run_memdir(["hook", "session-start"], home, repo, json.dumps(
        {"session_id": session, "cwd": str(repo), "hook_event_name": "SessionStart",
         "source": "resume"}))
    assert "staging-3" in started and "5433" in started  # both injected in full
    after = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    transcript = _replayed(tmp_path, after)
    stop = {"session_id": session, "cwd": str(repo), "transcript_path": str(transcript),
            "hook_event_name": "Stop", "stop_hook_active": False}
    assert run_memdir(["hook", "stop"], home, repo, json.dumps(stop)) == ""
    usage = _usage(home)
    # The agent released to staging-3 after the injection: used. PostgreSQL on 5433 was
    # said only before it: not used. Both were shown once (the injection).
    assert usage == {DEPLOY: (1, 1), DATABASE: (1, 0)}
    assert "1 injected memories used" in hooks_log(home)
    # Once per session: the agent saying it again in the same session adds nothing.
    last = json.loads(transcript.read_text().splitlines()[-1])
    last.update(uuid="u-007", parentUuid="u-006", timestamp=(after + timedelta(seconds=30))
                .isoformat().replace("+00:00", "Z"))
    last["message"]["content"] = [{"type": "text", "text": "staging-3 runs 1.4.2."}]
    with transcript.open("a") as fh:
        fh.write(json.dumps(last) + "\n")
    run_memdir(["hook", "stop"], home, repo, json.dumps(stop))
    assert _usage(home) == {DEPLOY: (1, 1), DATABASE: (1, 0)}
    # stats --json: one of two injections used, the deploy memory the most useful.
    stats = json.loads(run_memdir(["stats", "--json"], home, repo))
    use = stats["usefulness"]
    assert set(use) == {"shown", "injected", "used", "ratio", "by_scope", "most_useful",
                        "never_used", "never_used_count", "never_used_after"}
    assert (use["injected"], use["used"], use["ratio"], use["shown"]) == (2, 1, 0.5, 2)
    assert use["by_scope"] == {"project": {"shown": 2, "injected": 2, "used": 1, "ratio": 0.5}}
    assert [m["name"][:18] for m in use["most_useful"]] == ["Deploys go through"]
    assert set(use["most_useful"][0]) == {"id", "name", "type", "scope", "status", "shown",
                                          "injected", "used", "reinforced"}
    assert use["never_used"] == [] and use["never_used_count"] == 0
    text = run_memdir(["stats"], home, repo)
    assert "usefulness: 1 of 2 injections used (50%)" in text
    assert re.search(r"most useful:\n  1 used, 0 reinforced, 1 injected: Deploys go", text)


def test_stats_list_memories_injected_often_and_never_used(home: Path, repo: Path,
                                                          tmp_path: Path) -> None:
    run_memdir(["store", "--type", "procedure", DEPLOY], home, repo)
    run_memdir(["store", "--type", "policy", DATABASE], home, repo)
    for n in range(4):
        run_memdir(["hook", "session-start"], home, repo, json.dumps(
            {"session_id": f"s-{n}", "cwd": str(repo), "hook_event_name": "SessionStart"}))
    transcript = _replayed(tmp_path, datetime.now(UTC).replace(microsecond=0)
                           + timedelta(seconds=1))
    for n in range(3):  # the stop hook checks three sessions; s-3's uses are never checked
        run_memdir(["hook", "stop"], home, repo, json.dumps(
            {"session_id": f"s-{n}", "cwd": str(repo), "transcript_path": str(transcript)}))
    use = json.loads(run_memdir(["stats", "--json"], home, repo))["usefulness"]
    assert (use["injected"], use["used"], use["ratio"]) == (6, 3, 0.5)
    assert [(m["name"][:18], m["injected"], m["used"]) for m in use["never_used"]] == [
        ("Integration tests ", 3, 0)]
    assert [(m["name"][:18], m["injected"], m["used"]) for m in use["most_useful"]] == [
        ("Deploys go through", 3, 3)]
    text = run_memdir(["stats"], home, repo)
    assert "injected 3+ times, never used: 1 (candidates to archive" in text
    assert "3 injected, shown 4: Integration tests hit" in text


def test_a_failure_to_count_uses_never_breaks_the_hook(home: Path, repo: Path,
                                                      tmp_path: Path) -> None:
    run_memdir(["store", "--type", "procedure", DEPLOY], home, repo)
    run_memdir(["hook", "session-start"], home, repo, json.dumps(
        {"session_id": "s-x", "cwd": str(repo)}))
    conn = sqlite3.connect(home / "index.sqlite")
    conn.execute("DROP TABLE recall_surfaced")  # a damaged index
    conn.close()
    transcript = _replayed(tmp_path, datetime.now(UTC) - timedelta(hours=1))
    assert run_memdir(["hook", "stop"], home, repo, json.dumps(
        {"session_id": "s-x", "cwd": str(repo), "transcript_path": str(transcript)})) == ""
    log = hooks_log(home)
    assert "uses not counted (OperationalError" in log
    assert re.search(r"uses not counted .*\n.*extract: \d+ stored", log)  # extraction went on


# -- cost and unknown uses ------------------------------------------------------------------------

BASE = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def _surfaced(md: Memdir, session: str, count: int) -> list[str]:
    """``count`` memories, each with an identifier of its own, injected into the session one
    second apart from BASE on; their ids."""
    from memdir.retrieval.recall import mark_surfaced

    ids = []
    for i in range(count):
        memory = md.store(f"Service alpha{i} deploys through gateway{i} with flag zeta{i}",
                          type="fact")
        mark_surfaced(md.index, session, [memory], BASE + timedelta(seconds=i))
        ids.append(memory.id)
    return ids


def _long_transcript(path: Path, session: str, turns: int, chars: int, first: str) -> Path:
    """A Claude Code transcript of ``turns`` turns after BASE + 1 hour, each assistant message
    and tool call ``chars`` characters of words no memory has, but the first message says
    ``first`` (read first: a hook's read may stop at its time limit on a loaded machine)."""
    import random

    rng = random.Random(7)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=8)) + rng.choice(
        ["", "_x", ".y", "9"]) for _ in range(5000)]
    rows = []
    for j in range(turns):
        ts = (BASE + timedelta(hours=1, seconds=j)).isoformat().replace("+00:00", "Z")
        said = " ".join(rng.choices(words, k=chars // 10))
        ran = " ".join(rng.choices(words, k=chars // 10))
        for role, content in (("user", "go on"), ("assistant", [
                {"type": "text", "text": said if j else first},
                {"type": "tool_use", "id": f"t{j}", "name": "Bash", "input": {"command": ran}}])):
            rows.append(json.dumps({"type": role, "sessionId": session, "isSidechain": False,
                                    "uuid": f"{role[0]}{j}", "timestamp": ts,
                                    "message": {"role": role, "content": content}}))
    path.write_text("\n".join(rows) + "\n")
    return path


def _checked(md: Memdir, session: str) -> list[int | None]:
    return sorted((r[0] for r in md.index.conn.execute(
        "SELECT checked FROM recall_surfaced WHERE session_id = ?", (session,))),
        key=lambda c: -1 if c is None else c)


def test_the_stop_hook_counts_a_use_in_a_long_transcript_with_many_injection_times(
        md: Memdir, home: Path, repo: Path, tmp_path: Path) -> None:
    # 60 injection times over ~4 MB of the agent's words: read once, not once per time.
    ids = _surfaced(md, "s-long", 60)
    path = _long_transcript(tmp_path / "long.jsonl", "s-long", 100, 20_000,
                            "Restarted alpha59 as the memory says.")
    assert path.stat().st_size > 4_000_000
    run_memdir(["hook", "stop"], home, repo, json.dumps(
        {"session_id": "s-long", "cwd": str(repo), "transcript_path": str(path)}))
    log = hooks_log(home)
    assert "extract: 1 injected memories used" in log
    assert "not counted" not in log and "gave up" not in log
    used = {m.id: m.used_count for m in md.list()}
    assert used[ids[59]] == 1 and sum(used.values()) == 1
    assert _checked(md, "s-long") == [1] * 60  # every injection's uses are known
    use = md.stats().usefulness
    assert (use.total.injected, use.total.used) == (60, 1)


def test_a_check_reads_each_message_once_within_its_budget() -> None:
    from memdir.capture.uses import Injected, check

    early, late = BASE, BASE + timedelta(minutes=5)
    rows = [{"type": "user", "timestamp": "2026-11-20T09:00:00Z",
             "message": {"role": "user", "content": "go"}}]
    for n, (minute, text) in enumerate([(1, "Restarted alpha1 first."), (6, "Then alpha2."),
                                        (7, "x " * 500 + "and alpha3 at last.")]):
        rows.append({"type": "assistant", "timestamp": f"2026-11-20T09:{minute:02d}:00Z",
                     "uuid": f"a{n}", "message": {"role": "assistant", "content": text}})
    transcript = parse_transcript(rows)
    injected = [Injected(1, "Service alpha1", late), Injected(2, "Service alpha2", early),
                Injected(3, "Service alpha3", late), Injected(4, "Service alpha4", None)]
    # alpha1 was said before its injection; the others after theirs.
    assert check(injected, transcript) == check(injected, transcript, budget=10_000)
    assert check(injected, transcript).used == (2, 3) and check(injected, transcript).complete
    cut = check(injected, transcript, budget=100)  # the third message is past the budget
    assert cut.used == (2,) and not cut.complete


@given(st.lists(st.tuples(st.sampled_from([None, 1, 2, 3]),
                          st.lists(st.sampled_from(["alpha1", "alpha2", "beta", "gamma",
                                                    "delta", "`make release`", "pnpm"]),
                                   max_size=4)), min_size=1, max_size=6),
       st.lists(st.sampled_from([None, 0, 1, 2, 3, 4]), min_size=5, max_size=5))
def test_one_sweep_finds_what_a_check_per_injection_time_finds(
        said: list[tuple[int | None, list[str]]], times: list[int | None]) -> None:
    from memdir.capture.uses import Injected, check

    texts = ["Service alpha1", "Service alpha2", "beta gamma delta", "Use `make release`",
             "Prefer pnpm always"]

    def at(minute: int | None) -> datetime | None:
        return None if minute is None else BASE + timedelta(minutes=minute)

    def rows(since: datetime | None) -> list[dict[str, object]]:
        out: list[dict[str, object]] = [{"role": "user", "content": "go"}]
        for minute, words in said:
            when = at(minute)
            if since is None or when is None or when >= since:
                out.append({"type": "assistant", "message": {
                    "role": "assistant", "content": " ".join(words) or "ok"},
                    **({"timestamp": when.isoformat()} if when else {})})
        return out

    injected = [Injected(i, text, at(t))
                for i, (text, t) in enumerate(zip(texts, times, strict=True))]
    swept = set(check(injected, parse_transcript(rows(None))).used)
    # The reference: for each memory, all it may draw on is what came at or after it.
    alone = [Injected(item.key, item.text) for item in injected]
    expected = {item.key for item in injected
                if item.key in check(alone, parse_transcript(rows(item.at))).used}
    assert swept == expected


def test_the_time_limit_is_not_swallowed_by_counting_uses(md: Memdir, home: Path,
                                                         tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    from memdir.agents import hooks
    from memdir.agents.hook_transcript import read_for_extract

    _surfaced(md, "s-t", 20)
    path = _long_transcript(tmp_path / "t.jsonl", "s-t", 5, 2000, "Restarted alpha3.")
    reading = read_for_extract(md, str(path), "s-t")
    counting = md.record_uses

    def limit_reached(session_id: str, transcript: object) -> int:
        signal.raise_signal(signal.SIGALRM)  # the hook's limit, reached while checking
        return counting(session_id, transcript)  # type: ignore[arg-type]

    monkeypatch.setattr(md, "record_uses", limit_reached)
    previous = signal.signal(signal.SIGALRM, hooks._alarm)  # the hook's own handler
    try:
        with pytest.raises(hooks._TimeUpError):
            hooks._record_uses(md, "extract", reading)
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert "not counted" not in hooks_log(home)  # the hook's limit handling logs it
    # The uses are unknown: no injection of the session counts as unused in stats.
    assert _checked(md, "s-t") == [0] * 20
    assert md.stats().usefulness.total.injected == 0
    # A later check finds the use, and leaves the rest unknown.
    assert counting("s-t", parse_transcript(path)) == 1
    assert _checked(md, "s-t") == [0] * 20
    assert (md.stats().usefulness.total.injected, md.stats().usefulness.total.used) == (1, 1)
    # Any other failure is logged, and the hook goes on.
    monkeypatch.setattr(md, "record_uses", lambda *_: 1 // 0)
    hooks._record_uses(md, "extract", reading)
    assert "extract: uses not counted (ZeroDivisionError" in hooks_log(home)


def test_injections_used_before_checks_existed_count_as_checked(md: Memdir) -> None:
    from memdir.core.index_schema import MIGRATIONS

    version = 1 + next(n for n, (name, _) in enumerate(MIGRATIONS)
                       if name.startswith("uses known apart from uses missed"))
    ids = _surfaced(md, "s-old", 2)
    md.index.count_uses("s-old", [(str(md.directory("project").path), ids[0])], "2026-11-20")
    with md.index.write() as w:  # an index from before the checked column
        w.execute("ALTER TABLE recall_surfaced DROP COLUMN checked")
        w.execute("DELETE FROM schema_migrations WHERE version = ?", (version,))
    md.index.close()
    assert _checked(md, "s-old") == [None, 1]
    assert (md.stats().usefulness.total.injected, md.stats().usefulness.total.used) == (1, 1)
