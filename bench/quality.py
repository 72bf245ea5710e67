"""Recall-quality benchmark: does memdir bring back the right memories on real conversations?

What is measured (datasets in ``../shared/datasets``, loaded by ``quality_data.py``):

- REALTALK: every turn of a conversation is one memory ("speaker: text"), one fresh store per
  conversation; each question is a query; evidence Recall@5 / @10 (share of the question's
  evidence turns in the top k, averaged over questions) and all-evidence-found@5 / @10.
- MADial-Bench (English): the 160-memory bank is one store; each dialogue's context before its
  first test turn is a query; Recall@5 and nDCG@5 with binary relevance. The default context
  is the last user line, what ``Memdir.recall`` gets from a prompt hook; ``--context`` tries
  others. The test turn itself is the assistant line voicing the memory and is never used.

Each retriever is a function ``(md, query, k) -> [unit id]`` over a real memdir store built
with ``Memdir.store_many`` in a temporary home (``bm25`` = today's ``Memdir.search``; ``hybrid``
= ``search(mode="hybrid")``, skipped until it exists; its store has every vector computed
before the first query, as after ``memdir reindex --embeddings``). ``sqlite`` is the
reference point outside memdir: plain SQLite FTS5 BM25 over the raw units, the query an OR of
all its tokens. Variant rows try cheap changes (``--variants``): a fuller stop-word list,
REALTALK turns indexed with their neighbours, pseudo-relevance-feedback query expansion,
MADial query contexts, and issue 20's signals by name (``ALIASES``): ``context`` (the turn
before as memdir search context), ``dates`` (the day as the memory's date), ``query words``,
``embed context``; ``--variant-retriever bm25,hybrid`` gives each variant a row per retriever.
Every row sees the same queries; nothing reads answers or test turns.
Searches pass ``touch=False`` so one query's hits do not reinforce memories for the next. The
Δ columns: mean per-query difference from the ``bm25`` row on the issue's target metric, ± a
95% interval.

Halves: the hybrid's settings were tuned on one half of each dataset (REALTALK's odd-numbered
conversations, MADial's even-numbered dialogues: half "A") and checked on the other ("B");
the second table gives every row's headline metrics on each half.

Usage::

    python bench/quality.py                                   # everything, default variants
    python bench/quality.py --retrievers bm25,hybrid --variants none --json out.json
    python bench/quality.py --datasets madial --variants context=last3,expand=5
    python bench/quality.py --retrievers sqlite,bm25,hybrid --variant-retriever bm25,hybrid \
        --variants "context,dates,context+dates,query words,embed context"
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from memdir import Memdir
from memdir.core.model import Hit
from memdir.core.safety import find_secrets, redact_secrets

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality_data as qd
from quality_data import Corpus, Query, Unit, tokens

Retriever = Callable[[Memdir, str, int], list[str]]
Search = Callable[[str, int], list[str]]
K = 10  # results asked for; @5 metrics use the first five
FEEDBACK_DOCS = 3  # hits whose words feed query expansion
BASELINE = "sqlite"
BASELINE_TOKENIZER = "porter unicode61 remove_diacritics 2"  # memdir's own tokenizer
# Stores live in RAM when possible: this measures quality, and file I/O would dominate the run.
SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK) else None
DEFAULT_VARIANTS = ("stop=extended", "neighbours=1", "neighbours=2", "expand=3", "expand=8",
                    "context=last2", "context=last3", "context=users", "context=all",
                    "stop=extended+neighbours=2+context=users", "context", "dates",
                    "context+dates", "query words")
# Variant names for issue 20's signals (a part without "=" in a spec): search context (each
# REALTALK turn stored with the turn before it, "speaker: text", as memdir search context;
# MADial memories have no message before them, so it changes nothing there), dates as words
# (the turn's day, MADial's memory time, as the memory's date), question scaffolding dropped
# from queries, and the search context in the embedded text too (hybrid only).
ALIASES = {"context": "prev=1", "dates": "dates=1", "query words": "qwords=1",
           "embed context": "prev=1+ectx=1"}


def bm25(md: Memdir, query: str, k: int) -> list[str]:
    """Today's ``Memdir.search``: FTS5 BM25 × the bounded strength factor."""
    return [str(h.memory.meta.get("unit")) for h in md.search(query, limit=k, touch=False,
                                                               mode="fts")]


