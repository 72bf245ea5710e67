"""The score scale (memdir.retrieval.scale): bounded, absolute, in rank order, never without
evidence, the same in the library, the CLI, MCP and the HTTP API, and shared by memories and session
chunks."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from memdir import Memdir
from memdir.agents.mcp_server import build_server
from memdir.core.index import BM25_WEIGHTS
from memdir.core.model import Hit
from memdir.retrieval.scale import (
    LEXICAL_SATURATION,
    MIN_MATCH,
    ideal_bm25,
    idf,
    lexical_evidence,
    scored,
    strength_factor,
)
from memdir.retrieval.search import fts_query
from server_support import running_server

TEXTS = ["I prefer pnpm over npm", "Deployments go through the staging cluster first",
         "Integration tests must hit a real database, not mocks",
         "The API uses snake_case JSON keys", "Use ruff for linting and formatting"]
QUERIES = ["staging deployments database", "pnpm npm", "ruff linting", "json keys api",
           "package manager", "how do we test against the database"]
NOTHING = "what is the weather on mars"  # no stored word, no stored meaning
MODES = ("fts", "hybrid")


def _store(md: Memdir, texts: list[str] = TEXTS, kind: str = "user") -> None:
    md.store_many([{"content": t, "type": kind} for t in texts])
    _settled(md)


def _settled(md: Memdir) -> None:
    """Every vector computed now: the background worker would otherwise add them between two
    searches of a test, and a memory's hybrid score changes when its vector arrives."""
    if md.semantic:
        md.embed_memories()


def _bounded_and_ordered(hits: list[Hit]) -> None:
    for hit in hits:
        assert 0.0 < hit.score <= hit.match <= 1.0, hit
        assert hit.score == pytest.approx(scored(hit.match, hit.strength))
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


@pytest.fixture
def both(home: Path, repo: Path) -> Memdir:
    md = Memdir(home=home, project=repo, sync_interval=0, semantic=True)
    _store(md)
    return md


# -- the formula ------------------------------------------------------------------------------

def test_idf_is_fts5s_and_an_ideal_match_has_ratio_one() -> None:
    # Every document 4 tokens long (the average), one column of weight 1: a document holding
    # each query word once is the ideal match, whatever the idf (a 2-row table clamps it).
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    for rows in (["alpha beta gamma delta", "alpha one two three"],
                 ["alpha beta gamma delta", "alpha one two three", "four five six seven",
                  "eight nine ten eleven", "beta x y z"]):
        conn.execute("DELETE FROM t")
        conn.executemany("INSERT INTO t (body) VALUES (?)", [(r,) for r in rows])
        counts = [[conn.execute("SELECT count(*) FROM t WHERE t MATCH ?", (f'"{w}"',))
                   .fetchone()[0]] for w in ("alpha", "beta")]
        bm25 = -conn.execute("SELECT bm25(t) FROM t WHERE t MATCH '\"alpha\" OR \"beta\"' "
                             "AND rowid = 1").fetchone()[0]
        assert bm25 / ideal_bm25(len(rows), counts) == pytest.approx(1.0, rel=1e-9)
    assert idf(5, 2) == pytest.approx(math.log(3.5 / 2.5)) and idf(2, 1) == 1e-6
    assert lexical_evidence(3.0, 3.0) == pytest.approx(
        MIN_MATCH + (1 - MIN_MATCH) * (1 - math.exp(-LEXICAL_SATURATION)))
    assert MIN_MATCH < lexical_evidence(1e-9, 3.0) < lexical_evidence(2e-9, 3.0) < 0.002
    assert lexical_evidence(0.0, 3.0) == 0.0 == lexical_evidence(1.0, 0.0)
    # Strength is a bounded exponent: score <= match, 0.6 .. 1.0.
    assert strength_factor(-1) == 0.6 and strength_factor(0.5) == 0.8 and strength_factor(9) == 1
    assert scored(0.5, 1.0) == 0.5 and scored(0.5, 0.0) == pytest.approx(1 - 0.5 ** 0.6)
    assert scored(0.0, 1.0) == 0.0 and scored(1.0, 0.0) == 1.0


