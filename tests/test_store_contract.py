"""One behavioural contract, run against both stores: the Markdown + SQLite home (Memdir) and
the PostgreSQL store. Whatever a client of :class:`memdir.core.memory_store.MemoryStore` may rely
on is asserted here once, so the two implementations cannot drift apart.

Real parts only: a real git repo and home for Memdir, a fresh schema of the real PostgreSQL
for PostgresStore, and real locks held by a second connection for the usage-failure test.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from memdir import Memdir, Memory
from memdir.core.errors import (
    InvalidMemoryError,
    MemoryNotFoundError,
    SecretDetectedError,
    UnknownTypeError,
)
from memdir.core.memory_store import MemoryStore
from memdir.retrieval.context_format import count_tokens
from memdir.team.postgres import PostgresStore
from pg_support import DSN, fresh_schema

T0 = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)
FIELDS = ("id", "name", "description", "type", "scope", "relevance", "tags", "paths",
          "source", "created", "updated", "reinforced", "status", "superseded_by", "meta",
          "date", "context", "content")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, home: Path, repo: Path,
          clock: Clock) -> Iterator[Any]:
    if request.param == "sqlite":
        with Memdir(home=home, project=repo, clock=clock, sync_interval=0) as md:
            yield md
    else:
        with fresh_schema() as schema, PostgresStore(DSN, schema=schema, clock=clock) as pg:
            yield pg


def portable(memory: Memory) -> dict[str, Any]:
    data = memory.to_dict()
    return {key: data[key] for key in FIELDS}


@contextlib.contextmanager
def writes_blocked(store: Any) -> Iterator[None]:
    """Another connection holds the lock every write needs (reads still work)."""
    if isinstance(store, Memdir):
        conn = sqlite3.connect(store.index.path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
    else:
        with psycopg.connect(DSN) as pg:  # not autocommit: the lock lasts until rollback
            pg.execute(sql.SQL("LOCK TABLE {}.memories IN SHARE MODE").format(
                sql.Identifier(store.schema)))
            yield
            pg.rollback()


def sections(text: str) -> dict[str, list[str]]:
    """Markdown context text -> heading -> its lines."""
    out: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("### "):
            assert line not in out, f"heading {line!r} appears twice"
            current = line
            out[current] = []
        elif current:
            out[current].append(line)
    return out


def test_both_stores_speak_the_protocol(store: Any) -> None:
    assert isinstance(store, MemoryStore)
    assert store.kind in ("sqlite", "postgresql")


def test_stored_memory_comes_back_by_get_with_all_fields(store: Any) -> None:
    stored = store.store("Integration tests hit the real database, never mocks.",
                         type="feedback", scope="project", name="Testing policy",
                         description="Integration tests must hit a real database",
                         tags=["testing", "database"], paths=["tests/**"], relevance=0.85,
                         meta={"ticket": "ABC-12", "owner": {"team": "platform"}})
    assert stored.id and stored.reinforced == 0 and stored.status == "active"
    got = store.get(stored.id)
    assert portable(got) == portable(stored)
    assert got.created == T0 and got.updated == T0
    assert got.tags == ("testing", "database") and got.paths == ("tests/**",)
    assert got.meta == {"ticket": "ABC-12", "owner": {"team": "platform"}}
    assert got.access_count == 1
    with pytest.raises(MemoryNotFoundError):
        store.get("nosuchid")


def test_writes_are_validated_the_same_way(store: Any) -> None:
    with pytest.raises(SecretDetectedError):
        store.store("the deploy key is AKIAIOSFODNN7EXAMPL3", type="fact")
    with pytest.raises(UnknownTypeError) as info:
        store.store("something", type="thought")
    assert "feedback" in info.value.hint and "decision" in info.value.hint
    with pytest.raises(InvalidMemoryError):
        store.store("<private>only private</private>", type="fact")
    assert store.list(status="all") == []
    kept = store.store("We decided yesterday to freeze the API <private>my pin 4455</private>",
                       type="decision")
    assert "4455" not in kept.body
    assert "decided yesterday (2026-01-04) to freeze" in kept.body
    with pytest.raises(SecretDetectedError):
        store.update(kept.id, content="token = ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    assert store.get(kept.id).body == kept.body


def test_search_stems_and_ranks_the_match_first(store: Any) -> None:
    target = store.store("Deployments happen on Fridays through the CI pipeline", type="fact")
    store.store("The cafeteria serves lunch at noon", type="fact")
    for query in ("deploy", "deployment", "DEPLOYING fridays"):
        hits = store.search(query)
        assert [h.memory.id for h in hits] == [target.id], query
        assert hits[0].score > 0 and hits[0].match > 0 and hits[0].strength > 0


@pytest.mark.parametrize("query", [
    '"unbalanced quote', "(((deploy", "deploy AND OR NOT", "NEAR(deploy pipeline)",
    "deploy*", "col:deploy", "^deploy", "'; DROP TABLE memories; --", "a\x00b deploy",
    "deploy " + "x" * 10_000, "!!!", "", "   ", "-deploy", "deploy | !pipeline & (",
])
def test_no_query_text_can_raise(store: Any, query: str) -> None:
    target = store.store("Deployments happen on Fridays through the CI pipeline", type="fact")
    hits = store.search(query)
    assert isinstance(hits, list)
    if "deploy" in query.lower():
        assert target.id in [h.memory.id for h in hits]


def test_filters_by_type_scope_and_tag(store: Any) -> None:
    fact = store.store("Postgres runs version 15 in production", type="fact", tags=["db"])
    decision = store.store("We chose Postgres over MySQL for production", type="decision",
                           tags=["db", "adr"])
    mine = store.store("I like Postgres for production work", type="preference", scope="user")
    ids = lambda hits: {h.memory.id for h in hits}  # noqa: E731
    assert ids(store.search("postgres production")) == {fact.id, decision.id, mine.id}
    assert ids(store.search("postgres production", types=["decision"])) == {decision.id}
    assert ids(store.search("postgres production", types=["architecture"])) == {decision.id}
    assert ids(store.search("postgres production", scopes=["user"])) == {mine.id}
    assert ids(store.search("postgres production", tags=["adr"])) == {decision.id}
    assert ids(store.search("postgres production", tags=["db"])) == {fact.id, decision.id}
    assert {m.id for m in store.list(types=["fact"])} == {fact.id}
    assert {m.id for m in store.list(scopes=["project"], tags=["db"])} == {fact.id, decision.id}
    with pytest.raises(UnknownTypeError):
        store.search("postgres", types=["thought"])


def test_archive_hides_from_search_and_context_until_restored(store: Any) -> None:
    memory = store.store("Deploy previews live on the staging cluster", type="fact")
    archived = store.archive(memory.id)
    assert archived.status == "archived" and archived.id == memory.id
    assert store.search("staging deploy") == []
    assert [h.memory.id for h in store.search("staging deploy", include_archived=True)] == \
        [memory.id]
    assert memory.id not in [m.id for m in store.context(budget_tokens=2000).memories]
    assert [m.id for m in store.list(status="archived")] == [memory.id]
    assert store.list() == []
    restored = store.restore(memory.id)
    assert restored.status == "active"
    assert [h.memory.id for h in store.search("staging deploy")] == [memory.id]
    assert memory.id in [m.id for m in store.context(budget_tokens=2000).memories]


def access_count(store: Any, ref: str) -> int:
    return next(m.access_count for m in store.list(status="all") if m.id == ref)


def test_reads_count_accesses(store: Any) -> None:
    memory = store.store("Releases are cut from the main branch", type="procedure")
    assert access_count(store, memory.id) == 0
    store.get(memory.id)
    assert access_count(store, memory.id) == 1
    store.search("releases main branch")
    assert access_count(store, memory.id) == 2
    store.search("releases main branch", touch=False)
    assert access_count(store, memory.id) == 2
    assert memory.id in [m.id for m in store.context(budget_tokens=2000).memories]
    assert access_count(store, memory.id) == 3
    last = next(m.last_accessed for m in store.list() if m.id == memory.id)
    assert last is not None


def test_a_failing_usage_count_never_fails_the_read(store: Any,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    memory = store.store("The API gateway retries three times", type="fact")
    with caplog.at_level(logging.DEBUG, logger="memdir"), writes_blocked(store):
        assert store.get(memory.id).id == memory.id
        assert [h.memory.id for h in store.search("gateway retries")] == [memory.id]
        assert [m.id for m in store.context(budget_tokens=2000).memories] == [memory.id]
    assert any("usage counters not updated" in r.getMessage() for r in caplog.records)
    assert access_count(store, memory.id) == 0


def test_exact_duplicate_reinforces_and_returns_the_same_memory(store: Any) -> None:
    first = store.store("Use the STAGING database for load tests", type="fact", tags=["db"],
                        relevance=0.5)
    again = store.store("  use the staging   database for LOAD tests ", type="fact",
                        tags=["load"], relevance=0.7)
    assert again.id == first.id and again.reinforced == 1
    assert again.tags == ("db", "load") and again.relevance == 0.7
    assert len(store.list(status="all")) == 1
    other_scope = store.store("Use the staging database for load tests", type="fact",
                              scope="user")
    assert other_scope.id != first.id and other_scope.reinforced == 0
    batch = store.store_many([{"content": "Cache keys expire after ten minutes", "type": "fact"},
                              {"content": "cache keys expire after TEN minutes", "type": "fact"}])
    assert batch[0].id == batch[1].id and batch[1].reinforced == 1
    assert len(store.list(status="all")) == 3


def test_store_many_validates_everything_before_writing(store: Any) -> None:
    with pytest.raises(InvalidMemoryError):
        store.store_many([{"content": "A fine memory about queues", "type": "fact"},
                          {"content": "no type given"}])
    with pytest.raises(SecretDetectedError):
        store.store_many([{"content": "Another fine memory", "type": "fact"},
                          {"content": "password = hunter2hunter2", "type": "fact"}])
    assert store.list(status="all") == []


def test_update_reclassify_and_delete(store: Any, clock: Clock) -> None:
    memory = store.store("Builds take about ten minutes", type="fact", tags=["ci"])
    clock.advance(hours=1)
    changed = store.update(memory.id, content="Builds take about four minutes now",
                           tags=["ci", "speed"], reinforce=True)
    assert changed.id == memory.id and changed.body == "Builds take about four minutes now"
    assert changed.tags == ("ci", "speed") and changed.reinforced == 1
    assert changed.updated == T0 + timedelta(hours=1) and changed.created == T0
    moved = store.reclassify(memory.id, "pitfall")
    assert moved.id == memory.id and moved.type == "pitfall"
    assert store.get(memory.id).type == "pitfall"
    deleted = store.delete(memory.id)
    assert deleted.id == memory.id
    with pytest.raises(MemoryNotFoundError):
        store.get(memory.id)
    assert store.list(status="all") == []


def test_list_orders_and_limits(store: Any, clock: Clock) -> None:
    made = []
    for n, relevance in enumerate((0.5, 0.9, 0.7)):
        made.append(store.store(f"Queue note number {n} about retries", type="fact",
                                relevance=relevance))
        clock.advance(minutes=5)
    assert [m.id for m in store.list()] == [made[1].id, made[2].id, made[0].id]
    assert [m.id for m in store.list(order="recent")] == [m.id for m in reversed(made)]
    assert len(store.list(limit=2)) == 2
    store.archive(made[0].id)
    assert len(store.list(status="all")) == 3 and len(store.list(status="archived")) == 1
    with pytest.raises(InvalidMemoryError):
        store.list(status="deleted")


def test_context_orders_by_relevance_then_recency(store: Any, clock: Clock) -> None:
    made = {}
    for key, relevance in (("low", 0.5), ("older", 0.7), ("top", 0.9), ("newer", 0.7)):
        made[key] = store.store(f"Fact {key}: the build cache lives on the {key} disk",
                                type="fact", relevance=relevance)
        clock.advance(hours=1)
    context = store.context(budget_tokens=2000, limit=4)
    assert [m.id for m in context.memories] == [made[k].id for k in
                                                ("top", "newer", "older", "low")]
    matched = store.context("which low one", budget_tokens=2000, limit=4)
    assert matched.memories[0].id == made["low"].id


def test_context_groups_by_type_and_respects_limit_and_budget(store: Any) -> None:
    facts = [store.store(f"Fact {n}: service {n} listens on port 80{n}", type="fact")
             for n in range(4)]
    decisions = [store.store(f"Decision {n}: service {n} is written in Go", type="decision")
                 for n in range(3)]
    full = store.context(budget_tokens=4000, limit=7)
    assert {m.id for m in full.memories} == {m.id for m in facts + decisions}
    groups = sections(full.text)
    fact_lines = next(lines for heading, lines in groups.items() if "Facts" in heading)
    decision_lines = next(lines for heading, lines in groups.items() if "Decisions" in heading)
    assert sum("Fact " in line for line in fact_lines) == 4
    assert sum("Decision " in line for line in decision_lines) == 3
    assert full.text.startswith("7 memories loaded:")
    assert len(store.context(budget_tokens=4000, limit=3).memories) == 3
    for fmt in ("markdown", "prompt", "json", "snippets"):
        for budget in (1, 20, 60, 150):
            context = store.context(budget_tokens=budget, format=fmt, limit=7)
            assert context.tokens <= budget and count_tokens(context.text) <= budget
            assert context.format == fmt
        assert store.context(budget_tokens=150, format=fmt, limit=7).memories
    with pytest.raises(InvalidMemoryError):
        store.context(format="html")
    with pytest.raises(InvalidMemoryError):
        store.context(budget_tokens=0)


def test_recall_never_repeats_a_memory_in_a_session(store: Any, clock: Clock) -> None:
    made = {store.store(f"Deploy step {n}: run the migration check number {n}",
                        type="procedure").id for n in range(7)}
    clock.advance(days=3)
    first = store.recall("how do we deploy the migration", "session-1")
    assert 0 < len(first.items) <= 5 and first.method == "search"
    assert "3 days old" in first.items[0].text
    second = store.recall("how do we deploy the migration", "session-1")
    seen = [m.id for m in first.memories] + [m.id for m in second.memories]
    assert len(seen) == len(set(seen)) == 7 and set(seen) == made
    assert store.recall("how do we deploy the migration", "session-1").items == ()
    assert len(store.recall("how do we deploy the migration", "session-2").items) == 5
    assert store.recall("deploy", "session-3").skipped == "single-word prompt"
    assert second.session_bytes > first.session_bytes > 0


def test_stats_count_what_is_stored(store: Any) -> None:
    a = store.store("The queue holds at most 1000 jobs", type="fact")
    store.store("Jobs retry with exponential backoff", type="fact")
    c = store.store("We use Redis for the queue", type="decision")
    store.archive(c.id)
    store.get(a.id)
    stats = store.stats()
    assert stats.total == 3
    assert dict(stats.by_type) == {"fact": 2, "decision": 1}
    assert dict(stats.by_status) == {"active": 2, "archived": 1}
    assert dict(stats.by_scope) == {"project": 3}
    assert stats.never_accessed == 2
    assert sum(stats.strength.values()) == 2
    assert stats.to_dict()["total"] == 3


def test_a_recalled_memory_the_agent_drew_on_counts_as_used_once(store: Any,
                                                                  clock: Clock) -> None:
    from memdir.capture.transcript import parse_transcript

    deploy = store.store("Deploys go through make release on staging-3", type="procedure")
    tests = store.store("Integration tests hit the real PostgreSQL on port 5433",
                        type="policy")
    recalled = store.recall("how do we deploy to staging and run the integration tests",
                            "session-u")
    assert {item.memory.id for item in recalled.items} == {deploy.id, tests.id}
    clock.advance(minutes=5)
    said = parse_transcript([{"role": "user", "content": "go ahead"},
                             {"role": "assistant", "content": "Releasing to staging-3 now."}])
    assert store.record_uses("session-u", said) == 1
    assert store.record_uses("session-u", said) == 0  # once per session
    assert store.record_uses("another-session", said) == 0  # injected into none there
    counts = {m.id: (m.access_count, m.used_count, m.last_used)
              for m in store.list()}
    assert counts == {deploy.id: (1, 1, clock.now), tests.id: (1, 0, None)}
    idle = parse_transcript([{"role": "user", "content": "go on"},
                             {"role": "assistant", "content": "Done."}])
    for _ in range(2):  # two more sessions recall it, their agents do not use it
        clock.advance(minutes=1)
        store.recall(f"integration tests on PostgreSQL, session {_}", f"later-{_}")
        clock.advance(minutes=1)
        assert store.record_uses(f"later-{_}", idle) == 0
    # A session whose uses were never checked (no stop hook read it) counts nowhere.
    store.recall("integration tests on PostgreSQL, unchecked", "unchecked")
    use = store.stats().to_dict()["usefulness"]
    assert {k: use[k] for k in ("shown", "injected", "used", "ratio")} == {
        "shown": 5, "injected": 4, "used": 1, "ratio": 0.25}
    assert use["by_scope"] == {"project": {"shown": 5, "injected": 4, "used": 1,
                                           "ratio": 0.25}}
    assert [(m["id"], m["used"], m["injected"]) for m in use["most_useful"]] == [
        (deploy.id, 1, 1)]
    assert [(m["id"], m["used"], m["injected"]) for m in use["never_used"]] == [
        (tests.id, 0, 3)]
    assert use["never_used_after"] == 3


# -- meaning: both stores with the embed extra rank words and vectors alike -------------------

# Varied memories, and queries that share no word with the memory they should find.
TEAM = [
    ("I prefer pnpm over npm", "preference"),
    ("Deployments go through the release pipeline on GitHub Actions", "procedure"),
    ("The staging database is reset every Sunday night", "fact"),
    ("We chose PostgreSQL over MySQL for the team server", "decision"),
    ("Alice prefers dark mode in every editor", "preference"),
    ("The office coffee machine is descaled every Friday", "fact"),
    ("Use tabs, not spaces, in the Makefile recipes", "feedback"),
    ("The logo's blue is #1E40AF", "fact"),
    ("Lunch orders go in the #food channel before 11", "fact"),
    ("Integration tests must hit a real database, never mocks", "feedback"),
    ("Bob is on call for the payments service this week", "fact"),
    ("Never force-push to the main branch", "feedback"),
    ("The API gateway retries failed requests three times with backoff", "fact"),
    ("Python code is formatted with ruff and type-checked with mypy strict", "procedure"),
    ("Our Kubernetes cluster runs in the eu-west-1 region", "fact"),
    ("Customer invoices are generated on the first day of each month", "fact"),
    ("The mobile app is written in Kotlin and Swift", "fact"),
    ("Secrets live in the vault, never in the repository", "feedback"),
    ("Weekly planning happens on Monday mornings at 10", "fact"),
    ("The search page is slow when the index has more than a million rows", "pitfall"),
    ("We moved from Jenkins to GitHub Actions for continuous integration", "decision"),
    ("Docker images are built with multi-stage builds to stay small", "procedure"),
]
MEANING = {  # query -> the memory it means, with no word in common
    "package manager": "I prefer pnpm over npm",
    "where are credentials kept": "Secrets live in the vault, never in the repository",
    "billing": "Customer invoices are generated on the first day of each month",
    "containers": "Docker images are built with multi-stage builds to stay small",
}
QUERIES = [*MEANING, "how do we ship a release", "which database do we use",
           "code style and linting", "who is on call", "continuous integration",
           "github actions release pipeline", "performance problems", "main branch"]


@contextlib.contextmanager
def with_meaning(kind: str, home: Path, repo: Path, clock: Clock) -> Iterator[Any]:
    """A store of ``kind`` with vectors on (the real model), holding TEAM, every vector
    written (``embed_memories``: what the background filling does, waited for)."""
    items = [{"content": text, "type": kind_} for text, kind_ in TEAM]
    if kind == "sqlite":
        with Memdir(home=home, project=repo, clock=clock, sync_interval=0,
                    semantic=True) as md:
            md.store_many(items)
            md.embed_memories()
            yield md
    else:
        with fresh_schema() as schema, PostgresStore(DSN, schema=schema, clock=clock,
                                                     semantic=True) as pg:
            pg.store_many(items)
            pg.embed_memories()
            yield pg


@pytest.fixture(params=["sqlite", "postgresql"])
def meaning_store(request: pytest.FixtureRequest, home: Path, repo: Path,
                  clock: Clock) -> Iterator[Any]:
    with with_meaning(request.param, home, repo, clock) as store:
        assert store.semantic
        yield store


def test_hybrid_search_finds_the_package_manager(meaning_store: Any) -> None:
    hits = meaning_store.search("package manager")
    assert hits and hits[0].memory.body == "I prefer pnpm over npm"
    assert hits[0].score > 0 and hits[0].strength > 0


def test_meaning_finds_memories_without_a_word_in_common(meaning_store: Any, home: Path,
                                                         repo: Path, clock: Clock) -> None:
    # The same memories searched by words alone find none of them: no word is shared.
    if isinstance(meaning_store, Memdir):
        words: Any = Memdir(home=home, project=repo, clock=clock, semantic=False)
    else:
        words = PostgresStore(DSN, schema=meaning_store.schema, clock=clock, semantic=False)
    with words:
        for query in MEANING:
            assert words.search(query, touch=False) == [], query
    for query, body in MEANING.items():
        found = [h.memory.body for h in meaning_store.search(query, limit=3)]
        assert body in found, (query, found)


def test_both_stores_put_the_same_memories_on_top(home: Path, repo: Path,
                                                  clock: Clock) -> None:
    with with_meaning("sqlite", home, repo, clock) as md, \
            with_meaning("postgresql", home, repo, clock) as pg:
        assert pg.vectors is False  # the local PostgreSQL has no pgvector: the plain table
        compared = 0
        for query in QUERIES:
            sqlite_top = [h.memory.body for h in md.search(query, limit=3, touch=False)]
            pg_top = [h.memory.body for h in pg.search(query, limit=3, touch=False)]
            assert sqlite_top, query
            assert pg_top == sqlite_top, query
            compared += len(pg_top)
        assert compared >= 2 * len(QUERIES)


def test_search_context_is_searched_never_shown(store: Any) -> None:
    context = "Kevin: are you going to the zeppelin concert?"
    stored = store.store("Yes, I bought tickets for both of us", type="fact", context=context)
    store.store("Tickets for the museum are free on Sundays", type="fact")
    assert stored.context == context and store.get(stored.id).context == context
    hits = store.search("zeppelin")
    assert [h.memory.id for h in hits] == [stored.id]
    assert "zeppelin" not in str([h.to_dict() for h in hits])
    assert "zeppelin" not in store.context("concert tickets").text
    recalled = store.recall("are we going to the zeppelin concert", "session-z")
    assert [m.id for m in recalled.memories] == [stored.id]
    assert "zeppelin" not in recalled.text
    with pytest.raises(SecretDetectedError):
        store.store("Noted", type="fact", context="token ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    private = store.store("Noted the pin", type="fact",
                          context="Paola: <private>pin 4455</private>here it is")
    assert private.context == "Paola: here it is"
    assert store.search("4455") == []
    # A duplicate keeps the first context, and gets one when it had none.
    again = store.store("yes, I bought tickets for both of us", type="fact", context="other")
    assert again.id == stored.id and again.context == context
    plain = store.store("The lift is out of order", type="fact")
    filled = store.store("the lift is out of order", type="fact", context="Emi: stairs?")
    assert filled.id == plain.id and filled.context == "Emi: stairs?"


def test_days_are_searched_as_words(store: Any) -> None:
    created = store.store("We froze the public API", type="decision")  # T0: Monday 5 January
    said = store.store("The concert is sold out", type="fact", date="2024-03-08")  # a Friday
    assert said.date is not None and said.date.isoformat() == "2024-03-08"
    assert store.get(said.id).date == said.date
    assert [h.memory.id for h in store.search("what did we decide in March")] == [said.id]
    assert [h.memory.id for h in store.search("Friday")] == [said.id]
    assert {h.memory.id for h in store.search("January 2026")} == {created.id, said.id}
    assert "March" not in str([h.to_dict() for h in store.search("March")])


def test_a_day_alone_is_no_evidence_for_recall(store: Any) -> None:
    said = store.store("The concert is sold out", type="fact", date="2024-03-08")  # a Friday
    assert [h.memory.id for h in store.search("Friday")] == [said.id]
    assert store.search("Friday", dates=False) == []
    assert [h.memory.id for h in store.search("concert on Friday", dates=False)] == [said.id]