def hybrid(md: Memdir, query: str, k: int) -> list[str]:
    """BM25 fused with embeddings, once ``Memdir.search`` takes ``mode="hybrid"``."""
    search: Callable[..., list[Hit]] = md.search
    return [str(h.memory.meta.get("unit")) for h in search(query, limit=k, touch=False,
                                                            mode="hybrid")]


RETRIEVERS: dict[str, Retriever] = {"bm25": bm25, "hybrid": hybrid}
MEMDIR_OPTIONS: dict[str, dict[str, Any]] = {  # Memdir(...) flags per retriever
    "bm25": {"semantic": False}, "hybrid": {"semantic": True}}


class UnavailableError(Exception):
    """The retriever needs a memdir feature this checkout does not have."""


@dataclass(frozen=True)
class Options:
    stop: str = "memdir"  # memdir: the library's own list | extended: STOP_EXTENDED dropped first
    neighbours: int = 0  # REALTALK: append the N turns before and after (same session)
    expand: int = 0  # add N words from the top FEEDBACK_DOCS hits, then search again
    context: str = "user"  # MADial query: user, lastK, users, all (see quality_data)
    prev: int = 0  # 1: the unit before (REALTALK) as the memory's search context
    dates: int = 0  # 1: the unit's day as the memory's date (indexed as words)
    qwords: int = 0  # 1: question scaffolding (quality_data.QUESTION_WORDS) dropped too
    ectx: int = 0  # 1: the embedded text is the search context, then the memory's own

    @classmethod
    def parse(cls, spec: str, base: Options) -> Options:
        """``"neighbours=1+stop=extended"`` applied over ``base``."""
        types = {f.name: type(getattr(base, f.name)) for f in fields(cls)}
        changes: dict[str, Any] = {}
        parts = [p for part in spec.split("+") if part
                 for p in ALIASES.get(part.strip(), part).split("+")]
        for part in parts:
            key, _, value = part.partition("=")
            if key not in types:
                raise SystemExit(f"error: unknown option {key!r} in {spec!r}: {', '.join(types)}")
            changes[key] = types[key](value)
        return replace(base, **changes)

    def spec(self) -> str:
        """The inverse of :meth:`parse` against the defaults ("default" when equal)."""
        plain = Options()
        return "+".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                        if getattr(self, f.name) != getattr(plain, f.name)) or "default"


@dataclass(frozen=True)
class Row:
    label: str
    retriever: str
    options: Options


class CachedEmbedder:
    """memdir's embedder with every text's vector kept for the run: the stores of the variant
    rows embed the same turns (and queries) again, and MiniLM is most of a hybrid row's time."""

    def __init__(self, real: Any) -> None:
        self.real, self.name, self.dim = real, real.name, real.dim
        self.vectors: dict[str, Any] = {}

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        missing = list(dict.fromkeys(t for t in texts if t not in self.vectors))
        if missing:
            self.vectors.update(zip(missing, self.real.embed(missing), strict=True))
        return np.stack([self.vectors[t] for t in texts]) if texts else self.real.embed([])


_EMBEDDER: list[CachedEmbedder] = []


def cached_embedder(md: Memdir) -> None:
    """Give ``md`` the run's caching embedder (made from its own on first use)."""
    if not _EMBEDDER:
        real = md.embedder
        if real is None:
            return
        _EMBEDDER.append(CachedEmbedder(real))
    md._embedder = _EMBEDDER[0]


@contextmanager
def embedded_context(on: bool, contexts: dict[str, str]) -> Iterator[None]:
    """With ``on``, memdir's embedded text of a memory whose body is a key of ``contexts``
    starts with that search context (measured against the text alone)."""
    import memdir.retrieval.semantic as semantic

    plain = semantic.vector_text
    if on:
        def with_context(name: str, description: str, body: str) -> str:
            text = plain(name, description, body)
            return f"{contexts[body]}\n{text}" if contexts.get(body) else text

        semantic.vector_text = with_context  # type: ignore[assignment]
    try:
        yield
    finally:
        semantic.vector_text = plain  # type: ignore[assignment]