# -- the library --------------------------------------------------------------------------------

def test_the_reported_case_every_hit_has_evidence_and_a_score(both: Memdir) -> None:
    for mode in MODES:
        hits = both.search("staging deployments database", mode=mode, touch=False)
        names = [h.memory.name for h in hits]
        assert names[0].startswith("Deployments go through the staging cluster")
        integration = next(h for h in hits if h.memory.name.startswith("Integration tests"))
        assert integration.score > 0.1 and integration.match > 0.1  # it matched "database"
        _bounded_and_ordered(hits)
        assert both.search(NOTHING, mode=mode, touch=False) == []


def test_every_mode_and_query_is_bounded_and_in_score_order(both: Memdir) -> None:
    both.store("Never deploy on Fridays", type="feedback", relevance="high")
    both.store("Deploy notes from an old incident", type="episode", relevance="low")
    _settled(both)
    for mode in MODES:
        for query in [*QUERIES, "deploy", "database mocks deploy"]:
            _bounded_and_ordered(both.search(query, mode=mode, touch=False))


def test_a_pair_scores_the_same_whatever_else_is_a_candidate(both: Memdir) -> None:
    """Exact (up to strength decaying between two calls): with the index's statistics
    unchanged, a memory's score for a query does not depend on the limit, on filters that
    remove the other candidates, or on the other hits."""
    both.store("Staging deploys need a database snapshot first", type="procedure")
    _settled(both)
    for mode in MODES:
        full = {h.memory.id: h.score for h in
                both.search("staging deployments database", mode=mode, touch=False)}
        assert len(full) >= 3
        for n in range(1, len(full) + 1):
            for hit in both.search("staging deployments database", mode=mode, touch=False,
                                   limit=n):
                assert hit.score == pytest.approx(full[hit.memory.id], abs=1e-6)
        alone = both.search("staging deployments database", mode=mode, touch=False,
                            types=["procedure"])
        assert [h.score for h in alone] == pytest.approx([full[h.memory.id] for h in alone],
                                                        abs=1e-6) and alone


def test_more_memories_move_a_pairs_score_only_through_word_statistics(both: Memdir) -> None:
    """Within 0.02 when the store grows twelvefold with memories that share no query word: only
    the average length and the idf of the words move, and the idf cancels in the ratio."""
    query = "staging deployments database"
    before = {m: {h.memory.id: h.score for h in both.search(query, mode=m, touch=False)}
              for m in MODES}
    _store(both, [f"The office plant needs water on day {n} of the rota" for n in range(60)])
    for mode in MODES:
        after = {h.memory.id: h.score for h in both.search(query, mode=mode, touch=False)}
        assert after.keys() == before[mode].keys()
        for key, score in before[mode].items():
            assert after[key] == pytest.approx(score, abs=0.02)


def test_words_only_keeps_bm25_times_the_strength_factor_order(md: Memdir) -> None:
    """Only the number shown changed: the order in one query is BM25 × (0.75 .. 1.25)."""
    for n, (kind, relevance) in enumerate([("feedback", "high"), ("episode", "low"),
                                           ("decision", "medium"), ("preference", "high")]):
        md.store(f"Deploy step {n}: the staging database " + "and more words " * n,
                 type=kind, relevance=relevance)
    md.store("Deploy the staging database from the runbook, database first", type="episode")
    hits = md.search("staging database deploy", mode="fts", touch=False, limit=20)
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    raw = {r[0]: -r[1] for r in md.index.conn.execute(
        f"SELECT m.id, bm25(memories_fts, {weights}) FROM memories_fts JOIN memories m ON "
        "m.rowid = memories_fts.rowid WHERE memories_fts MATCH ?",
        (fts_query("staging database deploy"),))}
    old = sorted(hits, key=lambda h: -raw[h.memory.id] * (0.75 + 0.5 * min(h.strength, 1.0)))
    assert [h.memory.id for h in hits] == [h.memory.id for h in old] and len(hits) == 5
    assert len({round(h.strength, 3) for h in hits}) > 1  # strength did take part


