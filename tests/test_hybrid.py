"""Reciprocal rank fusion with strength as a bounded multiplier, on hand-made rankings."""

from __future__ import annotations

import pytest

from memdir.hybrid import RRF_K, fuse, rrf


def test_found_by_both_beats_first_in_one() -> None:
    scores = rrf([["a", "both"], ["b", "both"]])
    assert scores["both"] == pytest.approx(2 / (RRF_K + 2))
    assert scores["both"] > scores["a"] == scores["b"] == pytest.approx(1 / (RRF_K + 1))


def test_weights_scale_a_ranking() -> None:
    scores = rrf([["x"], ["y"]], weights=[1.0, 2.0])
    assert scores["y"] == pytest.approx(2 * scores["x"])
    with pytest.raises(ValueError, match="one weight per ranking"):
        rrf([["x"]], weights=[1.0, 2.0])


def test_strength_breaks_ties_but_cannot_overturn_a_clear_match() -> None:
    tied = fuse(["old", "new"], ["new", "old"], {"old": 0.05, "new": 0.9})
    assert [key for key, _, _ in tied] == ["new", "old"]  # equal match: stronger first
    clear = fuse(["exact"], ["exact", "x", "y", "z", "fresh"], {"exact": 0.0, "fresh": 1.0})
    order = [key for key, _, _ in clear]
    assert order.index("exact") < order.index("fresh")
    for _key, score, match in clear:
        assert 0.75 * match <= score <= 1.25 * match


def test_deterministic_and_limited() -> None:
    first = fuse(["b", "a"], ["a", "b"], {})
    assert first == fuse(["b", "a"], ["a", "b"], {})
    assert [k for k, _, _ in first] == ["a", "b"]  # equal scores: by key
    assert len(fuse(["a", "b", "c"], [], {}, limit=2)) == 2
    assert fuse([], [], {}) == []
