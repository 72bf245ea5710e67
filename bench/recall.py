"""Recall-issue benchmarks: session-start context and per-prompt recall at 1k / 10k memories.

What is measured, for each corpus size N (each size in its own temporary MEMDIR home and
temporary project directory, removed afterwards; the corpus is ``Corpus`` from core.py):

1. CLI context: wall time of whole ``python -m memdir context`` processes (no query, default
   budget of 800 tokens) with ``MEMDIR_HOME`` set and the project as working directory, as a
   session-start hook runs it; the median of ``--cli-runs`` runs after one untimed warm-up.
2. tokens injected per session start: ``Memdir.context()`` at budgets of 200, 800 and 2,000
   tokens, once without a query and with ``--token-queries`` queries from
   ``Corpus.queries``; the median and largest ``tokens`` and the median number of memories
   injected. Every call must stay within its budget (a PASS/FAIL check).
3. in-process latency through one long-lived ``Memdir`` (default settings): ``context()``
   p50 without and with a query, and ``recall()`` p50 / p95 over ``--prompts`` realistic
   multi-word prompts built from the corpus vocabulary, each with a fresh session id (so no
   session's surfaced set empties the results) and ``use_llm=False``. One warm-up call of each
   (the first reconcile) is not timed. With the ``embed`` extra, recall searches by meaning
   too: every vector is computed before timing (what ``memdir reindex --embeddings`` or the
   daemon's idle time does), so the numbers are the steady state, not the lazy filling of a
   freshly imported store (64 vectors per search until all are there).
4. what the context spends its budget on (``bench/context_repeats.py``): on the README
   quickstart's store and on each corpus, ``Memdir.context()`` at budgets of 300, 800 and
   2,000 tokens in all four formats, without a query and with ``--repeat-queries`` queries:
   memories said twice in one context, lines with a cut word (``thr…``) and the tokens of
   the MEMORY.md section. Targets: no memory said twice, no cut word.

Usage::

    python bench/recall.py                    # 1k and 10k
    python bench/recall.py --quick            # 1k only
    python bench/recall.py --sizes 1000,5000 --json results.json
    python bench/recall.py --sizes 10000 --repeats-only   # measure 4 alone
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

from memdir import Memdir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from context_repeats import Checker
from core import ENVIRONMENTS, Corpus, _fmt, _percentile, _say, machine_speed, speed_line
from instructions import count_instructions

BUDGETS = (200, 800, 2000)
REPEAT_BUDGETS = (300, 800, 2000)
FORMATS = ("markdown", "prompt", "json", "snippets")
# The README's quickstart, as `memdir store` stores it.
QUICKSTART: tuple[dict[str, object], ...] = (
    {"content": "I prefer pnpm over npm or yarn", "type": "preference", "tags": ["tools"]},
    {"content": "Deployments go through ArgoCD, never kubectl apply", "type": "decision",
     "relevance": "high"},
    {"content": "Integration tests hit a real database, not mocks. **Why:** mocks hid a "
                "broken migration.", "type": "feedback", "name": "Testing policy"},
    {"content": "Merge freeze after Thursday", "type": "project"},
)
QUICKSTART_QUERIES = ("deploy", "testing")
CLI_TARGET_MS = 120.0
CLI_TARGET_SIZE = 10_000


@dataclass
class Injection:
    budget: int
    query: bool  # False: one call without a query; True: one call per corpus query
    calls: int
    tokens_median: float
    tokens_max: int
    memories_median: float


@dataclass
class Repeats:
    store: str
    budget: int
    calls: int  # contexts measured: (1 + queries) x formats
    memories_median: float
    index_lines_median: float
    index_tokens_median: float  # markdown, the MEMORY.md section
    repeated: int  # memories said twice, summed over the calls
    cut_lines: int  # lines with a cut word, summed over the calls


@dataclass
class Result:
    size: int
    cli_context_ms: float
    context_p50_ms: float
    context_query_p50_ms: float
    recall_p50_ms: float
    recall_p95_ms: float
    recall_memories_mean: float
    injection: list[Injection] = field(default_factory=list)
    cli_context_minstr: float | None = None  # with --instructions and valgrind
    repeats: list[Repeats] = field(default_factory=list)


@dataclass(frozen=True)
class Options:
    sizes: tuple[int, ...]
    seed: int
    batch: int
    prompts: int
    token_queries: int
    context_calls: int
    cli_runs: int
    json_path: Path | None
    instructions: bool = False
    repeat_queries: int = 10
    repeats_only: bool = False


def prompts(corpus: Corpus, count: int) -> list[str]:
    """Prompts as a developer types them: 6-15 words, vocabulary words in running text."""
    r = corpus
    templates: tuple[Callable[[], str], ...] = (
        lambda: f"why does the {r.tool()} {r.noun()} fail with a {r.adj()} {r.noun()} "
                f"in {r.ident()}?",
        lambda: f"can you {r.verb()} the {r.noun()} {r.noun()} in {r.ident()} before the "
                f"{r.team()} release",
        lambda: f"the {r.adj()} {r.noun()} test keeps failing on "
                f"{r.rng.choice(ENVIRONMENTS)}, please look into {r.ident()}",
        lambda: f"add a {r.noun()} to {r.ident()} and {r.verb()} the {r.noun()} afterwards",
        lambda: f"how do we {r.verb()} the {r.noun()} for the {r.team()} team?",
        lambda: f"refactor {r.ident()} to use {r.tool()} instead of {r.tool()}",
        lambda: f"{r.person()} says the {r.noun()} {r.noun()} is {r.adj()} again, what "
                f"changed in {r.tool()}?",
    )
    return [templates[n % len(templates)]() for n in range(count)]


def _ms(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def _cli_env(home: Path) -> dict[str, str]:
    """The CLI's environment: bytecode cache allowed (PYTHONDONTWRITEBYTECODE dropped for the
    child), as on a user's machine and in core.py."""
    env = {**os.environ, "MEMDIR_HOME": str(home)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure_cli(home: Path, project: Path, runs: int) -> float:
    """Median wall time in ms of one ``python -m memdir context`` process."""
    env = _cli_env(home)
    command = [sys.executable, "-m", "memdir", "context"]
    times = []
    for n in range(runs + 1):
        started = time.perf_counter()
        subprocess.run(command, env=env, cwd=project, check=True, capture_output=True)
        if n:  # the first run only warms caches
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure_injection(md: Memdir, queries: Sequence[str]) -> list[Injection]:
    out = []
    for budget in BUDGETS:
        for with_query in (False, True):
            contexts = [md.context(q, budget_tokens=budget)
                        for q in (queries if with_query else [None])]
            tokens = [c.tokens for c in contexts]
            out.append(Injection(budget, with_query, len(contexts), statistics.median(tokens),
                                 max(tokens), statistics.median(len(c.items) for c in contexts)))
    return out


def measure_context(md: Memdir, queries: Sequence[str], calls: int) -> tuple[float, float]:
    """p50 in ms of context() without a query and with one (default budget)."""
    md.context()  # warm-up
    plain = [_ms(md.context) for _ in range(calls)]
    query = [_ms(partial(md.context, q)) for q in queries[:calls]]
    return statistics.median(plain), statistics.median(query)


def measure_recall(md: Memdir, size: int, texts: Sequence[str]) -> tuple[float, float, float]:
    """p50 and p95 in ms of recall(), and the mean number of memories recalled."""
    md.recall(texts[0], f"bench-{size}-warm-up", use_llm=False)
    times, counts = [], []
    for n, text in enumerate(texts):
        started = time.perf_counter()
        result = md.recall(text, f"bench-{size}-{n}", use_llm=False)
        times.append((time.perf_counter() - started) * 1000)
        counts.append(len(result.items))
    return _percentile(times, 50), _percentile(times, 95), statistics.fmean(counts)


def measure_repeats(md: Memdir, store: str, queries: Sequence[str | None]) -> list[Repeats]:
    """Memories said twice, cut words and MEMORY.md tokens of the contexts (module docstring)."""
    checker = Checker(md.list(status="active"))
    out = []
    for budget in REPEAT_BUDGETS:
        shown, lines, tokens, repeated, cut = [], [], [], 0, 0
        for query in queries:
            for fmt in FORMATS:
                ctx = md.context(query, budget_tokens=budget, format=fmt)
                found = checker.check(ctx.text, ctx.memories, fmt)
                repeated += len(found.repeated)
                cut += len(found.cut_lines)
                if fmt == "markdown":
                    shown.append(len(ctx.items))
                    lines.append(ctx.index_lines)
                    tokens.append(found.index_tokens)
        out.append(Repeats(store, budget, len(queries) * len(FORMATS), statistics.median(shown),
                           statistics.median(lines), statistics.median(tokens), repeated, cut))
    return out


def bench_quickstart(opts: Options) -> list[Repeats]:
    """The README quickstart's four memories, in a fresh home and project."""
    with tempfile.TemporaryDirectory(prefix="memdir-bench-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        project.mkdir()
        with Memdir(home=home, project=project) as md:
            for item in QUICKSTART:
                fields = dict(item)
                md.store(str(fields.pop("content")), **fields)  # type: ignore[arg-type]
            return measure_repeats(md, "quickstart", [None, *QUICKSTART_QUERIES])


def bench_repeats(size: int, opts: Options) -> Result:
    """Only the measure of what the context spends its budget on, for one corpus size."""
    corpus = Corpus(opts.seed)
    bulk = corpus.memories(size)
    queries = corpus.queries(opts.repeat_queries)
    with tempfile.TemporaryDirectory(prefix="memdir-bench-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        project.mkdir()
        with Memdir(home=home, project=project) as md:
            _say(f"{size:,}: store_many")
            for start in range(0, len(bulk), opts.batch):
                md.store_many(bulk[start:start + opts.batch])
            _say(f"{size:,}: memories said twice, cut words")
            repeats = measure_repeats(md, f"{size:,}", [None, *queries])
    nan = float("nan")
    return Result(size, nan, nan, nan, nan, nan, nan, repeats=repeats)


def bench_size(size: int, opts: Options) -> Result:
    corpus = Corpus(opts.seed)
    _say(f"{size:,}: generating the corpus")
    bulk = corpus.memories(size)
    queries = corpus.queries(max(opts.token_queries, opts.context_calls))
    texts = prompts(corpus, opts.prompts)
    with tempfile.TemporaryDirectory(prefix="memdir-bench-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        project.mkdir()
        with Memdir(home=home, project=project) as md:
            _say(f"{size:,}: store_many")
            for start in range(0, len(bulk), opts.batch):
                md.store_many(bulk[start:start + opts.batch])
            if md.semantic:
                _say(f"{size:,}: computing the vectors")
                md.embed_memories()
        _say(f"{size:,}: CLI context ({opts.cli_runs} runs)")
        cli = measure_cli(home, project, opts.cli_runs)
        instructions = None
        if opts.instructions:  # before the in-process calls below add usage rows
            _say(f"{size:,}: CLI context under callgrind")
            instructions = count_instructions([sys.executable, "-m", "memdir", "context"],
                                              env=_cli_env(home), cwd=project)
        with Memdir(home=home, project=project) as md:
            _say(f"{size:,}: tokens injected (budgets {BUDGETS})")
            injection = measure_injection(md, queries[:opts.token_queries])
            _say(f"{size:,}: context() in-process ({opts.context_calls} calls each)")
            ctx_plain, ctx_query = measure_context(md, queries, opts.context_calls)
            _say(f"{size:,}: recall() ({len(texts)} prompts)")
            r50, r95, recalled = measure_recall(md, size, texts)
            _say(f"{size:,}: memories said twice, cut words")
            repeats = measure_repeats(md, f"{size:,}", [None, *queries[:opts.repeat_queries]])
    return Result(size, cli, ctx_plain, ctx_query, r50, r95, recalled, injection,
                  instructions, repeats)


# -- report ----------------------------------------------------------------------------------

METRICS: dict[str, str] = {
    "cli_context_ms": "CLI `memdir context` process (ms)",
    "context_p50_ms": "context() p50, no query (ms)",
    "context_query_p50_ms": "context() p50, with query (ms)",
    "recall_p50_ms": "recall() p50 (ms)",
    "recall_p95_ms": "recall() p95 (ms)",
    "recall_memories_mean": "memories per recall (mean)",
}


def results_table(results: Sequence[Result]) -> str:
    head = ["metric", *[f"{r.size:,}" for r in results]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for metric, title in METRICS.items():
        lines.append(f"| {title} | " + " | ".join(_fmt(getattr(r, metric)) for r in results)
                     + " |")
    if any(r.cli_context_minstr is not None for r in results):
        lines.append("| CLI `memdir context` process (M instructions) | " + " | ".join(
            "n/a" if r.cli_context_minstr is None else _fmt(r.cli_context_minstr)
            for r in results) + " |")
    for n, inj in enumerate(results[0].injection if results else []):
        label = f"{inj.calls} queries" if inj.query else "no query"
        cells = [f"{i.tokens_median:g} (max {i.tokens_max}) / {i.memories_median:g}"
                 for i in (r.injection[n] for r in results)]
        lines.append(f"| tokens (median, max) / memories injected, budget {inj.budget}, "
                     f"{label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def repeats_table(repeats: Sequence[Repeats]) -> str:
    lines = ["| store | budget | contexts | memories / MEMORY.md lines (median) | MEMORY.md "
             "tokens (median) | memories said twice | lines with a cut word |",
             "|---|---:|---:|---|---:|---:|---:|"]
    for r in repeats:
        lines.append(f"| {r.store} | {r.budget} | {r.calls} | {r.memories_median:g} / "
                     f"{r.index_lines_median:g} | {r.index_tokens_median:g} | {r.repeated} | "
                     f"{r.cut_lines} |")
    return "\n".join(lines)


def repeat_checks(repeats: Sequence[Repeats]) -> list[tuple[str, str, str, bool]]:
    out = []
    for store in dict.fromkeys(r.store for r in repeats):
        mine = [r for r in repeats if r.store == store]
        twice, cut = sum(r.repeated for r in mine), sum(r.cut_lines for r in mine)
        out.append(("no memory said twice in a context", store, str(twice), twice == 0))
        out.append(("no line with a cut word", store, str(cut), cut == 0))
    return out


def checks(results: Sequence[Result]) -> list[tuple[str, int, str, bool]]:
    out = []
    for r in results:
        if r.size == CLI_TARGET_SIZE:
            out.append((f"CLI context process at {CLI_TARGET_SIZE:,} ≤ {CLI_TARGET_MS:g} ms",
                        r.size, f"{_fmt(r.cli_context_ms)} ms", r.cli_context_ms <= CLI_TARGET_MS))
    for r in results:
        for budget in BUDGETS:
            worst = max(i.tokens_max for i in r.injection if i.budget == budget)
            out.append((f"context() tokens ≤ budget {budget} (every call)", r.size,
                        f"max {worst} tokens", worst <= budget))
    return out


def targets_table(results: Sequence[Result], repeats: Sequence[Repeats]) -> str:
    lines = ["| target | size | measured | result |", "|---|---|---|---|"]
    rows = [(label, f"{size:,}", value, ok) for label, size, value, ok in checks(results)]
    for label, store, value, ok in [*rows, *repeat_checks(repeats)]:
        lines.append(f"| {label} | {store} | {value} | {'PASS' if ok else 'FAIL'} |")
    return "\n".join(lines)


def write_json(path: Path, results: Sequence[Result], opts: Options,
               speed: tuple[float, float], quickstart: Sequence[Repeats]) -> None:
    data = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "seed": opts.seed,
            "loop_10m_s": {"before": speed[0], "after": speed[1]},
            "prompts": opts.prompts, "token_queries": opts.token_queries,
            "context_calls": opts.context_calls, "cli_runs": opts.cli_runs,
            "results": [asdict(r) for r in results],
            "quickstart": [asdict(r) for r in quickstart],
            "targets": [{"target": label, "size": size, "value": value, "pass": ok}
                        for label, size, value, ok in [
                            *checks([] if opts.repeats_only else results),
                            *repeat_checks(_repeats(results, quickstart))]]}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


# -- command line ----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--sizes", default="1000,10000",
                   help="comma-separated corpus sizes (default: 1000,10000)")
    p.add_argument("--quick", action="store_true", help="only 1,000")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    p.add_argument("--seed", type=int, default=20_260_101)
    p.add_argument("--batch", type=int, default=5_000, help="store_many batch size")
    p.add_argument("--prompts", type=int, default=300, help="recall() calls timed per size")
    p.add_argument("--token-queries", type=int, default=30,
                   help="context() queries per budget for the token counts")
    p.add_argument("--context-calls", type=int, default=50,
                   help="context() calls timed per size, without and with a query")
    p.add_argument("--cli-runs", type=int, default=10, help="CLI processes timed")
    p.add_argument("--instructions", action="store_true",
                   help="also count the instructions of one CLI context process (valgrind)")
    p.add_argument("--repeat-queries", type=int, default=10,
                   help="queries per budget for memories said twice and cut words")
    p.add_argument("--repeats-only", action="store_true",
                   help="only memories said twice, cut words and MEMORY.md tokens")
    args = p.parse_args(argv)
    sizes = (1_000,) if args.quick else tuple(
        int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip())
    return Options(sizes, args.seed, args.batch, args.prompts, args.token_queries,
                   args.context_calls, args.cli_runs, args.json, args.instructions,
                   args.repeat_queries, args.repeats_only)


def _repeats(results: Sequence[Result], quickstart: Sequence[Repeats]) -> list[Repeats]:
    return [*quickstart, *(r for result in results for r in result.repeats)]


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    results = []
    before = machine_speed()
    _say("quickstart: memories said twice, cut words")
    quickstart = bench_quickstart(opts)
    for size in opts.sizes:
        result = (bench_repeats if opts.repeats_only else bench_size)(size, opts)
        results.append(result)
        _say(f"{size:,}: done: {json.dumps(asdict(result))}")
    after = machine_speed()
    print(f"memdir recall benchmarks (Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs)\n")
    if not opts.repeats_only:
        print(results_table(results))
        print()
    print(repeats_table(_repeats(results, quickstart)))
    print()
    print(targets_table([] if opts.repeats_only else results, _repeats(results, quickstart)))
    print()
    print(speed_line(before, after))
    if opts.json_path:
        write_json(opts.json_path, results, opts, (before, after), quickstart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
