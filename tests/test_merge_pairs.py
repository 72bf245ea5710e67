"""The merge rule consolidation ships, judged on labelled memory pairs (issue 7).

``tests/data/near_duplicates.jsonl``: duplicates (the same memory in other words) and hard
negatives (same topic, another fact). Merging a negative loses a memory, so precision is what
counts; recall is reported. ``bench/merge.py`` sweeps the thresholds on the same file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memdir.consolidate import MERGE_SIMILARITY, near_duplicate
from memdir.extract import similarity

DATA = Path(__file__).parent / "data" / "near_duplicates.jsonl"
PAIRS: list[dict[str, Any]] = [json.loads(line) for line in DATA.read_text("utf-8").splitlines()
                               if line.strip()]
#: Pairs that differ by a negation or by a number / version: never the same memory.
NEVER_MERGE = ("negation", "number", "version")


def merged(pair: dict[str, Any]) -> bool:
    return near_duplicate(pair["a"], pair["b"])


def test_labelled_set_is_sound() -> None:
    assert len(PAIRS) >= 120
    assert all(set(p) == {"a", "b", "same", "why"} and isinstance(p["same"], bool)
               and p["a"].strip() and p["b"].strip() and p["a"] != p["b"] and p["why"]
               for p in PAIRS)
    duplicates = sum(p["same"] for p in PAIRS)
    assert 0.4 <= duplicates / len(PAIRS) <= 0.6
    assert len({(p["a"], p["b"]) for p in PAIRS}) == len(PAIRS)
    assert sum(p["why"] in NEVER_MERGE for p in PAIRS) >= 20


def test_shipped_rule_precision(record_property: Callable[[str, object], None]) -> None:
    hits = [p for p in PAIRS if merged(p)]
    true = [p for p in hits if p["same"]]
    precision = len(true) / len(hits) if hits else 1.0
    recall = len(true) / sum(p["same"] for p in PAIRS)
    record_property("merge_precision", round(precision, 3))
    record_property("merge_recall", round(recall, 3))
    print(f"similarity >= {MERGE_SIMILARITY}: precision {precision:.3f}, recall {recall:.3f}")
    wrong = [f"{p['a']!r} + {p['b']!r} ({p['why']})" for p in hits if not p["same"]]
    assert precision >= 0.9, (f"precision {precision:.3f} (recall {recall:.3f}); false merges:\n"
                              + "\n".join(wrong))


@pytest.mark.parametrize("pair", [p for p in PAIRS if p["why"] in NEVER_MERGE],
                         ids=lambda p: f"{p['why']}:{p['a'][:30]}")
def test_negation_and_number_pairs_never_merged(pair: dict[str, Any]) -> None:
    assert not pair["same"]
    assert not merged(pair), f"similarity {similarity(pair['a'], pair['b']):.2f}"
