"""The merge and conflict rules of consolidation on labelled memory pairs.

Each line of a pairs file (``tests/data/near_duplicates.jsonl``; the holdout
``tests/data/conflict_pairs_holdout.jsonl``, in other domains and styles, measures how a rule
fitted to the first generalises) is ``{"a", "b", "same", "kind", "why"}``. The kinds:

- the same memory in other words (``same``: true): ``reorder``, ``paraphrase`` (synonyms,
  "two" / "2", "30s" / "30 seconds", "don't" / "do not", case and punctuation, "use X" /
  "always use X"), ``converse`` ("X before Y" / "Y after X", "X over Y" / "X instead of Y"),
  ``extra-detail`` (a date, a reason or a reference added), ``typo`` and ``article`` (only
  "the" / "a" / "an" or another function word differs);
- disagreeing (``same``: false; one subject, two values: a merge loses a fact and the pair
  should be reported as a conflict): ``swapped-order`` ("pnpm over npm" / "npm over pnpm"),
  ``antonym`` (enabled / disabled, read-only / read-write, ascending / descending, ...),
  ``number`` (another port, version, timeout, date, percentage, size), ``number-word``
  ("two approvals" / "three approvals", "2" / "three"), ``unit`` ("10 MB" / "10 GB",
  "30 seconds" / "30 minutes", "10%" / "10 GB"), ``negation``, ``named-alternative``
  (another tool, vendor, language, region, person, branch or file: "logs go to Datadog" /
  "logs go to Loki") and ``reversed-relation`` ("redirect HTTP to HTTPS" / "HTTPS to HTTP",
  "A calls B" / "B calls A", "X depends on Y" / "Y depends on X");
- neither (``same``: false; never merged, and not a conflict): ``different-fact`` (a related
  fact: both can hold) and ``different-subject`` (one template about two things: "service 172
  listens on port 8172" / "service 271 listens on port 8271", "billing-svc uses Postgres 15" /
  "search-svc uses Postgres 14").

For each file, the shipped rule (:func:`memdir.upkeep.consolidate.near_duplicate`) on the
whole set and per kind, with how many pairs of each kind
:func:`memdir.upkeep.conflicts.conflict` reports as a conflict (the plan's ``conflict``
operation: wanted for the disagreeing kinds, noise for the others) and how many
:func:`memdir.upkeep.conflicts.contradicts` flags (the store-time "may contradict team
memory" warning: the same rule, with the looser same-topic test). Then the targets:

- disagreeing pairs merged: 0;
- disagreeing pairs reported as a conflict: >= 90%;
- same-meaning pairs merged (recall): >= 0.65;
- different-subject pairs reported as a conflict or merged: 0;
- merge precision on the whole set: >= 0.98 (the exit status: 1 when a file misses it).

Then, for the first file only, a threshold sweep of simpler rules for comparison; for those
a rule "merges" a pair when its score reaches the threshold, and the threshold picked is the
one with the best precision at recall >= 0.5 (ties: best F1).

Sweep rules: ``overlap`` (``memdir.retrieval.similarity.similarity``, the first test of the shipped
rule), ``cosine`` (all-MiniLM-L6-v2, only with the embed extra), ``overlap+cos`` (overlap >= t
AND cosine >=
the best second threshold for that t), ``overlap+guard`` (overlap >= t AND no number of one
text swapped for another in the other, and the same negation words on both sides),
``overlap+guard+contain`` (that, and the words of one text all occur in the other: no word
swapped, as in "team Falcon" / "team Heron"; the rule shipped before the order, antonym and
polarity guards).

Usage::

    python bench/merge.py [--data PATH]... [--holdout] [--json PATH] [--shipped]

``--data``: a pairs file, may be given more than once (default: the main set).
``--holdout``: the holdout set too. ``--shipped``: only the shipped rule (no sweep, no
embedding model).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from memdir.retrieval import embed
from memdir.retrieval.similarity import similarity
from memdir.upkeep.conflicts import conflict, contradicts
from memdir.upkeep.consolidate import MERGE_SIMILARITY, near_duplicate

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "near_duplicates.jsonl"
HOLDOUT = DATA.with_name("conflict_pairs_holdout.jsonl")
#: ``same: false`` kinds that are no conflict either: every other ``same: false`` kind disagrees.
UNRELATED_KINDS = frozenset({"different-fact", "different-subject"})
THRESHOLDS = [round(0.3 + 0.05 * i, 2) for i in range(13)]  # 0.30 .. 0.90
SECOND = [round(0.5 + 0.02 * i, 2) for i in range(25)]  # cosine grid of combined rules
MIN_RECALL = 0.5
TARGET_PRECISION = 0.95  # issue 7
SHIPPED_TARGET = 0.98  # issue 21: merge precision of the shipped rule on the whole set
REPORTED_TARGET = 0.9  # share of the disagreeing pairs reported as a conflict
RECALL_TARGET = 0.65  # share of the same-meaning pairs merged
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


def judge(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each pair's verdicts: ``merged`` (:func:`near_duplicate`), ``conflict`` (:func:`conflict`
    is not None) and ``warning`` (:func:`contradicts`), with its ``kind`` and ``same``."""
    return [{"kind": p["kind"], "same": bool(p["same"]), "merged": near_duplicate(p["a"], p["b"]),
             "conflict": conflict(p["a"], p["b"]) is not None,
             "warning": contradicts(p["a"], p["b"])} for p in pairs]


