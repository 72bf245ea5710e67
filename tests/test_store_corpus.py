"""The labelled stores of bench/store_corpus.py: deterministic per seed, the sizes asked for,
labels that hold (pairs of one type and scope, disjoint, an article apart for the same-claim
copies), every text unique, nothing memdir's secret scanner would refuse, and a load into a
real store that keeps every record as its own memory."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from bench.store_corpus import DATASETS, Store, build, load, normal

from memdir.core.secrets import find_secrets

SIZES = (1_000, 10_000)
MIXES = ("templated", "diverse")


@cache
def store(size: int, mix: str, seed: int = 7) -> Store:
    return build(size, seed, mix, extra=200)


def test_the_same_seed_gives_the_same_store_and_another_seed_another() -> None:
    first, again = build(1_000, 3, "diverse", extra=50), build(1_000, 3, "diverse", extra=50)
    assert first == again
    assert build(1_000, 4, "diverse").records != first.records
    # The memories to store later do not change the store itself.
    assert build(1_000, 3, "diverse").records == first.records


@pytest.mark.parametrize("mix", MIXES)
@pytest.mark.parametrize("size", SIZES)
def test_sizes_and_counts(size: int, mix: str) -> None:
    s = store(size, mix)
    assert len(s.records) == size
    assert len(s.conflicts) == size // 100
    assert len(s.same_claims) == size // 100
    assert len(s.extra) == 200 and len(s.extra_partners) == 100
    families = sum(1 for r in s.records if r.source.split(":")[0] not in
                   ("note", "realtalk", "madial", "prefer", "always", "ask-first", "chose",
                    "style", "limit"))
    share = families / size
    assert 0.85 < share < 1.0 if mix == "templated" else 0.1 < share < 0.35
    if mix == "diverse" and DATASETS.exists():
        chat = sum(1 for r in s.records if r.source in ("realtalk", "madial"))
        assert chat > size // 5


@pytest.mark.parametrize("mix", MIXES)
def test_labels_are_consistent(mix: str) -> None:
    s = store(10_000, mix)
    texts = [r.content for r in s.records]
    assert len({normal(t) for t in [*texts, *(r.content for r in s.extra)]}) == \
        len(texts) + len(s.extra)
    assert set(s.kinds) == s.conflicts
    assert not s.conflicts & s.same_claims
    members = [i for pair in (*s.conflicts, *s.same_claims) for i in pair]
    assert len(members) == len(set(members)), "a memory in two labelled pairs"
    for a, b in (*s.conflicts, *s.same_claims):
        assert 0 <= a < b < len(texts)
        assert (s.records[a].type, s.records[a].scope) == (s.records[b].type, s.records[b].scope)
    for a, b in s.same_claims:
        longer, shorter = sorted((texts[a].split(" "), texts[b].split(" ")), key=len,
                                 reverse=True)
        assert len(longer) == len(shorter) + 1
        gone = [w for w in longer if w.lower() in ("the", "a")]
        assert any([w.lower() for w in longer[:i] + longer[i + 1:]] ==
                   [w.lower() for w in shorter] for i, w in enumerate(longer)
                   if w.lower() in ("the", "a")), (texts[a], texts[b], gone)
    for n, partner in s.extra_partners.items():
        assert s.extra[n].type == s.records[partner].type
        assert partner not in members
    assert {r.type for r in s.records} <= {"user", "feedback", "preference", "policy",
                                           "decision", "procedure", "pitfall", "fact",
                                           "reference", "project"}
    assert {r.scope for r in s.records} == {"user", "project"}


@pytest.mark.parametrize("mix", MIXES)
def test_nothing_looks_like_a_secret(mix: str) -> None:
    s = store(10_000, mix)
    texts = [t for r in (*s.records, *s.extra) for t in (r.content, r.name or "")]
    assert find_secrets(texts) == []


def test_a_store_loads_with_every_record_its_own_memory(tmp_path: Path) -> None:
    s = build(300, 5, "diverse")
    ids = load(s, tmp_path / "home", tmp_path / "project")
    assert len(set(ids)) == 300