def test_sessions_and_memories_share_one_scale(md: Memdir) -> None:
    _store(md)
    md.index_session([
        {"role": "user", "content": "The staging cluster was down, so deployments waited"},
        {"role": "assistant", "content": "I will retry the staging deployments after lunch"},
    ], session_id="s-1")
    query = "staging deployments"
    memories = {h.memory.id: h.score for h in md.search(query, touch=False)}
    chunks = md.search(query, touch=False, sources=("sessions",))
    mixed = md.search(query, touch=False, sources=("memories", "sessions"))
    assert chunks and memories
    _bounded_and_ordered(mixed)
    # Mixing rescales nothing: each hit keeps the score it has alone.
    alone = {**memories, **{h.memory.id: h.score for h in chunks}}
    assert {h.memory.id: h.score for h in mixed} == {h.memory.id: alone[h.memory.id]
                                                     for h in mixed}
    assert {h.session is not None for h in mixed} == {True, False}
    # A chunk is scored as a memory of strength 0: below a stored memory with the same match.
    assert all(h.strength == 0.0 and h.score == pytest.approx(scored(h.match, 0.0))
               for h in chunks)


# -- the interfaces -----------------------------------------------------------------------------

def test_cli_on_a_two_memory_store_shows_plain_bounded_scores(cli: Any) -> None:
    for text in TEXTS[:2]:
        cli("store", text, "--type", "user", check=True)
    out = cli("search", "pnpm", check=True).stdout
    rows = out.splitlines()[2:]  # under the header and its rule
    scores = [row.split()[0] for row in rows]
    # The score column only: a memory id may itself look like e-notation ("3e2j26e7").
    assert scores and all(re.fullmatch(r"\d\.\d{3}", s) for s in scores), out
    score = float(scores[0])
    assert 0.3 < score <= 1.0
    for args in (("search", "pnpm", "--json"), ("search", "staging cluster", "--json")):
        hits = json.loads(cli(*args, check=True).stdout)
        assert hits and all(0 < h["score"] <= h["match"] <= 1 and h["strength"] >= 0
                            for h in hits)
    assert json.loads(cli("search", NOTHING, "--json", check=True).stdout) == []


def test_mcp_recall_scores_are_on_the_scale(both: Memdir) -> None:
    async def main() -> None:
        async with Client(build_server(md=both), read_timeout_seconds=30) as client:
            for query in QUERIES:
                result = await client.call_tool("memory_recall", {"query": query})
                assert not result.is_error and result.structured_content is not None
                scores = [h["score"] for h in result.structured_content["hits"]]
                assert all(0 < s <= 1 for s in scores) and scores == sorted(scores, reverse=True)
            empty = await client.call_tool("memory_recall", {"query": NOTHING})
            assert empty.structured_content is not None
            assert empty.structured_content["hits"] == []

    anyio.run(main)


@pytest.mark.parametrize("semantic", ["0", "1"])
def test_http_search_scores_are_on_the_scale(home: Path, repo: Path, semantic: str) -> None:
    with Memdir(home=home, project=repo, semantic=False) as md:
        _store(md)
    with running_server(home, repo, env={"MEMDIR_SEMANTIC": semantic}) as server, \
            server.client() as api:
        for query in QUERIES:
            hits = api.get("/api/memory/search", params={"q": query}).json()["hits"]
            assert all(0 < h["score"] <= h["match"] <= 1 for h in hits)
            assert [h["score"] for h in hits] == sorted((h["score"] for h in hits),
                                                        reverse=True)
        found = api.get("/api/memory/search",
                        params={"q": "staging deployments database"}).json()["hits"]
        assert any(h["memory"]["name"].startswith("Integration tests") and h["score"] > 0.1
                   for h in found)
        assert api.get("/api/memory/search", params={"q": NOTHING}).json()["hits"] == []


def test_idf_survives_counts_taken_across_a_concurrent_write() -> None:
    # The row count and a word's count are two statements: a write between them can make
    # the word's count the larger. That is a word in every row, not a math domain error.
    from memdir.retrieval.scale import IDF_FLOOR, idf

    assert idf(3, 5) == idf(3, 3) == IDF_FLOOR
    assert idf(10, -1) == idf(10, 0) > 0
