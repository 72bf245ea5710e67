"""The merge rule of consolidation on labelled memory pairs: precision / recall / F1.

Each pair of ``tests/data/near_duplicates.jsonl`` is a duplicate (``same``: the same memory in
other words) or a hard negative (same topic, a different fact), and has a ``kind``:
duplicates are ``reorder``, ``paraphrase``, ``converse`` ("X before Y" / "Y after X"),
``extra-detail`` or ``typo``; negatives are ``swapped-order`` ("pnpm over npm" / "npm over
pnpm"), ``antonym``, ``number``, ``negation`` or ``different-fact``. A merge of a negative
loses a fact, so precision is what counts.

First the shipped rule (:func:`memdir.upkeep.consolidate.near_duplicate`) on the whole set and per
kind, with how many pairs of each kind :func:`memdir.upkeep.conflicts.conflict` reports as a
conflict (the plan's ``conflict`` operation: wanted for the negatives, noise for the
duplicates) and how many :func:`memdir.upkeep.conflicts.contradicts` flags (the store-time
"may contradict team memory" warning: the same rule, with the looser same-topic test). Then
a threshold sweep of simpler rules for comparison; for those a rule "merges" a pair when its
score reaches the threshold, and the threshold picked is the one with the best precision at
recall >= 0.5 (ties: best F1).

Sweep rules: ``overlap`` (``memdir.capture.extract.similarity``, the first test of the shipped
rule), ``cosine`` (all-MiniLM-L6-v2, only with the embed extra), ``overlap+cos`` (overlap >= t
AND cosine >=
the best second threshold for that t), ``overlap+guard`` (overlap >= t AND no number of one
text swapped for another in the other, and the same negation words on both sides),
``overlap+guard+contain`` (that, and the words of one text all occur in the other: no word
swapped, as in "team Falcon" / "team Heron"; the rule shipped before the order, antonym and
polarity guards).

Usage::

    python bench/merge.py [--data PATH] [--json PATH] [--shipped]

``--shipped``: only the shipped rule (no sweep, no embedding model).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from memdir.capture.extract import similarity
from memdir.retrieval import embed
from memdir.upkeep.conflicts import conflict, contradicts
from memdir.upkeep.consolidate import MERGE_SIMILARITY, near_duplicate

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "near_duplicates.jsonl"
THRESHOLDS = [round(0.3 + 0.05 * i, 2) for i in range(13)]  # 0.30 .. 0.90
SECOND = [round(0.5 + 0.02 * i, 2) for i in range(25)]  # cosine grid of combined rules
MIN_RECALL = 0.5
TARGET_PRECISION = 0.95  # issue 7
SHIPPED_TARGET = 0.98  # issue 21: merge precision of the shipped rule on the whole set
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


def shipped(pairs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The shipped rule per kind and on the whole set (``all``): pairs, duplicates, merges,
    false merges, precision (None without a merge), recall (None without a duplicate), pairs
    reported as a conflict, and pairs the store-time warning flags."""
    groups: dict[str, list[dict[str, Any]]] = {"all": pairs}
    for pair in pairs:
        groups.setdefault(pair["kind"], []).append(pair)
    out = {}
    for kind, group in groups.items():
        merged = [near_duplicate(p["a"], p["b"]) for p in group]
        same = [bool(p["same"]) for p in group]
        tp = sum(m and s for m, s in zip(merged, same, strict=True))
        out[kind] = {"pairs": len(group), "duplicates": sum(same), "merged": sum(merged),
                     "false_merges": sum(merged) - tp,
                     "precision": tp / sum(merged) if any(merged) else None,
                     "recall": tp / sum(same) if any(same) else None,
                     "conflicts": sum(conflict(p["a"], p["b"]) is not None for p in group),
                     "warnings": sum(contradicts(p["a"], p["b"]) for p in group)}
    return out


def shipped_table(rows: dict[str, dict[str, Any]]) -> str:
    def num(value: float | None) -> str:
        return "–" if value is None else f"{value:.3f}"

    lines = ["| kind | pairs | duplicates | merged | false merges | precision | recall | "
             "reported as conflict | store warning |", "|---|---|---|---|---|---|---|---|---|"]
    for kind, r in sorted(rows.items(), key=lambda kv: (kv[0] == "all", -kv[1]["duplicates"],
                                                         kv[0])):
        name = "**all**" if kind == "all" else kind
        lines.append(f"| {name} | {r['pairs']} | {r['duplicates']} | {r['merged']} | "
                     f"{r['false_merges']} | {num(r['precision'])} | {num(r['recall'])} | "
                     f"{r['conflicts']} | {r['warnings']} |")
    return "\n".join(lines)


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
    parser.add_argument("--shipped", action="store_true", help="only the shipped rule")
    opts = parser.parse_args(argv)
    pairs = load(opts.data)
    rows = shipped(pairs)
    whole = rows["all"]
    print(f"{len(pairs)} pairs, {sum(p['same'] for p in pairs)} duplicates; shipped rule: "
          f"near_duplicate (overlap >= {MERGE_SIMILARITY} and the guards)\n")
    print(shipped_table(rows) + "\n")
    verdict = "PASS" if (whole["precision"] or 0) >= SHIPPED_TARGET else "FAIL"
    print(f"shipped rule: precision {whole['precision']:.3f} (target >= {SHIPPED_TARGET}: "
          f"{verdict}), recall {whole['recall']:.3f}, {whole['false_merges']} false merges\n")
    report: dict[str, Any] = {"pairs": len(pairs), "shipped": rows}
    if not opts.shipped:
        rules = evaluate(pairs)
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
        report.update(min_recall=MIN_RECALL, rules=rules, best=picks, at_target=targets)
    if opts.json:
        opts.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    raise SystemExit(main())
