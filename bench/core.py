"""Core benchmarks for memdir: write, search, rebuild and CLI start-up at 1k / 10k / 100k memories.

Everything here is the core, words-only configuration (``semantic=False``: FTS5/BM25 search,
no embeddings computed at write time), which is what a store without the ``embed`` extra does
and what the CLI and hooks do in-process. With the extra, ``store``/``store_many`` also embed
each memory and search fuses meaning: ``bench/semantic.py`` measures that.

What is measured, for each corpus size N (each size in its own MEMDIR home and project
directory, both passed to ``Memdir`` explicitly, under one temporary directory that is removed
at the very end: deleting thousands of files keeps an ext4 disk mounted with ``discard`` busy
for seconds afterwards, which would otherwise land on the next size's writes):

1. ``store_many`` rate: the N memories bulk-loaded with ``Memdir.store_many`` in batches
   (default 5,000 per call); memories/s over the whole load, drafting and validation included.
2. search p50 / p95: one long-lived ``Memdir`` (default settings, so usage counters are
   updated and the index is reconciled with the files at most once a second, as in real
   use) runs a few hundred realistic queries of 1-4 words drawn from the corpus vocabulary:
   frequent words that match many memories, rare words that match few, and words taken from
   one memory's name. One warm-up search (the first reconcile) is not timed.
3. CLI search: wall time of whole ``python -m memdir search QUERY`` processes with
   ``MEMDIR_HOME`` set (interpreter start-up, imports, reconcile, query, output); the median
   of ``--cli-runs`` runs after one untimed warm-up run.
4. reindex: ``Memdir.reindex()`` rebuilding the index rows from the N files (warm page cache).
5. ``store`` rate: ``--store-sample`` single ``Memdir.store()`` calls (each its own
   transaction, file fsync and MEMORY.md regeneration) into the store already holding N.

The corpus is synthetic developer memory, generated deterministically from ``--seed``: all
ten types of the default taxonomy, names, optional descriptions, bodies of 1-5 sentences,
tags and path globs, with words drawn Zipf-style from a vocabulary of a few thousand words
(real developer words plus camelCase identifiers built from them), so the FTS5 index sees
realistic term distributions. Every body is unique (memdir merges exact duplicates) and no
text looks like a secret (memdir refuses those).

Usage::

    python bench/core.py                      # 1k, 10k and 100k
    python bench/core.py --quick              # 1k and 10k only
    python bench/core.py --sizes 1000,5000 --json results.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from memdir import Memdir
from memdir.core.safety import find_secrets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from instructions import count_instructions

# -- vocabulary ------------------------------------------------------------------------------

TYPES = ("user", "feedback", "preference", "policy", "decision", "procedure", "pitfall",
         "fact", "reference", "project")
# Roughly how often each type is stored in practice: facts, pitfalls and decisions dominate.
TYPE_WEIGHTS = (3, 8, 6, 6, 14, 10, 16, 20, 9, 8)

NOUNS = """
api cache database migration queue worker scheduler endpoint handler service client server
router schema table index column query request response session cookie header payload config
setting flag feature build pipeline deploy release branch commit review test fixture mock
coverage lint formatter container image cluster pod node replica shard partition backup
snapshot log metric trace alert dashboard incident outage timeout retry backoff latency
throughput memory thread process lock mutex transaction rollback connection pool socket
buffer stream batch job cron webhook event message topic consumer producer subscriber
publisher channel bucket object blob file directory path module package dependency version
lockfile wheel artifact registry mirror proxy gateway balancer ingress certificate domain
dns firewall network subnet region zone quota limit budget cost invoice customer account user
tenant organization team role permission policy audit report export import parser serializer
encoder decoder compressor validator sanitizer tokenizer renderer template component layout
style theme widget form button modal page route store reducer action selector hook context
provider middleware plugin extension adapter driver backend frontend monorepo workspace
script makefile dockerfile manifest chart value environment variable
default override fallback threshold window interval deadline milestone sprint ticket issue
bug regression hotfix patch rollout canary experiment cohort funnel signup checkout cart
order payment refund subscription plan trial notification email digest search ranking
embedding vector model prompt completion agent tool memory context summary episode note
runbook playbook oncall pager escalation postmortem changelog readme docstring annotation
type generic interface protocol struct enum trait macro closure coroutine future promise
callback iterator generator decorator descriptor property attribute field record row
cursor offset pagination filter sort aggregate join view trigger constraint sequence
""".split()

VERBS = """
run use avoid prefer check update pin bump rebuild restart migrate rename refactor split
merge rebase squash cache invalidate retry log validate parse serialize encode compress
batch stream paginate throttle debounce profile benchmark deploy rollback tag sign verify
review approve document deprecate remove vendor mock stub patch seed reset flush drain scale
replicate monitor page escalate archive prune vacuum reindex backfill shadow gate toggle
isolate bisect reproduce instrument sample export import generate format sort dedupe
""".split()

ADJECTIVES = """
slow flaky stale broken legacy new deprecated internal public async sync nightly weekly
staging production local remote shared optional required strict lenient idempotent atomic
concurrent parallel sequential cached lazy eager verbose quiet minimal default custom
experimental stable noisy brittle hot cold large small empty partial duplicate orphaned
unbounded bounded transient persistent readonly writable versioned unversioned
""".split()

TOOLS = """
postgres redis kafka rabbitmq nginx terraform ansible kubernetes helm grafana prometheus
sentry datadog pytest ruff mypy black poetry uv pip npm pnpm yarn webpack vite eslint
prettier jest vitest react vue svelte django flask fastapi celery sqlalchemy alembic graphql
grpc protobuf openapi github gitlab jenkins circleci buildkite bazel make cmake cargo clippy
gofmt gradle maven spring deno bun typescript python rust golang sqlite mongodb
elasticsearch opensearch s3 lambda cloudfront ec2 gcp azure jira linear slack confluence
notion figma storybook playwright cypress docker podman nix homebrew tmux neovim vscode
""".split()

PEOPLE = """
alice bob carol dave erin frank grace heidi ivan judy mallory nadia oscar peggy rupert sybil
trent victor walter yasmin zoe priya kenji lucia mateo amara tobias ingrid omar lena marco
""".split()

TEAMS = """
platform payments billing growth infra data mobile web search identity analytics support
ml devex security reliability checkout onboarding
""".split()

ENVIRONMENTS = ("staging", "production", "ci", "local", "preview", "canary", "sandbox")

# Words that could make memdir's secret scanner fire; never used in identifiers.
_UNSAFE = {"token", "secret", "password", "key", "auth", "pwd", "passwd", "passphrase"}


def _zipf_cum(n: int, exponent: float = 1.0) -> list[float]:
    total = 0.0
    out = []
    for rank in range(1, n + 1):
        total += 1.0 / rank**exponent
        out.append(total)
    return out


class Zipf:
    """Draws words with Zipf-distributed frequencies (the list order is the rank)."""

    def __init__(self, words: Sequence[str], rng: random.Random, exponent: float = 1.0) -> None:
        self.words = list(words)
        rng.shuffle(self.words)
        self._cum = _zipf_cum(len(self.words), exponent)
        self._rng = rng

    def __call__(self) -> str:
        return self._rng.choices(self.words, cum_weights=self._cum)[0]

    def frequent(self, top: int) -> str:
        return self._rng.choice(self.words[:top])

    def rare(self) -> str:
        return self._rng.choice(self.words[len(self.words) // 2:])


def _identifiers(rng: random.Random, count: int) -> list[str]:
    """camelCase / PascalCase identifiers built from two or three nouns, verbs or adjectives."""
    parts = [w for w in (*NOUNS, *VERBS, *ADJECTIVES) if w not in _UNSAFE]
    out: dict[str, None] = {}
    while len(out) < count:
        words = rng.sample(parts, rng.choice((2, 2, 2, 3)))
        head = words[0] if rng.random() < 0.6 else words[0].capitalize()
        out[head + "".join(w.capitalize() for w in words[1:])] = None
    return list(out)


# -- corpus ----------------------------------------------------------------------------------

Template = Callable[["Corpus"], str]


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:]


class Corpus:
    """A deterministic stream of unique, realistic developer memories and search queries."""

    def __init__(self, seed: int, identifiers: int = 2500) -> None:
        self.rng = random.Random(seed)
        self.noun = Zipf(NOUNS, self.rng)
        self.verb = Zipf(VERBS, self.rng)
        self.adj = Zipf(ADJECTIVES, self.rng)
        self.tool = Zipf(TOOLS, self.rng)
        self.person = Zipf(PEOPLE, self.rng)
        self.team = Zipf(TEAMS, self.rng)
        self.ident = Zipf(_identifiers(self.rng, identifiers), self.rng, exponent=0.9)
        self._seen: set[str] = set()
        self._names: list[str] = []

    @property
    def vocabulary(self) -> list[str]:
        return sorted({*NOUNS, *VERBS, *ADJECTIVES, *TOOLS, *PEOPLE, *TEAMS,
                       *self.ident.words})

    # sentences ------------------------------------------------------------------------------

    def date(self) -> str:
        return f"2026-{self.rng.randint(1, 12):02d}-{self.rng.randint(1, 28):02d}"

    def filler(self) -> str:
        r = self
        options = (
            f"the {r.adj()} {r.noun()} in {r.ident()} causes {r.adj()} {r.noun()} under load",
            f"{r.tool()} reports the {r.noun()} {r.noun()} as {r.adj()} after a {r.verb()}",
            f"{r.person().capitalize()} saw this while trying to {r.verb()} the {r.noun()}",
            f"it only shows up in {r.rng.choice(ENVIRONMENTS)} with a {r.adj()} {r.noun()}",
            f"see {r.ident()} in the {r.team()} {r.noun()} module for the {r.noun()} logic",
            f"the {r.noun()} {r.noun()} has to stay under {r.rng.randint(2, 900)} ms",
            f"{r.verb()} the {r.noun()} first, otherwise {r.ident()} keeps a {r.adj()} {r.noun()}",
            f"this was agreed with the {r.team()} team on {r.date()}",
        )
        return _sentence(self.rng.choice(options)) + "."

    def lead(self, kind: str) -> str:
        r = self
        leads: dict[str, Sequence[str]] = {
            "user": (f"{r.person().capitalize()} is the {r.team()} lead and reviews every "
                     f"{r.noun()} change", f"the user works mostly on {r.ident()} and "
                     f"knows {r.tool()} well but is new to {r.tool()}"),
            "feedback": (f"do not {r.verb()} the {r.ident()} {r.noun()} without asking first. "
                         f"**Why:** it broke the {r.adj()} {r.noun()} on {r.date()}. "
                         f"**How to apply:** {r.verb()} the {r.noun()} in a separate change",
                         f"keep {r.noun()} diffs small; the user rejected a {r.adj()} "
                         f"{r.noun()} refactor of {r.ident()}"),
            "preference": (f"prefers {r.tool()} over {r.tool()} for {r.noun()} work",
                           f"likes {r.adj()} {r.noun()} names and {r.adj()} {r.noun()} output"),
            "policy": (f"never {r.verb()} a {r.adj()} {r.noun()} directly; always go through "
                       f"{r.ident()}", f"every {r.noun()} change needs a {r.noun()} test and a "
                       f"{r.tool()} check before merge"),
            "decision": (f"we chose {r.tool()} for the {r.noun()} {r.noun()} instead of "
                         f"{r.tool()} because the {r.noun()} is {r.adj()}",
                         f"the {r.team()} team decided to {r.verb()} {r.ident()} behind a "
                         f"{r.noun()} flag"),
            "procedure": (f"to {r.verb()} the {r.noun()}, run `make {r.verb()}-{r.noun()}` "
                          f"then {r.verb()} the {r.ident()} {r.noun()}",
                          f"release steps: {r.verb()} the {r.noun()}, {r.verb()} "
                          f"{r.ident()}, then {r.verb()} the {r.noun()} in {r.tool()}"),
            "pitfall": (f"{r.tool()} {r.noun()} fails with a {r.adj()} {r.noun()} when "
                        f"{r.ident()} is {r.adj()}; the fix is to {r.verb()} the {r.noun()}",
                        f"a {r.adj()} {r.noun()} in {r.ident()} made the {r.noun()} "
                        f"{r.adj()} until we added a {r.noun()} {r.noun()}"),
            "fact": (f"the {r.team()} {r.noun()} runs on {r.tool()} in "
                     f"{r.rng.choice(ENVIRONMENTS)}", f"{r.ident()} owns the {r.noun()} "
                     f"{r.noun()} and writes to {r.tool()}"),
            "reference": (f"{r.noun()} dashboards for {r.team()} live in {r.tool()} under "
                          f"{r.ident()}", f"the {r.noun()} runbook is in {r.tool()}, page "
                          f"{r.ident()}"),
            "project": (f"{r.person().capitalize()} owns the {r.ident()} {r.verb()} for "
                        f"{r.team()}; it is due {r.date()}", f"the {r.noun()} {r.noun()} "
                        f"migration is blocked on {r.ident()} until {r.date()}"),
        }
        return _sentence(self.rng.choice(leads[kind])) + "."

    # memories -------------------------------------------------------------------------------

    def _body(self, kind: str) -> str:
        sentences = [self.lead(kind)]
        sentences += [self.filler() for _ in range(self.rng.choice((0, 0, 1, 1, 2, 3, 4)))]
        return " ".join(sentences)

    def _name(self, kind: str) -> str:
        r = self
        options = (f"{r.verb()} {r.ident()} {r.noun()}", f"{r.tool()} {r.noun()} {r.noun()}",
                   f"{r.adj()} {r.noun()} in {r.ident()}", f"{r.team()} {r.noun()} {kind}")
        return _sentence(self.rng.choice(options))

    def _tags(self) -> list[str]:
        pool = (self.team, self.tool, self.noun)
        return sorted({self.rng.choice(pool)() for _ in range(self.rng.choice((0, 1, 2, 3, 4)))})

    def _paths(self) -> list[str]:
        if self.rng.random() >= 0.3:
            return []
        return [f"src/{self.team()}/{self.noun()}/**", f"services/{self.noun()}/*.py"][
            : self.rng.choice((1, 2))]

    def memory(self) -> dict[str, Any]:
        """One new memory as ``store_many`` takes it; its body is unique in this corpus."""
        kind = self.rng.choices(TYPES, weights=TYPE_WEIGHTS)[0]
        body = self._body(kind)
        while " ".join(body.lower().split()) in self._seen:
            body += " " + self.filler()
        item: dict[str, Any] = {"content": body, "type": kind, "name": self._name(kind),
                                "tags": self._tags(), "paths": self._paths()}
        if self.rng.random() < 0.6:
            item["description"] = self.filler()
        if kind in ("user", "preference") and self.rng.random() < 0.5:
            item["scope"] = "user"
        texts = [body, item["name"], item.get("description", ""), *item["tags"]]
        if find_secrets(texts):  # never expected: the vocabulary avoids secret-like words
            return self.memory()
        self._seen.add(" ".join(body.lower().split()))
        self._names.append(item["name"])
        return item

    def memories(self, count: int) -> list[dict[str, Any]]:
        return [self.memory() for _ in range(count)]

    def queries(self, count: int) -> list[str]:
        """1-4 word queries: frequent words (many matches), rare ones (few), name words."""
        out = []
        for n in range(count):
            words = self.rng.choice((1, 2, 2, 3, 3, 4))
            mode = n % 5
            if mode in (0, 1):
                picks = [self.rng.choice((self.noun, self.tool, self.verb))() for _ in range(words)]
            elif mode in (2, 3):
                picks = [self.rng.choice((self.ident, self.tool, self.noun)).rare()
                         for _ in range(words)]
            else:
                name = self.rng.choice(self._names).split()
                picks = self.rng.sample(name, min(words, len(name)))
            out.append(" ".join(picks))
        return out


# -- measurements ----------------------------------------------------------------------------


@dataclass
class Result:
    size: int
    store_per_s: float
    store_many_per_s: float
    search_p50_ms: float
    search_p95_ms: float
    reindex_s: float
    cli_search_ms: float
    cli_search_minstr: float | None = None  # with --instructions and valgrind


@dataclass(frozen=True)
class Options:
    sizes: tuple[int, ...]
    seed: int
    batch: int
    queries: int
    store_sample: int
    cli_runs: int
    json_path: Path | None
    instructions: bool = False


def machine_speed() -> float:
    """Seconds for a 10-million-step Python loop, the best of two: the development VM's speed
    changes by a factor of two from one session to the next (0.21-0.29 s at full speed), and
    every target here is absolute, so each table says how fast the machine was."""
    # At module level, as ``python -c "for i in range(10_000_000): pass"`` runs it: the loop
    # the notes in docs/benchmarks.md quote (inside a function it runs twice as fast).
    loop = compile("for i in range(10_000_000): pass", "<machine_speed>", "exec")
    best = float("inf")
    for _ in range(2):
        started = time.perf_counter()
        exec(loop, {})
        best = min(best, time.perf_counter() - started)
    return best


def speed_line(before: float, after: float) -> str:
    return (f"machine: a 10-million-step Python loop took {before:.2f} s before the run and "
            f"{after:.2f} s after it (0.21-0.29 s on the development VM at full speed)")


def disk_speed(root: Path, label: str) -> float:
    """Microseconds to create one small file (the mean over 1,000 in a new folder under
    ``root``). Every memory is a file, so writes go as fast as the file system creates them,
    and that varies more than the CPU: on the development VM's ext4 it took 20-70 us, and
    5-20 times longer for minutes after many files were deleted (the kernel steps over
    recently freed inodes one by one). The files stay until ``root`` is removed: deleting
    them here would slow what is measured next."""
    folder = root / f"disk-probe-{label}"
    folder.mkdir()
    payload = b"x" * 500
    started = time.perf_counter()
    for n in range(1000):
        fd = os.open(folder / f"probe-{n}.md", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, payload)
        finally:
            os.close(fd)
    return (time.perf_counter() - started) * 1000  # seconds per 1,000 -> us per file


def disk_line(before: float, after: float) -> str:
    return (f"disk: creating a small file took {before:.0f} us before the run and {after:.0f} us "
            "after it (20-70 us on the development VM; far more soon after mass deletions)")


def _say(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _batches(items: Sequence[dict[str, Any]], size: int) -> Iterator[Sequence[dict[str, Any]]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def measure_store_many(md: Memdir, items: Sequence[dict[str, Any]], batch: int) -> float:
    started = time.perf_counter()
    for chunk in _batches(items, batch):
        md.store_many(chunk)
    return len(items) / (time.perf_counter() - started)


def measure_store(md: Memdir, items: Sequence[dict[str, Any]]) -> float:
    started = time.perf_counter()
    for item in items:
        fields = dict(item)
        md.store(fields.pop("content"), **fields)
    return len(items) / (time.perf_counter() - started)


def _percentile(samples: Sequence[float], pct: int) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[pct - 1]


def measure_search(home: Path, project: Path, queries: Sequence[str]) -> tuple[float, float]:
    """p50 and p95 in ms of searches through one long-lived Memdir."""
    with Memdir(home=home, project=project, semantic=False) as md:
        md.search(queries[0])  # warm-up: the first reconcile of a new instance
        times = []
        for query in queries:
            started = time.perf_counter()
            md.search(query)
            times.append((time.perf_counter() - started) * 1000)
    return _percentile(times, 50), _percentile(times, 95)


def measure_cli(home: Path, project: Path, queries: Sequence[str], runs: int) -> float:
    """Median wall time in ms of one ``python -m memdir search QUERY`` process.

    Python's bytecode cache is allowed (PYTHONDONTWRITEBYTECODE is dropped for the child), as
    on a user's machine: the untimed warm-up run writes the .pyc files the timed runs read.
    """
    env = {**os.environ, "MEMDIR_HOME": str(home)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    times = []
    for n, query in enumerate([queries[0], *queries[:runs]]):
        command = [sys.executable, "-m", "memdir", "search", query, "--project", str(project)]
        started = time.perf_counter()
        subprocess.run(command, env=env, cwd=project, check=True, capture_output=True)
        if n:  # the first run only warms caches
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure_reindex(home: Path, project: Path) -> float:
    with Memdir(home=home, project=project, semantic=False) as md:
        started = time.perf_counter()
        md.reindex()
        return time.perf_counter() - started


def bench_size(size: int, opts: Options, root: Path) -> Result:
    corpus = Corpus(opts.seed)
    _say(f"{size:,}: generating the corpus")
    bulk = corpus.memories(size)
    extra = corpus.memories(opts.store_sample)
    queries = corpus.queries(opts.queries)
    home, project = root / f"{size}" / "home", root / f"{size}" / "project"
    project.mkdir(parents=True)
    with Memdir(home=home, project=project, semantic=False) as md:
        _say(f"{size:,}: store_many")
        store_many = measure_store_many(md, bulk, opts.batch)
    _say(f"{size:,}: search ({len(queries)} queries)")
    p50, p95 = measure_search(home, project, queries)
    _say(f"{size:,}: CLI search ({opts.cli_runs} runs)")
    cli = measure_cli(home, project, queries, opts.cli_runs)
    instructions = None
    if opts.instructions:
        _say(f"{size:,}: CLI search under callgrind")
        env = {**os.environ, "MEMDIR_HOME": str(home)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        instructions = count_instructions(
            [sys.executable, "-m", "memdir", "search", queries[0], "--project", str(project)],
            env=env, cwd=project)
    _say(f"{size:,}: reindex")
    reindex = measure_reindex(home, project)
    _say(f"{size:,}: store ({len(extra)} single stores)")
    with Memdir(home=home, project=project, semantic=False) as md:
        store = measure_store(md, extra)
    return Result(size, store, store_many, p50, p95, reindex, cli, instructions)


# -- targets and report ----------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    metric: str
    limit: float
    size: int | None = None  # None: at every size measured
    higher_is_better: bool = False

    def label(self) -> str:
        where = "every size" if self.size is None else f"{self.size:,}"
        sign = "≥" if self.higher_is_better else "≤"
        title, unit = METRICS[self.metric]
        return f"{title} at {where} {sign} {self.limit:,g} {unit}"

    def passes(self, value: float) -> bool:
        return value >= self.limit if self.higher_is_better else value <= self.limit


METRICS: dict[str, tuple[str, str]] = {
    "store_per_s": ("store() single", "memories/s"),
    "store_many_per_s": ("store_many", "memories/s"),
    "search_p50_ms": ("search p50", "ms"),
    "search_p95_ms": ("search p95", "ms"),
    "reindex_s": ("reindex", "s"),
    "cli_search_ms": ("CLI search process", "ms"),
    "cli_search_minstr": ("CLI search process", "M instructions"),
}

TARGETS = (
    Target("search_p50_ms", 5, size=10_000),
    Target("search_p50_ms", 30, size=100_000),
    Target("store_many_per_s", 2_000, higher_is_better=True),
    Target("reindex_s", 5, size=10_000),
    Target("cli_search_ms", 150, size=10_000),
)


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def results_table(results: Sequence[Result]) -> str:
    head = ["metric", *[f"{r.size:,}" for r in results]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for metric, (title, unit) in METRICS.items():
        values = [getattr(r, metric) for r in results]
        if all(v is None for v in values):  # instructions: not asked for, or no valgrind
            continue
        cells = ["n/a" if v is None else _fmt(v) for v in values]
        lines.append(f"| {title} ({unit}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def target_checks(results: Sequence[Result]) -> list[tuple[Target, int, float, bool]]:
    checks = []
    for target in TARGETS:
        for result in results:
            if target.size in (None, result.size):
                value = getattr(result, target.metric)
                checks.append((target, result.size, value, target.passes(value)))
    return checks


def targets_table(results: Sequence[Result]) -> str:
    lines = ["| target | size | measured | result |", "|---|---|---|---|"]
    for target, size, value, ok in target_checks(results):
        unit = METRICS[target.metric][1]
        lines.append(f"| {target.label()} | {size:,} | {_fmt(value)} {unit} | "
                     f"{'PASS' if ok else 'FAIL'} |")
    return "\n".join(lines)


def write_json(path: Path, results: Sequence[Result], opts: Options,
               speed: tuple[float, float], disk: tuple[float, float]) -> None:
    checks = [{"target": t.label(), "size": size, "value": value, "pass": ok}
              for t, size, value, ok in target_checks(results)]
    data = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "seed": opts.seed,
            "loop_10m_s": {"before": speed[0], "after": speed[1]},
            "file_create_us": {"before": disk[0], "after": disk[1]},
            "batch": opts.batch, "queries": opts.queries, "store_sample": opts.store_sample,
            "cli_runs": opts.cli_runs, "results": [asdict(r) for r in results],
            "targets": checks}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


# -- command line ----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--sizes", default="1000,10000,100000",
                   help="comma-separated corpus sizes (default: 1000,10000,100000)")
    p.add_argument("--quick", action="store_true", help="only 1,000 and 10,000")
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    p.add_argument("--seed", type=int, default=20_260_101)
    p.add_argument("--batch", type=int, default=5_000, help="store_many batch size")
    p.add_argument("--queries", type=int, default=300, help="searches timed per size")
    p.add_argument("--store-sample", type=int, default=300, help="single store() calls timed")
    p.add_argument("--cli-runs", type=int, default=10, help="CLI processes timed")
    p.add_argument("--instructions", action="store_true",
                   help="also count the instructions of one CLI search process (valgrind)")
    args = p.parse_args(argv)
    sizes = (1_000, 10_000) if args.quick else tuple(
        int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip())
    return Options(sizes, args.seed, args.batch, args.queries, args.store_sample,
                   args.cli_runs, args.json, args.instructions)


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    results = []
    before = machine_speed()
    with tempfile.TemporaryDirectory(prefix="memdir-bench-") as tmp:
        disk_before = disk_speed(Path(tmp), "before")
        for size in opts.sizes:
            result = bench_size(size, opts, Path(tmp))
            results.append(result)
            _say(f"{size:,}: done: {json.dumps(asdict(result))}")
        after = machine_speed()  # before the temporary directory's removal stalls the disk
        disk_after = disk_speed(Path(tmp), "after")
    print(f"memdir core benchmarks (Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)\n")
    print(results_table(results))
    print()
    print(targets_table(results))
    print()
    print(speed_line(before, after))
    print(disk_line(disk_before, disk_after))
    if opts.json_path:
        write_json(opts.json_path, results, opts, (before, after), (disk_before, disk_after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
