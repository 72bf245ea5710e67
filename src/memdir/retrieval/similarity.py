"""Word overlap between two texts: what near-duplicate detection (extraction) and the merge
rule (consolidation) compare.

Invariant: :func:`similarity` is symmetric, in 0..1, and 0 when either text has no word
longer than 2 letters.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["content_words", "similarity"]

_WORD = re.compile(r"\w+")


@lru_cache(maxsize=65536)
def content_words(text: str) -> frozenset[str]:
    """The words (longer than 2 letters, lower-cased) that similarity compares (cached:
    consolidation compares each text with several others)."""
    return frozenset(w for w in _WORD.findall(text.lower()) if len(w) > 2)


def similarity(a: str, b: str) -> float:
    """Jaccard overlap of the words (longer than 2 letters) of two texts, 0..1."""
    left, right = content_words(a), content_words(b)
    return len(left & right) / len(left | right) if left and right else 0.0
