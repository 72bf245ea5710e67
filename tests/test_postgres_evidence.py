"""The PostgreSQL store's word evidence is the SQLite index's: FTS5's weighted BM25 over the
ideal BM25, computed from the tsvectors (memdir/team/postgres_evidence.py).

The same memories (names, descriptions, tags, paths, search context and dates, bodies short
and long, words said once or many times) go into a real Memdir home and a fresh schema of the
real PostgreSQL; words-only searches must give every memory nearly the same match and the
same top 3 in both.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memdir import Memdir
from memdir.retrieval.scale import ideal_bm25, idf, lexical_evidence
from memdir.team.postgres import PostgresStore
from memdir.team.postgres_evidence import WEIGHTS, bm25, word_evidence
from pg_support import DSN, fresh_schema

T0 = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)

MEMORIES: list[dict[str, Any]] = [
    {"content": "The staging database is reset every Sunday night", "type": "fact"},
    {"content": "We chose PostgreSQL over MySQL for the team server", "type": "decision"},
    {"content": "Integration tests must hit a real database, never mocks", "type": "feedback"},
    {"content": "Database migrations run before every release; a failed migration blocks the "
                "release, and the database team reviews each migration script by hand before "
                "it is merged, because a broken migration once took the billing database down "
                "for an afternoon", "type": "procedure"},
    {"content": "Release notes are written by whoever cuts the release", "type": "procedure",
     "name": "Release notes", "description": "who writes the release notes"},
    {"content": "Bob is on call for the payments service this week", "type": "fact",
     "tags": ["oncall", "payments"]},
    {"content": "The payments service retries a failed charge three times", "type": "fact",
     "description": "charge retries"},
    {"content": "Deployments go through the release pipeline on GitHub Actions",
     "type": "procedure", "tags": ["ci"]},
    {"content": "We moved from Jenkins to GitHub Actions for continuous integration",
     "type": "decision"},
    {"content": "Use tabs, not spaces, in the Makefile recipes", "type": "feedback",
     "paths": ["Makefile"]},
    {"content": "The Makefile target lint runs ruff and mypy", "type": "procedure",
     "paths": ["Makefile"], "tags": ["lint"]},
    {"content": "Python code is formatted with ruff and type-checked with mypy strict",
     "type": "procedure", "tags": ["python", "lint"]},
    {"content": "Yes, I bought the tickets", "type": "fact",
     "context": "Kevin: are you coming to the zeppelin concert?"},
    {"content": "The concert hall is closed in March for renovation", "type": "fact",
     "date": "2024-03-08"},
    {"content": "Coffee coffee coffee: the office coffee machine is descaled every Friday",
     "type": "fact"},
    {"content": "The coffee order goes in the #food channel", "type": "fact",
     "name": "Coffee orders"},
    {"content": "The search page is slow when the index has more than a million rows",
     "type": "pitfall", "tags": ["performance", "search"]},
    {"content": "Search latency targets: p50 under 15 ms at ten thousand memories, no search "
                "above 100 ms; the index is rebuilt nightly and the search cache is warmed "
                "before the morning traffic", "type": "fact"},
    {"content": "Our Kubernetes cluster runs in the eu-west-1 region", "type": "fact",
     "description": "where the cluster runs"},
    {"content": "Docker images are built with multi-stage builds to stay small",
     "type": "procedure", "paths": ["Dockerfile"], "tags": ["docker"]},
    {"content": "Secrets live in the vault, never in the repository", "type": "feedback"},
]
QUERIES = [
    "which database do we use", "database migration", "release notes", "payments",
    "who is on call", "github actions release pipeline", "makefile", "lint", "zeppelin",
    "concert in March", "coffee", "search performance", "cluster region", "docker",
    "continuous integration", "mypy strict ruff",
]
TOLERANCE = 0.01  # stemmers and tokenizers differ a little (see the module docstring)


class Clock:
    def __call__(self) -> datetime:
        return T0


@pytest.fixture
def stores(home: Path, repo: Path) -> Iterator[tuple[Memdir, PostgresStore]]:
    with Memdir(home=home, project=repo, clock=Clock(), sync_interval=0,
                semantic=False) as md, fresh_schema() as schema, \
            PostgresStore(DSN, schema=schema, clock=Clock(), semantic=False) as pg:
        md.store_many(MEMORIES)
        pg.store_many(MEMORIES)
        yield md, pg


def matches(store: Any, query: str) -> dict[str, float]:
    return {h.memory.body: h.match for h in store.search(query, limit=50, touch=False)}


def test_every_query_gives_each_memory_the_same_evidence(
        stores: tuple[Memdir, PostgresStore]) -> None:
    md, pg = stores
    worst = 0.0
    for query in QUERIES:
        sqlite, postgres = matches(md, query), matches(pg, query)
        assert sqlite, query
        assert set(postgres) == set(sqlite), query
        for body, match in sqlite.items():
            worst = max(worst, abs(postgres[body] - match))
            assert postgres[body] == pytest.approx(match, abs=TOLERANCE), (query, body)
    assert worst > 0  # a real comparison: the stores are not the same code


def test_every_query_puts_the_same_three_on_top(stores: tuple[Memdir, PostgresStore]) -> None:
    md, pg = stores
    for query in QUERIES:
        sqlite = [h.memory.body for h in md.search(query, limit=3, touch=False)]
        postgres = [h.memory.body for h in pg.search(query, limit=3, touch=False)]
        assert postgres == sqlite, query


def test_frequency_length_and_column_weights_count(
        stores: tuple[Memdir, PostgresStore]) -> None:
    _, pg = stores
    filler = " and then the nightly job copies every table to the backup bucket" * 3
    made = {key: pg.store(body, type="fact", name=f"Backups {key}", description="backups")
            for key, body in {
                "short": "A snapshot is taken at noon",
                "long": "A snapshot is taken at noon" + filler,
                "often": "A snapshot, then a snapshot, then a snapshot at noon" + filler,
            }.items()}
    made["described"] = pg.store("It is taken at noon", type="fact", name="Backups described",
                                 description="the snapshot")
    with pg.connections.db() as conn:
        evidence = word_evidence(conn, "snapshot", [m.id for m in made.values()])
    got = {key: evidence[m.id] for key, m in made.items()}
    # Said thrice beats once; once in a short row beats once in a long one; a description
    # (weight 8) beats a body (weight 1).
    assert got["often"] > got["long"] and got["short"] > got["long"] > 0
    assert got["described"] > got["short"]


def test_bm25_is_fts5s_formula() -> None:
    rows, held = 20, 3
    weight = idf(rows, held)
    assert weight == pytest.approx(math.log((rows - held + 0.5) / (held + 0.5)))
    # One hit in the body at average length: the ideal, so r = 1.
    assert bm25([WEIGHTS["body"]], [weight], 10, 10) == pytest.approx(ideal_bm25(rows, [[held]]))
    # Saturation: never above (k1 + 1) x idf, however often the word is said.
    assert bm25([1000.0], [weight], 10, 10) < 2.2 * weight
    # Longer than average weighs less; a phrase not found adds nothing.
    assert bm25([1.0, 0.0], [weight, 5.0], 20, 10) < bm25([1.0], [weight], 10, 10)
    assert lexical_evidence(bm25([1.0], [weight], 10, 10), weight) == pytest.approx(
        1 - math.exp(-0.75), abs=1e-3)


def test_context_and_dates_share_one_weight() -> None:
    # PostgreSQL's D segment holds paths, then context and date words: only the paths end is
    # found, so the mapping is exact only while context and dates weigh the same.
    assert WEIGHTS["context"] == WEIGHTS["dates"]