@contextmanager
def open_index(retriever: str, units: list[Unit], texts: list[str],
               counts: Counter[str], options: Options = Options()) -> Iterator[Search]:
    """A searcher over ``units`` stored as ``texts``: memdir for a retriever, plain SQLite for
    the baseline. Exact-duplicate bodies (merged by memdir) answer for all their unit ids.
    ``options.prev``, ``.dates`` and ``.ectx`` choose what memdir stores and embeds besides."""
    if retriever == BASELINE:
        conn = sqlite3.connect(":memory:")
        conn.execute(f"CREATE VIRTUAL TABLE u USING fts5(uid UNINDEXED, text, "
                     f"tokenize='{BASELINE_TOKENIZER}')")
        conn.executemany("INSERT INTO u VALUES (?, ?)",
                         [(u.id, t) for u, t in zip(units, texts, strict=True)])

        def raw(query: str, k: int) -> list[str]:
            words = " OR ".join(f'"{t}"' for t in dict.fromkeys(tokens(query)))
            if not words:
                return []
            return [r[0] for r in conn.execute(
                "SELECT uid FROM u WHERE u MATCH ? ORDER BY bm25(u), rowid LIMIT ?", (words, k))]

        yield raw
        conn.close()
        return
    if retriever not in RETRIEVERS:
        raise SystemExit(f"error: unknown retriever {retriever!r}: "
                         f"{', '.join([BASELINE, *RETRIEVERS])}")
    fn = RETRIEVERS[retriever]
    with tempfile.TemporaryDirectory(prefix="memdir-quality-", dir=SCRATCH) as tmp:
        (Path(tmp) / "project").mkdir()
        try:
            md = Memdir(home=Path(tmp) / "home", project=Path(tmp) / "project",
                        **MEMDIR_OPTIONS.get(retriever, {}))
        except TypeError as exc:
            raise UnavailableError(str(exc)) from None
        with md:
            items = []
            for unit, text in zip(units, texts, strict=True):
                if find_secrets([text]):  # memdir refuses secrets: keep the rest of the turn
                    counts["units with a secret redacted"] += 1
                    text = redact_secrets(text)
                item: dict[str, Any] = {"content": text, "type": "episode",
                                        "meta": {"unit": unit.id}}
                if options.prev and unit.before:
                    item["context"] = redact_secrets(unit.before)
                if options.dates and unit.date:
                    item["date"] = unit.date
                items.append(item)
            aliases: dict[str, list[str]] = defaultdict(list)
            contexts: dict[str, str] = {}
            for unit, memory in zip(units, md.store_many(items), strict=True):
                aliases[str(memory.meta.get("unit"))].append(unit.id)
                contexts.setdefault(memory.body, memory.context)
            counts["units merged as exact duplicates"] += len(units) - len(aliases)
            if md.semantic:
                cached_embedder(md)
                # Every vector before the first query (``memdir reindex --embeddings``): a
                # search embeds one batch of missing vectors at most, so otherwise the first
                # questions of a conversation would be asked of a half-embedded store.
                with embedded_context(bool(options.ectx), contexts):
                    md.embed_memories()
            try:
                fn(md, "probe", 1)
            except TypeError as exc:
                raise UnavailableError(str(exc)) from None

            def search(query: str, k: int) -> list[str]:
                found = [uid for hit in fn(md, query, k) for uid in aliases.get(hit, [hit])]
                return list(dict.fromkeys(found))[:k]

            yield search


def half(query: Query) -> str:
    """"A" (the half the hybrid was tuned on) or "B" (held out): REALTALK by conversation
    (odd-numbered files are A), MADial by dialogue (even line numbers are A)."""
    name, _, n = query.id.partition("#")
    if name == "madial":
        return "A" if int(n) % 2 == 0 else "B"
    numbers = [int(x) for x in name.replace("_", " ").split() if x.isdigit()]
    return "A" if numbers and numbers[0] % 2 == 1 else "B"


def score(query: Query, ranked: list[str]) -> dict[str, float]:
    rel = set(query.relevant)
    out: dict[str, float] = {}
    for k in (5, 10):
        found = len(rel.intersection(ranked[:k]))
        out[f"recall@{k}"] = found / len(rel)
        out[f"all@{k}"] = float(found == len(rel))
    dcg = sum(1 / math.log2(i + 2) for i, uid in enumerate(ranked[:5]) if uid in rel)
    out["ndcg@5"] = dcg / sum(1 / math.log2(i + 2) for i in range(min(len(rel), 5)))
    return out