def group_of(kind: str, same: bool) -> str:
    """``same``, ``disagreeing`` or ``unrelated`` (a ``same: false`` kind that is no conflict)."""
    return "same" if same else "unrelated" if kind in UNRELATED_KINDS else "disagreeing"


def shipped(pairs: list[dict[str, Any]],
            judged: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """The shipped rule per kind and on the whole set (``all``): pairs, duplicates, merges,
    false merges, precision (None without a merge), recall (None without a duplicate), pairs
    reported as a conflict, and pairs the store-time warning flags."""
    judged = judge(pairs) if judged is None else judged
    groups: dict[str, list[dict[str, Any]]] = {"all": judged}
    for verdict in judged:
        groups.setdefault(verdict["kind"], []).append(verdict)
    out = {}
    for kind, group in groups.items():
        merged = sum(v["merged"] for v in group)
        same = sum(v["same"] for v in group)
        tp = sum(v["merged"] and v["same"] for v in group)
        out[kind] = {"pairs": len(group), "duplicates": same, "merged": merged,
                     "false_merges": merged - tp,
                     "precision": tp / merged if merged else None,
                     "recall": tp / same if same else None,
                     "conflicts": sum(v["conflict"] for v in group),
                     "warnings": sum(v["warning"] for v in group)}
    return out


def _order(item: tuple[str, dict[str, Any]]) -> tuple[bool, int, int, str]:
    kind, row = item
    rank = {"same": 0, "disagreeing": 1, "unrelated": 2}
    group = group_of(kind, row["duplicates"] > 0 and row["duplicates"] == row["pairs"])
    return kind == "all", rank[group], -row["pairs"], kind


def shipped_table(rows: dict[str, dict[str, Any]]) -> str:
    """Per kind: the same-meaning kinds, then the disagreeing ones, then the unrelated ones."""
    def num(value: float | None) -> str:
        return "–" if value is None else f"{value:.3f}"

    lines = ["| kind | group | pairs | duplicates | merged | false merges | precision | recall "
             "| reported as conflict | store warning |", "|---" * 10 + "|"]
    for kind, r in sorted(rows.items(), key=_order):
        name = "**all**" if kind == "all" else kind
        group = "" if kind == "all" else group_of(kind, r["duplicates"] == r["pairs"])
        share = f" ({r['conflicts'] / r['pairs']:.0%})" if r["pairs"] else ""
        lines.append(f"| {name} | {group} | {r['pairs']} | {r['duplicates']} | {r['merged']} | "
                     f"{r['false_merges']} | {num(r['precision'])} | {num(r['recall'])} | "
                     f"{r['conflicts']}{share} | {r['warnings']} |")
    return "\n".join(lines)


def targets(judged: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The conflict and merge targets: for each, ``count`` of ``of`` pairs, ``value`` (a count or
    a share), ``target`` and ``ok``. Disagreeing: ``same: false`` but neither different-subject
    nor different-fact."""
    disagreeing = [v for v in judged if group_of(v["kind"], v["same"]) == "disagreeing"]
    same = [v for v in judged if v["same"]]
    subject = [v for v in judged if v["kind"] == "different-subject"]
    reported = sum(v["conflict"] for v in disagreeing)
    recalled = sum(v["merged"] for v in same)
    merged = sum(v["merged"] for v in disagreeing)
    mixed = sum(v["merged"] or v["conflict"] for v in subject)

    def share(count: int, of: int) -> float | None:
        return count / of if of else None

    out = {"disagreeing_merged": {"count": merged, "of": len(disagreeing), "value": merged,
                                  "target": 0, "ok": merged == 0},
           "disagreeing_reported": {"count": reported, "of": len(disagreeing),
                                    "value": share(reported, len(disagreeing)),
                                    "target": REPORTED_TARGET},
           "same_merged": {"count": recalled, "of": len(same), "value": share(recalled, len(same)),
                           "target": RECALL_TARGET},
           "different_subject_mixed": {"count": mixed, "of": len(subject), "value": mixed,
                                       "target": 0, "ok": mixed == 0}}
    for key in ("disagreeing_reported", "same_merged"):
        value = out[key]["value"]
        out[key]["ok"] = value is not None and value >= out[key]["target"]
    return out


def targets_lines(found: dict[str, dict[str, Any]]) -> list[str]:
    def mark(row: dict[str, Any]) -> str:
        return "PASS" if row["ok"] else "FAIL"

    def pct(row: dict[str, Any]) -> str:
        return "–" if row["value"] is None else f"{row['value']:.1%}"

    merged, reported = found["disagreeing_merged"], found["disagreeing_reported"]
    same, subject = found["same_merged"], found["different_subject_mixed"]
    recall = "–" if same["value"] is None else f"{same['value']:.3f}"
    return [f"- disagreeing pairs merged: {merged['count']} of {merged['of']} (target 0): "
            f"{mark(merged)}",
            f"- disagreeing pairs reported: {pct(reported)} ({reported['count']} of "
            f"{reported['of']}; target ≥ {REPORTED_TARGET:.0%}): {mark(reported)}",
            f"- same-meaning merged: {recall} ({same['count']} of {same['of']}; "
            f"target ≥ {RECALL_TARGET}): {mark(same)}",
            f"- different-subject reported as conflict or merged: {subject['count']} of "
            f"{subject['of']} (target 0): {mark(subject)}"]


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


def report_file(path: Path, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Print the shipped rule's table and the targets for one file; its numbers."""
    judged = judge(pairs)
    rows = shipped(pairs, judged)
    whole = rows["all"]
    found = targets(judged)
    precision = whole["precision"]
    ok = precision is None or precision >= SHIPPED_TARGET
    recall = "–" if whole["recall"] is None else f"{whole['recall']:.3f}"
    print(f"## {path}\n\n{len(pairs)} pairs, {whole['duplicates']} duplicates; shipped rule: "
          f"near_duplicate (overlap >= {MERGE_SIMILARITY} and the guards)\n")
    print(shipped_table(rows) + "\n")
    print(f"shipped rule: precision {'–' if precision is None else f'{precision:.3f}'} "
          f"(target >= {SHIPPED_TARGET}: {'PASS' if ok else 'FAIL'}), recall {recall}, "
          f"{whole['false_merges']} false merges\n")
    print("\n".join(targets_lines(found)) + "\n")
    return {"path": str(path), "pairs": len(pairs), "shipped": rows, "targets": found,
            "precision_ok": ok}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, action="append",
                        help=f"a pairs file; may be repeated (default: {DATA.name})")
    parser.add_argument("--holdout", action="store_true", help=f"also {HOLDOUT.name}")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--shipped", action="store_true", help="only the shipped rule")
    opts = parser.parse_args(argv)
    paths: list[Path] = list(opts.data or [DATA])
    if opts.holdout and HOLDOUT.resolve() not in {path.resolve() for path in paths}:
        paths.append(HOLDOUT)
    files = [report_file(path, load(path)) for path in paths]
    first = files[0]
    report: dict[str, Any] = {"pairs": first["pairs"], "shipped": first["shipped"],
                              "targets": first["targets"], "files": files}
    if not opts.shipped:
        pairs = load(paths[0])
        print(f"## Sweep of simpler rules on {paths[0]}\n")
        rules = evaluate(pairs)
        print(table(rules) + "\n")
        picks = {name: best(rows) for name, rows in rules.items()}
        hits = {name: at_target(rows) for name, rows in rules.items()}
        for name in rules:
            pick, hit = picks[name], hits[name]
            print(f"- {name}: best at recall >= {MIN_RECALL}: "
                  + (_describe(pick) if pick else "recall never reached"))
            print(f"  {name}: best at precision >= {TARGET_PRECISION}: "
                  + (_describe(hit) if hit else "precision never reached"))
        if "cosine" not in rules:
            print("- cosine rules skipped: the embed extra is not installed")
        report.update(min_recall=MIN_RECALL, rules=rules, best=picks, at_target=hits)
    if opts.json:
        opts.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0 if all(f["precision_ok"] for f in files) else 1


if __name__ == "__main__":
    raise SystemExit(main())
