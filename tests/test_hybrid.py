"""Hybrid fusion on hand-made scores: reciprocal rank, and the absolute score fusion of both
stores (memdir.retrieval.scale), with strength as a bounded exponent."""

from __future__ import annotations

import pytest

from memdir.retrieval.hybrid import LEXICAL_WEIGHT, RRF_K, fuse, fuse_scores, rrf
from memdir.retrieval.scale import MIN_MATCH, SIMILARITY_FLOOR, scored


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


# -- score fusion (the default of both stores) --------------------------------------------


def _order(fused: list[tuple[str, float, float]]) -> list[str]:
    return [key for key, _, _ in fused]


def test_score_fusion_keeps_how_far_ahead_a_match_is() -> None:
    # "exact" towers over the rest in words and is a hair behind "near" in cosine. Rank fusion
    # sees first-and-second against second-and-first: a tie. Scores see the margin.
    words = {"exact": 0.9, "near": 0.3, "other": 0.28}
    meaning = {"near": 0.50, "exact": 0.49, "other": 0.10}
    ranks = rrf([sorted(words, key=lambda k: -words[k]),
                 sorted(meaning, key=lambda k: -meaning[k])])
    assert ranks["exact"] == pytest.approx(ranks["near"])
    assert _order(fuse_scores(words, words, meaning, {}))[0] == "exact"
    # And the other way round: a clear meaning match beats a hair's lead in words.
    words = {"a": 0.31, "b": 0.30, "c": 0.05}
    meaning = {"a": 0.20, "b": 0.80, "c": 0.15}
    assert _order(fuse_scores(words, words, meaning, {}))[0] == "b"


def test_found_by_both_beats_strong_in_one_only() -> None:
    words = {"lexical": 0.6, "both": 0.55}
    meaning = {"lexical": 0.10, "both": 0.55, "semantic": 0.60}
    order = _order(fuse_scores(["lexical", "both", "semantic"], words, meaning, {}))
    assert order[0] == "both"


def test_the_weight_moves_between_the_two_orders() -> None:
    words = {"a": 0.9, "b": 0.5, "c": 0.1}
    meaning = {"a": 0.25, "b": 0.4, "c": 0.9}
    keys = ["a", "b", "c"]
    assert _order(fuse_scores(keys, words, meaning, {}, lexical_weight=1.0)) == ["a", "b", "c"]
    assert _order(fuse_scores(keys, words, meaning, {}, lexical_weight=0.0)) == ["c", "b", "a"]
    assert 0.0 < LEXICAL_WEIGHT < 1.0
    with pytest.raises(ValueError, match="share"):
        fuse_scores(keys, words, meaning, {}, lexical_weight=1.5)


def test_a_vector_neighbour_without_words_has_only_semantic_evidence() -> None:
    # "far" matched no word: it needs a clearly better cosine to pass those that did.
    words = {"w1": 0.5, "w2": 0.4}
    close = fuse_scores(["w1", "w2", "far"], words, {"w1": 0.5, "w2": 0.5, "far": 0.52}, {})
    assert _order(close)[-1] == "far"
    clear = fuse_scores(["w1", "w2", "far"], words, {"w1": 0.2, "w2": 0.2, "far": 0.9}, {})
    assert _order(clear)[0] == "far"


def test_a_candidate_without_a_vector_is_matched_on_its_words_alone() -> None:
    words = {"new": 0.6, "old": 0.5, "x": 0.1}
    meaning = {"old": 0.5, "x": 0.3, "y": 0.7}
    fused = {key: match for key, _, match in fuse_scores(["new", "old", "x", "y"], words,
                                                          meaning, {})}
    assert fused["new"] == pytest.approx(0.6)
    # Without any cosine at all the order (and the match) is the words'.
    assert fuse_scores(["x", "old", "new"], words, {}, {}) == [
        (key, scored(words[key], 0.0), words[key]) for key in ("new", "old", "x")]


def test_no_evidence_no_hit() -> None:
    # No word matched and a cosine at or below the floor: nothing says it answers the query.
    fused = fuse_scores(["w", "none", "floor"], {"w": 0.4},
                        {"w": 0.1, "none": 0.05, "floor": SIMILARITY_FLOOR}, {})
    assert _order(fused) == ["w"]
    # A word match is evidence however small its share: at least MIN_MATCH, never a tie.
    tiny = fuse_scores(["a", "b"], {"a": 1e-9, "b": 2e-9}, {"a": 0.0, "b": 0.0}, {})
    assert _order(tiny) == ["b", "a"] and MIN_MATCH <= tiny[1][2] < tiny[0][2]


def test_score_fusion_is_bounded_absolute_and_in_score_order() -> None:
    words = {"exact": 0.9, "weak": 0.1, "mid": 0.4}
    meaning = {"exact": 0.6, "weak": 0.3, "mid": 0.45}
    power = {"exact": 0.0, "weak": 1.0, "mid": 0.5}
    fused = fuse_scores(words, words, meaning, power)
    assert _order(fused)[0] == "exact"  # old but exact beats fresh and weak
    for key, score, match in fused:
        assert 0.0 < score <= match <= 1.0
        assert score == pytest.approx(scored(match, power[key]))
    assert [s for _, s, _ in fused] == sorted((s for _, s, _ in fused), reverse=True)
    # Absolute: a candidate's score does not depend on the other candidates.
    alone = fuse_scores(["mid"], words, meaning, power)
    assert alone == [t for t in fused if t[0] == "mid"]
    # Equal matches: the stronger memory first.
    tied = fuse_scores(["p", "q"], {"p": 0.5, "q": 0.5}, {"p": 0.4, "q": 0.4},
                       {"p": 0.1, "q": 0.9})
    assert _order(tied) == ["q", "p"]
    # Lexical evidence out of [0, 1] is clamped, never trusted.
    assert fuse_scores(["big"], {"big": 7.0}, {}, {})[0][2] == 1.0


def test_score_fusion_edge_cases_are_deterministic() -> None:
    assert fuse_scores([], {}, {}, {}) == []
    # No strength given counts as 0.
    assert fuse_scores(["only"], {"only": 0.5}, {}, {}) == [("only", scored(0.5, 0.0), 0.5)]
    first = fuse_scores(["b", "a", "b"], {"a": 0.4, "b": 0.4}, {"a": 0.3, "b": 0.3}, {})
    assert _order(first) == ["a", "b"]  # duplicates once, equal scores by key
    assert first == fuse_scores(["a", "b"], {"a": 0.4, "b": 0.4}, {"a": 0.3, "b": 0.3}, {})
    assert len(fuse_scores("abc", {}, {"a": 0.4, "b": 0.5, "c": 0.6}, {}, limit=2)) == 2