def run_queries(search: Search, queries: list[Query], options: Options,
                texts: dict[str, str]) -> list[dict[str, float]]:
    df: Counter[str] = Counter(w for t in texts.values() for w in set(tokens(t)))
    out = []
    for query in queries:
        text = qd.prepare(query.text, options.stop, bool(options.qwords))
        ranked = search(text, K)
        if options.expand > 0:
            ranked = search(qd.expand(text, ranked[:FEEDBACK_DOCS], texts, df, options.expand), K)
        out.append({**score(query, ranked), "half": float(half(query) == "B")})
    return out


METRICS = {"realtalk": ("recall@5", "recall@10", "all@5", "all@10"),
           "madial": ("recall@5", "ndcg@5")}
HEADLINE = {"realtalk": "recall@10", "madial": "recall@5"}  # the targets


def effective(options: Options, dataset: str) -> Options:
    """The options that change a dataset's results (rows equal here share one computation).
    MADial memories have no message before them: search context does not apply there."""
    if dataset == "realtalk":
        return replace(options, context="")
    return replace(options, neighbours=0, prev=0, ectx=0)


def load(dataset: str, rows: list[Row]) -> tuple[list[Corpus], dict[str, list[list[Query]]]]:
    """The corpora (one store each) and, per MADial context, their queries."""
    if dataset == "realtalk":
        corpora = qd.load_realtalk()
        return corpora, {"": [c.queries for c in corpora]}
    if dataset == "madial":
        loaded = {ctx: qd.load_madial(ctx) for ctx in {r.options.context for r in rows}}
        first = next(iter(loaded.values()))
        return [Corpus("madial", first.units, [], first.counts)], {
            ctx: [c.queries] for ctx, c in loaded.items()}
    raise SystemExit(f"error: unknown dataset {dataset!r}: realtalk, madial")


def evaluate(rows: list[Row], datasets: Sequence[str]) -> dict[str, Any]:
    """Per row and dataset, the metrics averaged over queries; plus counts and timings."""
    scores: dict[tuple[str, str, Options], list[dict[str, float]]] = defaultdict(list)
    counts: dict[str, Counter[str]] = {d: Counter() for d in datasets}
    timings: dict[str, float] = defaultdict(float)
    unavailable: dict[str, str] = {}
    for dataset in datasets:
        corpora, queries = load(dataset, rows)
        for c in corpora:
            counts[dataset].update(c.counts)
        groups: dict[tuple[str, Options], set[Options]] = defaultdict(set)
        for row in rows:
            opts = effective(row.options, dataset)
            stored = Options(neighbours=opts.neighbours) if row.retriever == BASELINE else \
                Options(neighbours=opts.neighbours, prev=opts.prev, dates=opts.dates,
                        ectx=opts.ectx if row.retriever != "bm25" else 0)
            groups[(row.retriever, stored)].add(opts)
        for (retriever, stored), variants in groups.items():
            nb = stored.neighbours
            notes: Counter[str] = Counter()
            for n, corpus in enumerate(corpora):
                if retriever in unavailable:
                    break
                texts = qd.contents(corpus.units, nb)
                started = time.perf_counter()
                try:
                    with open_index(retriever, corpus.units, texts, notes, stored) as search:
                        timings[f"{dataset} index {retriever} {stored.spec()}"] += (
                            time.perf_counter() - started)
                        by_id = {u.id: t for u, t in zip(corpus.units, texts, strict=True)}
                        for opts in sorted(variants, key=repr):
                            began = time.perf_counter()
                            scores[(dataset, retriever, opts)] += run_queries(
                                search, queries[opts.context][n], opts, by_id)
                            timings[f"{dataset} queries {retriever} {opts.spec()}"] += (
                                time.perf_counter() - began)
                except UnavailableError as exc:
                    unavailable[retriever] = str(exc)
                    print(f"[quality] {retriever} skipped: {exc}", file=sys.stderr)
            if retriever == "bm25":  # the same stores for every memdir retriever
                counts[dataset].update({f"{k} ({stored.spec()})": v for k, v in notes.items()})
    results = []
    kept = [r for r in rows if r.retriever not in unavailable]
    reference = next((r for r in kept if r.retriever == "bm25"), kept[0] if kept else None)
    for row in kept:
        assert reference is not None
        entry: dict[str, Any] = {"label": row.label, "retriever": row.retriever,
                                 "options": asdict(row.options)}
        for dataset in datasets:
            got = scores[(dataset, row.retriever, effective(row.options, dataset))]
            ref = scores[(dataset, reference.retriever, effective(reference.options, dataset))]
            entry[dataset] = {m: sum(s[m] for s in got) / len(got) for m in METRICS[dataset]}
            entry[dataset]["queries"] = len(got)
            for name, flag in (("A", 0.0), ("B", 1.0)):
                part = [x for x in got if x["half"] == flag]
                entry[dataset][f"half {name}"] = {
                    m: sum(x[m] for x in part) / len(part) for m in METRICS[dataset]} | {
                    "queries": len(part)} if part else {}
            entry[dataset]["delta"] = paired_delta(got, ref, HEADLINE[dataset])
        results.append(entry)
    return {"rows": results, "reference": reference.label if reference else None,
            "counts": {d: dict(c) for d, c in counts.items()},
            "seconds": {k: round(v, 2) for k, v in timings.items()}, "unavailable": unavailable}


