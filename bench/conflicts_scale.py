"""Conflicts and merges on whole stores: how long consolidation and doctor take at 1k / 10k /
20k memories, and how right they are, on the labelled stores of ``bench/store_corpus.py``.

For each size and mix (``templated``: mostly template families; ``diverse``: mostly free text
and chat statements), a fresh MEMDIR home and project (under one temporary directory removed
at the end) get the store with ``store_many``; then each step runs in a child process killed
after ``--timeout`` seconds (the step then reads "timeout"):

1. ``python -m memdir consolidate --dry-run --json``: the process's wall time;
2. ``Memdir.consolidate(dry_run=True)``: the call's time, and its plan judged against the
   labels (false conflicts per 1,000 memories, planted conflicts found, false merges,
   same-claim pairs merged);
3. ``python -m memdir doctor``: the process's wall time;
4. the store-time warning: ``Memdir.conflicts`` on the newer memory of every planted pair,
   then ``--stores`` single ``Memdir.store`` calls (half of them contradicting a memory of
   the store), each followed by ``Memdir.conflicts``: times, pairs found, false warnings.

CLI processes run with ``MEMDIR_HOME`` set, the project as working directory,
``MEMDIR_SEMANTIC=0`` (core.py's words-only configuration) and no LLM. bench/README.md has
the table's rows and the targets.

Usage::

    python bench/conflicts_scale.py                     # 1,000, 10,000 and 20,000
    python bench/conflicts_scale.py --quick             # 1,000 and 10,000
    python bench/conflicts_scale.py --sizes 1000 --json results.json --timeout 60
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import machine_speed, speed_line
from store_corpus import MIXES, Store, build, load

TIMEOUT = "timeout"
# (result key, target, limit, at 10,000 only, higher is better)
TARGETS = (
    ("cli_consolidate_s", "CLI consolidate ≤ 10 s", 10.0, True, False),
    ("consolidate_s", "consolidate() ≤ 10 s", 10.0, True, False),
    ("cli_doctor_s", "CLI doctor ≤ 2 s", 2.0, True, False),
    ("check_p50_ms", "conflicts() p50 ≤ 5 ms", 5.0, True, False),
    ("false_conflicts_per_1k", "false conflicts ≤ 1 per 1,000", 1.0, False, False),
    ("planted_found_pct", "planted conflicts found ≥ 90%", 90.0, False, True),
    ("false_merges", "false merges = 0", 0.0, False, False),
)
TARGET_RATIO = 2.3  # of each time, from 10,000 to 20,000
PLAN_KEYS = ("false_conflicts_per_1k", "planted_found_pct", "false_merges",
             "same_claims_merged_pct")
STORE_KEYS = ("store_p50_ms", "store_check_p50_ms", "check_p50_ms", "check_p95_ms",
              "warn_pairs_found_pct", "warn_stored_found_pct", "false_warnings_per_1k")


@dataclass(frozen=True)
class Options:
    sizes: tuple[int, ...]
    mixes: tuple[str, ...]
    seed: int
    timeout: float
    stores: int
    json_path: Path | None
    misses: int = 0


def _say(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "MEMDIR_HOME": str(home), "MEMDIR_SEMANTIC": "0"}
    for name in ("PYTHONDONTWRITEBYTECODE", "MEMDIR_LLM", "MEMDIR_SERVER"):
        env.pop(name, None)
    return env


def _run(command: list[str], env: dict[str, str], cwd: Path, timeout: float) -> float | None:
    """Wall seconds of one process, or None when it ran out of time (its process group is
    killed: nothing it started is left running)."""
    started = time.perf_counter()
    with subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, start_new_session=True) as proc:
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return None
    if proc.returncode not in (0, 1):  # doctor exits 1 when it reports a problem
        raise RuntimeError(f"{' '.join(command[2:])} failed: {err.decode()[-2000:]}")
    return time.perf_counter() - started


def _cli(args: list[str], home: Path, project: Path, timeout: float) -> float | None:
    return _run([sys.executable, "-m", "memdir", *args], _env(home), project, timeout)


def _worker(step: str, home: Path, project: Path, data: dict[str, Any],
            timeout: float) -> dict[str, Any] | None:
    """Run one in-process step (:func:`worker`) in a child process; its output, or None."""
    folder = Path(tempfile.mkdtemp(dir=home.parent))
    (folder / "in.json").write_text(json.dumps(data), encoding="utf-8")
    command = [sys.executable, __file__, "--worker", step, str(home), str(project),
               str(folder)]
    if _run(command, _env(home), project, timeout) is None:
        return None
    out: dict[str, Any] = json.loads((folder / "out.json").read_text(encoding="utf-8"))
    return out


def worker(step: str, home: Path, project: Path, folder: Path) -> None:
    """The child's side: ``plan`` times ``consolidate(dry_run=True)`` and writes its
    operations; ``store`` runs the store-time warning measures (module docstring)."""
    from memdir import Memdir

    data = json.loads((folder / "in.json").read_text(encoding="utf-8"))
    out: dict[str, Any] = {}
    with Memdir(home=home, project=project, semantic=False) as md:
        if step == "plan":
            started = time.perf_counter()
            plan = md.consolidate(dry_run=True)
            out = {"seconds": time.perf_counter() - started,
                   "ops": [[op.op, list(op.memories), op.reason] for op in plan.operations
                           if op.op in ("merge", "conflict")]}
        else:
            out["pairs"] = [[older, newer, older in {m.id for m in md.conflicts(md.get(newer))}]
                            for older, newer in data["pairs"]]
            out["stores"] = []
            for item in data["items"]:
                fields = dict(item)
                started = time.perf_counter()
                memory = md.store(fields.pop("content"), **fields)
                stored = time.perf_counter()
                found = [m.id for m in md.conflicts(memory)]
                out["stores"].append([stored - started, time.perf_counter() - stored, found])
    (folder / "out.json").write_text(json.dumps(out), encoding="utf-8")


# -- judging -----------------------------------------------------------------------------------


def judge_plan(ops: list[list[Any]], store: Store, ids: Sequence[str],
               shown: int = 20) -> dict[str, Any]:
    """The plan's conflicts and merges against the labels; up to ``shown`` of each kind of
    mistake as texts (``mistakes``) and the planted pairs found by kind of contradiction."""
    index = {memory_id: n for n, memory_id in enumerate(ids)}
    text = [r.content for r in store.records]
    conflicts: dict[tuple[int, ...], str] = {}
    merged: set[tuple[int, int]] = set()
    mistakes: dict[str, list[list[str]]] = {"false_conflicts": [], "missed_conflicts": [],
                                            "false_merges": []}
    false_merges = 0
    for op, members, reason in ops:
        rows = sorted(index[i] for i in members)
        if op == "conflict":
            conflicts[tuple(rows)] = reason
            if tuple(rows) not in store.conflicts:
                mistakes["false_conflicts"].append([*(text[n] for n in rows), reason])
            continue
        pairs = {(a, b) for n, a in enumerate(rows) for b in rows[n + 1:]}
        merged |= pairs
        if not pairs <= store.same_claims:
            false_merges += 1
            mistakes["false_merges"].append([*(text[n] for n in rows), reason])
    by_kind: dict[str, list[int]] = {}
    for found_pair, kind in sorted(store.kinds.items()):
        found = found_pair in conflicts
        by_kind.setdefault(kind, [0, 0])[0] += found
        by_kind[kind][1] += 1
        if not found:
            mistakes["missed_conflicts"].append([*(text[n] for n in found_pair), kind])
    false_conflicts = sum(1 for rows in conflicts if rows not in store.conflicts)
    return {"false_conflicts_per_1k": 1000 * false_conflicts / len(ids),
            "false_conflicts": false_conflicts,
            "planted_found_pct": _pct(len(set(conflicts) & store.conflicts),
                                      len(store.conflicts)),
            "false_merges": false_merges,
            "same_claims_merged_pct": _pct(len(merged & store.same_claims),
                                           len(store.same_claims)),
            "planted_found_by_kind": by_kind,
            "mistakes": {k: v[:shown] for k, v in mistakes.items()}}


def _pct(part: int, whole: int) -> float:
    return 100 * part / whole if whole else 100.0


def _ms(samples: Sequence[float], pct: int) -> float:
    if len(samples) < 2:
        return 1000 * samples[0] if samples else 0.0
    return 1000 * statistics.quantiles(samples, n=100, method="inclusive")[pct - 1]


def judge_stores(out: dict[str, Any], store: Store, ids: Sequence[str]) -> dict[str, float]:
    stores, checks = [s for s, _, _ in out["stores"]], [c for _, c, _ in out["stores"]]
    both = [s + c for s, c, _ in out["stores"]]
    found = false = 0
    for n, (_, _, warned) in enumerate(out["stores"]):
        partner = ids[store.extra_partners[n]] if n in store.extra_partners else None
        found += partner in warned
        false += sum(1 for w in warned if w != partner)
    pairs = out["pairs"]
    return {"store_p50_ms": _ms(stores, 50), "store_check_p50_ms": _ms(both, 50),
            "check_p50_ms": _ms(checks, 50), "check_p95_ms": _ms(checks, 95),
            "warn_pairs_found_pct": _pct(sum(1 for *_, ok in pairs if ok), len(pairs)),
            "warn_stored_found_pct": _pct(found, len(store.extra_partners)),
            "false_warnings_per_1k": 1000 * false / max(1, len(out["stores"]))}


# -- one store ---------------------------------------------------------------------------------


def bench_one(size: int, mix: str, opts: Options, root: Path) -> dict[str, Any]:
    label = f"{mix} {size:,}"
    _say(f"{label}: building and loading")
    store = build(size, opts.seed, mix, extra=opts.stores)
    home, project = root / f"{mix}-{size}" / "home", root / f"{mix}-{size}" / "project"
    started = time.perf_counter()
    ids = load(store, home, project)
    result: dict[str, Any] = {"size": size, "mix": mix, "load_s": time.perf_counter() - started,
                              "planted": len(store.conflicts),
                              "same_claims": len(store.same_claims)}
    _say(f"{label}: CLI consolidate --dry-run")
    cli = _cli(["consolidate", "--dry-run", "--json"], home, project, opts.timeout)
    result["cli_consolidate_s"] = TIMEOUT if cli is None else cli
    _say(f"{label}: consolidate(dry_run=True)")
    planned = _worker("plan", home, project, {}, opts.timeout)
    result["consolidate_s"] = TIMEOUT if planned is None else planned["seconds"]
    result.update(dict.fromkeys(PLAN_KEYS, TIMEOUT) if planned is None
                  else judge_plan(planned["ops"], store, ids))
    _say(f"{label}: CLI doctor")
    doctor = _cli(["doctor"], home, project, opts.timeout)
    result["cli_doctor_s"] = TIMEOUT if doctor is None else doctor
    _say(f"{label}: store-time warnings")
    pairs = [[ids[a], ids[b]] for a, b in sorted(store.conflicts)]  # b was stored after a
    stored = _worker("store", home, project, {
        "pairs": pairs, "items": [r.item() for r in store.extra]}, opts.timeout)
    result.update(dict.fromkeys(STORE_KEYS, TIMEOUT) if stored is None
                  else judge_stores(stored, store, ids))
    return result


# -- report ------------------------------------------------------------------------------------

ROWS = (
    ("load_s", "store_many load (s)"),
    ("cli_consolidate_s", "CLI `consolidate --dry-run` (s)"),
    ("consolidate_s", "`consolidate(dry_run=True)` (s)"),
    ("cli_doctor_s", "CLI `doctor` (s)"),
    ("store_p50_ms", "`store()` p50 (ms)"),
    ("store_check_p50_ms", "`store()` + `conflicts()` p50 (ms)"),
    ("check_p50_ms", "`conflicts()` p50 (ms)"),
    ("check_p95_ms", "`conflicts()` p95 (ms)"),
    ("false_conflicts_per_1k", "false conflicts per 1,000 memories"),
    ("planted_found_pct", "planted conflicts found (%)"),
    ("false_merges", "false merges"),
    ("same_claims_merged_pct", "same-claim pairs merged (%)"),
    ("warn_pairs_found_pct", "store warning: planted pairs of the store found (%)"),
    ("warn_stored_found_pct", "store warning: planted new stores found (%)"),
    ("false_warnings_per_1k", "store warning: false warnings per 1,000 stores"),
)


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}" if value < 10 else f"{value:.1f}"


def results_table(results: Sequence[dict[str, Any]]) -> str:
    head = ["metric", *(f"{r['mix']} {r['size']:,}" for r in results)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines.append("| planted conflicts / same-claim pairs | "
                 + " | ".join(f"{r['planted']} / {r['same_claims']}" for r in results) + " |")
    lines += [f"| {title} | " + " | ".join(_fmt(r.get(key)) for r in results) + " |"
              for key, title in ROWS]
    return "\n".join(lines)


def _ratio(results: Sequence[dict[str, Any]], mix: str, key: str) -> float | str | None:
    by_size = {r["size"]: r.get(key) for r in results if r["mix"] == mix}
    small, large = by_size.get(10_000), by_size.get(20_000)
    if small is None or large is None:
        return None
    if isinstance(small, str) or isinstance(large, str):
        return TIMEOUT
    return float(large) / float(small)


def checks(results: Sequence[dict[str, Any]]) -> list[tuple[str, str, Any, bool | None]]:
    """(target, where, measured, passed: None when not measured, False on a timeout)."""
    out: list[tuple[str, str, Any, bool | None]] = []

    def check(target: str, where: str, value: Any, limit: float, higher: bool = False) -> None:
        ok = None if value is None else False if isinstance(value, str) else (
            value >= limit if higher else value <= limit)
        out.append((target, where, value, ok))

    for r in results:
        for key, title, limit, at_10k, higher in TARGETS:
            if r["size"] == 10_000 or not at_10k:
                check(title, f"{r['mix']} {r['size']:,}", r.get(key), limit, higher)
    for mix in dict.fromkeys(r["mix"] for r in results):
        for key, title in (("cli_consolidate_s", "CLI consolidate"),
                           ("consolidate_s", "consolidate()"), ("cli_doctor_s", "CLI doctor")):
            value = _ratio(results, mix, key)
            if value is not None:
                check(f"{title} 20k / 10k ≤ {TARGET_RATIO:g}", mix, value, TARGET_RATIO)
    return out


def targets_table(results: Sequence[dict[str, Any]]) -> str:
    lines = ["| target | store | measured | result |", "|---|---|---|---|"]
    for target, where, value, ok in checks(results):
        verdict = "not measured" if ok is None else "PASS" if ok else "FAIL"
        lines.append(f"| {target} | {where} | {_fmt(value)} | {verdict} |")
    return "\n".join(lines)


def mistakes_text(results: Sequence[dict[str, Any]], limit: int) -> str:
    lines = []
    for r in results:
        if "mistakes" not in r:
            continue
        kinds = ", ".join(f"{kind} {found}/{total}"
                          for kind, (found, total) in sorted(r["planted_found_by_kind"].items()))
        lines.append(f"\n## {r['mix']} {r['size']:,}\n\nplanted found by kind: {kinds}")
        for name, found in r["mistakes"].items():
            lines.append(f"\n{name.replace('_', ' ')}:")
            lines += [" - " + "  |  ".join(row) for row in found[:limit]]
    return "\n".join(lines)


# -- command line ------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--sizes", default="1000,10000,20000", help="comma-separated store sizes")
    p.add_argument("--quick", action="store_true", help="only 1,000 and 10,000")
    p.add_argument("--mixes", default=",".join(MIXES), help="templated, diverse or both")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds a step may take before it is recorded as a timeout")
    p.add_argument("--stores", type=int, default=200, help="single stores timed per store")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    p.add_argument("--misses", type=int, default=0, metavar="N",
                   help="also print up to N false conflicts, missed ones and false merges")
    args = p.parse_args(argv)
    sizes = (1_000, 10_000) if args.quick else tuple(
        int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip())
    mixes = tuple(m.strip() for m in args.mixes.split(",") if m.strip())
    if unknown := set(mixes) - set(MIXES):
        p.error(f"unknown mix {', '.join(sorted(unknown))}")
    return Options(sizes, mixes, args.seed, args.timeout, args.stores, args.json, args.misses)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"]:
        step, home, project, folder = argv[1:5]
        worker(step, Path(home), Path(project), Path(folder))
        return 0
    opts = parse_args(argv)
    results = []
    before = machine_speed()
    with tempfile.TemporaryDirectory(prefix="memdir-bench-") as tmp:
        root = Path(tmp)
        warm = root / "warm-up" / "project"  # the bytecode caches of both commands
        warm.mkdir(parents=True)
        for command in (["consolidate", "--dry-run"], ["doctor"]):
            _cli(command, root / "warm-up" / "home", warm, opts.timeout)
        for size in opts.sizes:
            for mix in opts.mixes:
                results.append(bench_one(size, mix, opts, root))
                _say(f"{mix} {size:,}: done: {json.dumps(results[-1])}")
        after = machine_speed()  # before the temporary directory's removal stalls the disk
    print(f"memdir conflicts at scale (Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"timeout {opts.timeout:g} s a step)\n")
    print(results_table(results), targets_table(results), speed_line(before, after), sep="\n\n")
    if opts.misses:
        print(mistakes_text(results, opts.misses))
    if opts.json_path:
        data = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "seed": opts.seed,
                "timeout_s": opts.timeout, "loop_10m_s": {"before": before, "after": after},
                "results": results,
                "targets": [{"target": t, "store": w, "value": v, "pass": ok}
                            for t, w, v, ok in checks(results)]}
        opts.json_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
