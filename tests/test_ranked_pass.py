"""One FTS5 ranking pass serves a hybrid search twice (the pool of best matches, then the
word evidence of its vector neighbours): the same answers as the queries it replaced, with
the filters, ties, a date-only match and a pass cut short by its cap. Real SQLite, real
files, the real model where the extra is installed."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memdir import Memdir
from memdir.retrieval import search, semantic
from memdir.retrieval.search import best_matches, bm25_of, fts_query, own_words, pool_of

WORDS = ("deploy cache billing webhook retry staging canary rollback queue schema index "
         "token replica shard backup alert quota invoice ledger export").split()


def _fill(md: Memdir) -> None:
    rng = random.Random(7)
    items = []
    for n in range(240):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
        items.append({"content": f"Note {n}: {text}", "type": rng.choice(
            ["fact", "decision", "pitfall"]), "tags": [rng.choice(WORDS)]})
    items.append({"content": "Same words twice: deploy deploy", "type": "fact"})
    items.append({"content": "Same words twice: deploy deploy", "type": "decision",
                  "name": "a twin"})  # an exact tie in BM25, told apart by file name
    md.store_many(items)
    for memory in md.list(limit=None)[:30]:
        md.archive(memory.id)


@pytest.mark.parametrize("cap", [4000, 7])
@pytest.mark.parametrize("query", ["deploy", "billing webhook retry", "canary rollback",
                                   "shard backup alert quota", "nothing-matches-this"])
def test_the_pool_of_one_pass_is_best_matches(home: Path, repo: Path, query: str, cap: int,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "RANKED_CAP", cap)  # 7: cut short, in the middle of a pool
    with Memdir(home=home, project=repo) as md:
        _fill(md)
        dirs = md._dirs()
        fts = fts_query(query)
        assert fts is not None
        conn = md.index.conn
        for filters in ({"types": [], "tags": None, "include_archived": False},
                        {"types": ["decision"], "tags": None, "include_archived": False},
                        {"types": [], "tags": ["deploy", "cache"], "include_archived": True}):
            for limit in (1, 5, 25):
                old = [(r["dir"], r["file"], r["rank"]) for r in best_matches(
                    conn, fts, dirs, limit=limit, whole=False, **filters)]
                new = [(d, f, rank) for d, f, _, rank in pool_of(
                    conn, fts, search.ranked_matches(conn, fts), dirs, limit=limit, **filters)]
                assert new == old, (query, filters, limit)


def test_a_cut_short_pass_still_gives_every_neighbour_its_words(
        home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnxruntime", reason="hybrid search needs the embed extra")
    stamp = datetime.now(UTC)  # one instant: strength, and so a score, moves with time
    with Memdir(home=home, project=repo, semantic=True, sync_interval=0,
                clock=lambda: stamp) as md:
        _fill(md)
        md.store("The release train leaves every second Tuesday", type="fact", date="2026-03-03")
        md.embed_memories()
        queries = ["how do we deploy to staging", "billing webhook retries",
                   "what happens on Tuesday", "cache index schema"]
        whole = {q: [(h.memory.id, round(h.score, 9)) for h in md.search(
            q, mode="hybrid", touch=False, dates=False)] for q in queries}
        monkeypatch.setattr(search, "RANKED_CAP", 3)
        monkeypatch.setattr(semantic, "RANKED_CAP", 3)
        cut = {q: [(h.memory.id, round(h.score, 9)) for h in md.search(
            q, mode="hybrid", touch=False, dates=False)] for q in queries}
    assert cut == whole
    assert all(whole.values())


def test_a_memory_matching_only_in_its_dates_is_no_word_match_for_recall(
        home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        md.store("The release train leaves on time", type="fact", date="2026-03-03")
        md.store("Ship the Tuesday build to staging", type="fact")
        conn = md.index.conn
        fts = fts_query("tuesday")
        assert fts is not None
        every = {f for _, f, _, _ in pool_of(conn, fts, search.ranked_matches(conn, fts),
                                             md._dirs(), types=[], tags=None,
                                             include_archived=False, limit=10)}
        own = {f for _, f, _, _ in pool_of(conn, own_words(fts),
                                           search.ranked_matches(conn, own_words(fts)),
                                           md._dirs(), types=[], tags=None,
                                           include_archived=False, limit=10)}
        assert len(every) == 2 and len(own) == 1  # 2026-03-03 was a Tuesday
        [only] = own
        assert "tuesday-build" in only
        keys = [(str(md.directory("project").path), f) for f in every]
        assert set(bm25_of(conn, own_words(fts), keys)) == {k for k in keys if k[1] == only}
        assert [h.memory.body for h in md.search("tuesday", dates=False)] == [
            "Ship the Tuesday build to staging"]