def paired_delta(got: list[dict[str, float]], ref: list[dict[str, float]],
                 metric: str) -> tuple[float, float]:
    """Mean per-query difference from the reference row and its 95% half-width (normal)."""
    diffs = [a[metric] - b[metric] for a, b in zip(got, ref, strict=True)]
    return (statistics.fmean(diffs), 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs)))


def table(report: dict[str, Any], datasets: Sequence[str]) -> str:
    heads = [f"{d.upper()} {m.replace('recall', 'R')}" for d in datasets for m in METRICS[d]]
    heads += [f"Δ {d.upper()} {HEADLINE[d].replace('recall', 'R')}" for d in datasets]
    lines = ["| retriever | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for row in report["rows"]:
        cells = [f"{row[d][m]:.3f}" for d in datasets for m in METRICS[d]]
        cells += ["{:+.3f} ± {:.3f}".format(*row[d]["delta"]) for d in datasets]
        lines.append(f"| {row['label']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def halves_table(report: dict[str, Any], datasets: Sequence[str]) -> str:
    """Every row's headline metric per dataset on half A (tuned on) and B (held out)."""
    heads = [f"{d.upper()} {HEADLINE[d].replace('recall', 'R')} {h}" for d in datasets
             for h in ("A", "B")]
    lines = ["| retriever | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for row in report["rows"]:
        cells = [f"{row[d][f'half {h}'].get(HEADLINE[d], float('nan')):.3f}"
                 for d in datasets for h in ("A", "B")]
        lines.append(f"| {row['label']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--retrievers", default="sqlite,bm25,hybrid",
                        help=f"comma list of {BASELINE}, {', '.join(RETRIEVERS)}")
    parser.add_argument("--datasets", default="realtalk,madial")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                        help="extra rows, e.g. 'neighbours=1+stop=extended,expand=5'; 'none'")
    parser.add_argument("--variant-retriever", default="bm25",
                        help="comma list: each variant is a row for each of these retrievers")
    base = Options()
    parser.add_argument("--stop", default=base.stop, choices=("memdir", "extended"))
    parser.add_argument("--neighbours", type=int, default=base.neighbours)
    parser.add_argument("--expand", type=int, default=base.expand)
    parser.add_argument("--context", default=base.context, help="MADial query context")
    args = parser.parse_args(argv)
    base = Options(args.stop, args.neighbours, args.expand, args.context)
    if any(r.startswith(BASELINE) for r in args.variant_retriever.split(",")):
        raise SystemExit(f"error: variants are memdir rows; {BASELINE} is the fixed baseline")
    datasets = [d for d in args.datasets.split(",") if d]
    rows = [Row(r, r, base) for r in args.retrievers.split(",") if r]
    if args.variants != "none":
        rows += [Row(f"{retriever} {spec}", retriever, Options.parse(spec, base))
                 for retriever in args.variant_retriever.split(",") if retriever
                 for spec in args.variants.split(",") if spec]
    started = time.perf_counter()
    report = evaluate(rows, datasets)
    report["seconds"]["total"] = round(time.perf_counter() - started, 2)
    report["setup"] = {"options": asdict(base), "k": K, "feedback_docs": FEEDBACK_DOCS,
                       "python": platform.python_version(), "sqlite": sqlite3.sqlite_version}
    print(table(report, datasets))
    print("\nHalves (A: the settings were tuned here, B: held out)\n")
    print(halves_table(report, datasets))
    for dataset, counts in report["counts"].items():
        print(f"\n{dataset}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"\nwall time {report['seconds']['total']:.1f} s; options {asdict(base)}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
