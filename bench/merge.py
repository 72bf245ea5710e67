"""Merge threshold for consolidation: precision / recall / F1 on labelled memory pairs.

Each pair of ``tests/data/near_duplicates.jsonl`` is a duplicate (``same``: the same memory in
other words) or a hard negative (same topic, a different fact: other number, version, tool,
target, a negation, the opposite decision). A rule "merges" a pair when its score reaches the
threshold; a merge of a negative loses information, so the threshold picked is the one with
the best precision at recall >= 0.5 (ties: best F1).

Rules: ``overlap`` (``memdir.extract.similarity``, what consolidation ships), ``cosine``
(all-MiniLM-L6-v2, only with the embed extra), ``overlap+cos`` (overlap >= t AND cosine >=
the best second threshold for that t), ``overlap+guard`` (overlap >= t AND no number of one
text swapped for another in the other, and the same negation words on both sides: an idea
to test, not shipped), ``overlap+guard+contain`` (that, and the words of one text all occur in the
other: no word swapped, as in "team Falcon" / "team Heron").

Usage::

    python bench/merge.py [--data PATH] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from memdir import embed
from memdir.consolidate import MERGE_SIMILARITY
from memdir.extract import similarity

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "near_duplicates.jsonl"
THRESHOLDS = [round(0.3 + 0.05 * i, 2) for i in range(13)]  # 0.30 .. 0.90
SECOND = [round(0.5 + 0.02 * i, 2) for i in range(25)]  # cosine grid of combined rules
MIN_RECALL = 0.5
TARGET_PRECISION = 0.95  # issue 7
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"\d+(?:\.\d+)*")
_NEGATION = re.compile(r"\b(?:not|no|never|don't|dont|doesn't|isn't|without|disable\w*)\b")


def load(path: Path = DATA) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def guard(a: str, b: str) -> bool:
    """No number swapped for another (one side may add some, e.g. a date) and the same
    negation words on both sides."""
    a, b = a.lower(), b.lower()
    na, nb = set(_NUMBER.findall(a)), set(_NUMBER.findall(b))
    return (na <= nb or nb <= na) and set(_NEGATION.findall(a)) == set(_NEGATION.findall(b))


def contained(a: str, b: str) -> bool:
    """The words (longer than 2 letters) of one text all occur in the other: nothing swapped."""
    wa, wb = _WORD.findall(a.lower()), _WORD.findall(b.lower())
    sa, sb = {w for w in wa if len(w) > 2}, {w for w in wb if len(w) > 2}
    return sa <= sb or sb <= sa


def prf(merged: list[bool], same: list[bool]) -> dict[str, float]:
    tp = sum(m and s for m, s in zip(merged, same, strict=True))
    fp = sum(m and not s for m, s in zip(merged, same, strict=True))
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / sum(same) if any(same) else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0,
            "false_merges": fp}


def best(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Best precision at recall >= MIN_RECALL (ties: F1); None when no row gets there."""
    ok = [row for row in rows if row["recall"] >= MIN_RECALL]
    return max(ok, key=lambda row: (row["precision"], row["f1"])) if ok else None


def at_target(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Best recall at precision >= TARGET_PRECISION (issue 7's bar)."""
    ok = [row for row in rows if row["precision"] >= TARGET_PRECISION and row["recall"] > 0]
    return max(ok, key=lambda row: (row["recall"], -row["t"])) if ok else None


def _cosines(pairs: list[dict[str, Any]]) -> list[float] | None:
    """MiniLM cosine of each pair, or None without the embed extra."""
    embedder = embed.load_embedder() if embed.available() else None
    if embedder is None:
        return None
    va = embedder.embed([p["a"] for p in pairs])
    vb = embedder.embed([p["b"] for p in pairs])
    return [float(x @ y) for x, y in zip(va, vb, strict=True)]


def evaluate(pairs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows ``{t, [t2], precision, recall, f1, false_merges}`` per rule (combined: full grid)."""
    same = [bool(p["same"]) for p in pairs]
    overlap = [similarity(p["a"], p["b"]) for p in pairs]
    ok = [guard(p["a"], p["b"]) for p in pairs]
    inside = [contained(p["a"], p["b"]) for p in pairs]
    cosine = _cosines(pairs)

    def score(t: float, t2: float | None, use_guard: bool) -> dict[str, float]:
        merged = [o >= t and (t2 is None or c >= t2) and (g or not use_guard)
                  for o, c, g in zip(overlap, cosine or overlap, ok, strict=True)]
        return prf(merged, same)

    rules = {"overlap": [{"t": t, **score(t, None, False)} for t in THRESHOLDS],
             "overlap+guard": [{"t": t, **score(t, None, True)} for t in THRESHOLDS],
             "overlap+guard+contain": [
                 {"t": t, **prf([o >= t and g and i for o, g, i in
                                 zip(overlap, ok, inside, strict=True)], same)}
                 for t in THRESHOLDS]}
    if cosine is None:
        return rules
    rules["cosine"] = [{"t": t, **prf([c >= t for c in cosine], same)} for t in THRESHOLDS]
    for key, use_guard in (("overlap+cos", False), ("overlap+cos+guard", True)):
        rules[key] = [{"t": t, "t2": t2, **score(t, t2, use_guard)}
                      for t in THRESHOLDS for t2 in SECOND]
    return rules


def _row(rows: list[dict[str, Any]], t: float) -> dict[str, Any]:
    """The row for ``t``; for a combined rule the cosine threshold best for that ``t``."""
    at_t = [row for row in rows if row["t"] == t]
    return best(at_t) or max(at_t, key=lambda row: (row["precision"], row["recall"]))


def table(rules: dict[str, list[dict[str, Any]]]) -> str:
    names = list(rules)
    lines = ["| t | " + " | ".join(f"{n} P / R / F1 (FP)" for n in names) + " |",
             "|---" * (len(names) + 1) + "|"]
    for t in THRESHOLDS:
        cells = []
        for n in names:
            row = _row(rules[n], t)
            extra = f", cos>={row['t2']:.2f}" if "t2" in row else ""
            cells.append(f"{row['precision']:.2f} / {row['recall']:.2f} / {row['f1']:.2f} "
                         f"({row['false_merges']}{extra})")
        lines.append(f"| {t:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _describe(row: dict[str, Any]) -> str:
    t2 = f" AND cosine >= {row['t2']:.2f}" if "t2" in row else ""
    return (f"t = {row['t']:.2f}{t2}: precision {row['precision']:.3f}, "
            f"recall {row['recall']:.3f}, F1 {row['f1']:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", type=Path, help="also write the results here")
    opts = parser.parse_args(argv)
    pairs = load(opts.data)
    rules = evaluate(pairs)
    print(f"{len(pairs)} pairs, {sum(p['same'] for p in pairs)} duplicates; "
          f"shipped rule: overlap >= {MERGE_SIMILARITY}\n")
    print(table(rules) + "\n")
    picks = {name: best(rows) for name, rows in rules.items()}
    targets = {name: at_target(rows) for name, rows in rules.items()}
    for name in rules:
        pick, hit = picks[name], targets[name]
        print(f"- {name}: best at recall >= {MIN_RECALL}: "
              + (_describe(pick) if pick else "recall never reached"))
        print(f"  {name}: best at precision >= {TARGET_PRECISION}: "
              + (_describe(hit) if hit else "precision never reached"))
    if "cosine" not in rules:
        print("- cosine rules skipped: the embed extra is not installed")
    if opts.json:
        report = {"pairs": len(pairs), "min_recall": MIN_RECALL, "rules": rules,
                  "best": picks, "at_target": targets}
        opts.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
