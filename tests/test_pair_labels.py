"""The labelled memory-text pairs are well formed (schema only: no rule is run here).

``tests/data/near_duplicates.jsonl`` (the set the merge and conflict rules are written
against) and ``tests/data/conflict_pairs_holdout.jsonl`` (other domains and styles, kept
apart to measure generalisation; ``bench/merge.py --holdout``). Every line is one pair
``{"a", "b", "same", "kind", "why"}``; ``same`` says whether the two texts are one memory,
and ``kind`` must agree with it (``bench/merge.py`` documents each kind).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"
MAIN = DATA / "near_duplicates.jsonl"
HOLDOUT = DATA / "conflict_pairs_holdout.jsonl"

#: Kinds of pairs that say one thing (``same``: true).
SAME_KINDS = frozenset({"reorder", "paraphrase", "converse", "extra-detail", "typo", "article"})
#: Kinds of pairs that disagree: one subject, two values (``same``: false).
DISAGREEING_KINDS = frozenset({"swapped-order", "antonym", "number", "negation", "number-word",
                               "unit", "named-alternative", "reversed-relation"})
#: Kinds of pairs that are neither one memory nor a conflict (``same``: false).
UNRELATED_KINDS = frozenset({"different-fact", "different-subject"})
KINDS = SAME_KINDS | DISAGREEING_KINDS | UNRELATED_KINDS

#: The least number of pairs of each kind in the main set.
MAIN_MINIMUM = {"article": 40, "paraphrase": 80, "number-word": 25, "unit": 25,
                "named-alternative": 25, "antonym": 50, "reversed-relation": 25, "number": 55,
                "different-subject": 60, "reorder": 30, "converse": 20, "extra-detail": 15,
                "typo": 10, "swapped-order": 20, "negation": 20, "different-fact": 40}
#: The holdout set: every kind, a few of each.
HOLDOUT_MINIMUM = dict.fromkeys(KINDS, 5) | {"different-subject": 20}


def load(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text("utf-8").splitlines()
    assert all(line.strip() for line in lines), f"{path.name}: an empty line"
    return [json.loads(line) for line in lines]


SETS = {"main": (MAIN, 650, MAIN_MINIMUM), "holdout": (HOLDOUT, 150, HOLDOUT_MINIMUM)}


@pytest.mark.parametrize("name", list(SETS))
def test_every_line_is_a_labelled_pair(name: str) -> None:
    path, _, _ = SETS[name]
    for number, pair in enumerate(load(path), 1):
        where = f"{path.name}:{number}"
        assert set(pair) == {"a", "b", "same", "kind", "why"}, where
        assert all(isinstance(pair[key], str) for key in ("a", "b", "kind", "why")), where
        assert isinstance(pair["same"], bool), where
        assert pair["a"].strip() and pair["b"].strip() and pair["why"].strip(), where
        assert pair["a"] == pair["a"].strip() and pair["b"] == pair["b"].strip(), where
        assert pair["a"] != pair["b"], where
        assert pair["kind"] in KINDS, (where, pair["kind"])
        assert pair["same"] == (pair["kind"] in SAME_KINDS), (where, pair["kind"])


@pytest.mark.parametrize("name", list(SETS))
def test_no_pair_twice(name: str) -> None:
    """Neither as written nor with its two texts swapped."""
    path, _, _ = SETS[name]
    keys = [frozenset((p["a"], p["b"])) for p in load(path)]
    twice = {tuple(sorted(k)) for k in keys if keys.count(k) > 1}
    assert not twice


@pytest.mark.parametrize("name", list(SETS))
def test_every_kind_and_both_labels_are_there(name: str) -> None:
    path, size, minimum = SETS[name]
    pairs = load(path)
    assert len(pairs) >= size
    counts = {kind: sum(p["kind"] == kind for p in pairs) for kind in KINDS}
    assert {k: counts[k] for k in KINDS if counts[k] < minimum[k]} == {}
    for group in (SAME_KINDS, DISAGREEING_KINDS, UNRELATED_KINDS):
        assert sum(counts[k] for k in group) > 0
    assert any(p["same"] for p in pairs) and not all(p["same"] for p in pairs)


def test_the_holdout_shares_no_text_with_the_main_set() -> None:
    main = {text for p in load(MAIN) for text in (p["a"], p["b"])}
    assert [p for p in load(HOLDOUT) if p["a"] in main or p["b"] in main] == []
