"""Hybrid search latency with embeddings: p50 / p95 in-process at 10k memories, model warm.

A fresh temporary MEMDIR home and project are loaded with ``store_many`` from core.py's
``Corpus``; every vector is computed first (``Memdir.embed_memories``, timed: the cost of
``memdir reindex --embeddings``); then ``--queries`` realistic queries run through one
long-lived ``Memdir`` with semantic search on, after one untimed warm-up search (which loads
the vector matrix). The same queries with ``mode="fts"`` give the BM25-only latency next to
it. Target: hybrid p50 <= 15 ms at 10k.

Usage::

    python bench/semantic.py [--size 10000] [--queries 200] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from memdir import Memdir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import Corpus

TARGET_MS = 15.0


def _times(md: Memdir, queries: list[str], mode: str) -> list[float]:
    md.search(queries[0], mode=mode, touch=False)  # warm-up: matrix and caches
    out = []
    for query in queries:
        started = time.perf_counter()
        md.search(query, mode=mode, touch=False)
        out.append((time.perf_counter() - started) * 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args(argv)
    corpus = Corpus(5)
    items = corpus.memories(opts.size)
    queries = corpus.queries(opts.queries)
    with tempfile.TemporaryDirectory(prefix="memdir-bench-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        project.mkdir()
        with Memdir(home=home, project=project, semantic=True) as md:
            for start in range(0, opts.size, 5000):
                md.store_many(items[start:start + 5000])
            if md.embedder is None:
                raise SystemExit("the embed extra is not installed")
            started = time.perf_counter()
            embedded = md.embed_memories()
            embed_s = time.perf_counter() - started
            hybrid = _times(md, queries, "hybrid")
            fts = _times(md, queries, "fts")
    q = statistics.quantiles
    rows = {"hybrid": (statistics.median(hybrid), q(hybrid, n=20)[18]),
            "fts": (statistics.median(fts), q(fts, n=20)[18])}
    print(f"{opts.size:,} memories; {embedded:,} vectors computed in {embed_s:.1f} s "
          f"({embedded / embed_s:.0f}/s)\n")
    print("| search | p50 (ms) | p95 (ms) |\n|---|---|---|")
    for name, (p50, p95) in rows.items():
        print(f"| {name} | {p50:.1f} | {p95:.1f} |")
    verdict = "PASS" if rows["hybrid"][0] <= TARGET_MS else "FAIL"
    print(f"\nhybrid p50 at {opts.size:,} <= {TARGET_MS:.0f} ms: {rows['hybrid'][0]:.1f} ms "
          f"{verdict}")
    if opts.json:
        opts.json.write_text(json.dumps({"size": opts.size, "embed_s": embed_s,
                                         "search": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
