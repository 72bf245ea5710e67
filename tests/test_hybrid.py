"""Hybrid fusion on hand-made scores: reciprocal rank (PostgreSQL) and z-score fusion (SQLite),
with strength as a bounded multiplier."""

from __future__ import annotations

import pytest

from memdir.hybrid import LEXICAL_WEIGHT, RRF_K, fuse, fuse_scores, rrf, zscores


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


# -- score fusion (the SQLite index's default) -------------------------------------------


def _order(fused: list[tuple[str, float, float]]) -> list[str]:
    return [key for key, _, _ in fused]


def test_zscores() -> None:
    assert zscores([1.0, 2.0, 3.0]) == pytest.approx([-1.224744871, 0.0, 1.224744871])
    assert zscores([4.0, 4.0]) == [0.0, 0.0]  # no spread: no information
    assert zscores([]) == []


def test_score_fusion_keeps_how_far_ahead_a_match_is() -> None:
    # "exact" towers over the rest in BM25 and is a hair behind "near" in cosine. Rank fusion
    # sees first-and-second against second-and-first: a tie. Scores see the margin.
    words = {"exact": 20.0, "near": 2.0, "other": 1.9}
    meaning = {"near": 0.50, "exact": 0.49, "other": 0.10}
    ranks = rrf([sorted(words, key=lambda k: -words[k]),
                 sorted(meaning, key=lambda k: -meaning[k])])
    assert ranks["exact"] == pytest.approx(ranks["near"])
    assert _order(fuse_scores(words, words, meaning, {}))[0] == "exact"
    # And the other way round: a clear meaning match beats a hair's lead in words.
    words = {"a": 3.1, "b": 3.0, "c": 0.5}
    meaning = {"a": 0.20, "b": 0.80, "c": 0.15}
    assert _order(fuse_scores(words, words, meaning, {}))[0] == "b"


def test_found_by_both_beats_strong_in_one_only() -> None:
    words = {"lexical": 5.0, "both": 4.5}
    meaning = {"lexical": 0.10, "both": 0.55, "semantic": 0.60}
    order = _order(fuse_scores(["lexical", "both", "semantic"], words, meaning, {}))
    assert order[0] == "both"


def test_the_weight_moves_between_the_two_orders() -> None:
    words = {"a": 9.0, "b": 5.0, "c": 1.0}
    meaning = {"a": 0.2, "b": 0.4, "c": 0.9}
    keys = ["a", "b", "c"]
    assert _order(fuse_scores(keys, words, meaning, {}, lexical_weight=1.0)) == ["a", "b", "c"]
    assert _order(fuse_scores(keys, words, meaning, {}, lexical_weight=0.0)) == ["c", "b", "a"]
    assert 0.0 < LEXICAL_WEIGHT < 1.0
    with pytest.raises(ValueError, match="share"):
        fuse_scores(keys, words, meaning, {}, lexical_weight=1.5)


def test_a_vector_neighbour_without_words_counts_as_no_lexical_evidence() -> None:
    # "far" matched no word (BM25 0 among candidates that did): it needs a clearly better
    # cosine to pass them, and passes when it has one.
    words = {"w1": 4.0, "w2": 3.0}
    close = fuse_scores(["w1", "w2", "far"], words, {"w1": 0.5, "w2": 0.5, "far": 0.52}, {})
    assert _order(close)[-1] == "far"
    clear = fuse_scores(["w1", "w2", "far"], words, {"w1": 0.2, "w2": 0.2, "far": 0.9}, {})
    assert _order(clear)[0] == "far"


def test_a_candidate_without_a_vector_is_neither_helped_nor_sunk() -> None:
    # "new" has no vector yet: its cosine is the candidates' mean, so BM25 alone places it
    # against "old", whose cosine is that same mean.
    words = {"new": 6.0, "old": 5.0, "x": 1.0}
    meaning = {"old": 0.5, "x": 0.3, "y": 0.7}
    order = _order(fuse_scores(["new", "old", "x", "y"], words, meaning, {}))
    assert order.index("new") < order.index("old")
    # Without any cosine at all the order is BM25's.
    assert _order(fuse_scores(["x", "old", "new"], words, {}, {})) == ["new", "old", "x"]


def test_score_fusion_match_is_bounded_and_strength_is_a_bounded_multiplier() -> None:
    words = {"exact": 8.0, "weak": 1.0, "mid": 4.0}
    meaning = {"exact": 0.6, "weak": 0.3, "mid": 0.45}
    fused = fuse_scores(words, words, meaning, {"exact": 0.0, "weak": 1.0, "mid": 0.5})
    assert _order(fused)[0] == "exact"  # old but exact beats fresh and weak
    matches = {key: match for key, _, match in fused}
    assert matches["exact"] == 1.0 and matches["weak"] == 0.0 and 0 < matches["mid"] < 1
    for _key, score, match in fused:
        assert 0.75 * match <= score <= 1.25 * match
    # Equal matches: the stronger memory first.
    tied = fuse_scores(["p", "q"], {"p": 2.0, "q": 2.0}, {"p": 0.4, "q": 0.4},
                       {"p": 0.1, "q": 0.9})
    assert _order(tied) == ["q", "p"]


def test_score_fusion_edge_cases_are_deterministic() -> None:
    assert fuse_scores([], {}, {}, {}) == []
    # A lone candidate is the best match; no strength given counts as 0.
    assert fuse_scores(["only"], {"only": 3.0}, {}, {}) == [("only", 0.75, 1.0)]
    first = fuse_scores(["b", "a", "b"], {"a": 1.0, "b": 1.0}, {"a": 0.3, "b": 0.3}, {})
    assert _order(first) == ["a", "b"]  # duplicates once, equal scores by key
    assert first == fuse_scores(["a", "b"], {"a": 1.0, "b": 1.0}, {"a": 0.3, "b": 0.3}, {})
    assert len(fuse_scores("abc", {}, {"a": 0.1, "b": 0.2, "c": 0.3}, {}, limit=2)) == 2


def test_a_spread_below_the_noise_is_not_stretched() -> None:
    # Two candidates 0.01 apart in cosine: without a minimum spread that hair would count as
    # much as a BM25 lead of 4 to 1.
    words = {"a": 4.0, "b": 1.0}
    meaning = {"a": 0.50, "b": 0.51}
    assert zscores([0.50, 0.51]) == pytest.approx([-1.0, 1.0])
    assert zscores([0.50, 0.51], min_spread=0.05) == pytest.approx([-0.1, 0.1])
    assert _order(fuse_scores(["a", "b"], words, meaning, {})) == ["a", "b"]
    assert _order(fuse_scores(["a", "b"], words, meaning, {}, lexical_weight=0.1)) == ["a", "b"]
