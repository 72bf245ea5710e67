"""Cached retrieval signals for tuning the hybrid fusion offline (``bench/quality.py``'s sets).

Embedding REALTALK's 9k turns takes minutes; trying a fusion takes milliseconds once every
query's candidate signals are on disk. ``collect`` builds the same memdir stores as
``bench/quality.py`` (``Memdir.store_many``, every vector computed) and writes, per query:
the FTS5 phrases of the query with the number of memories holding each (``n_t``) and the
number of rows ``N``; and, for every candidate (the ``LEXICAL`` best BM25 matches and the
``SEMANTIC`` nearest vectors with cosine ≥ ``COSINE_FLOOR``), its BM25 (memdir's weights,
0 when it matches no word), its cosine, and its rank in each pool. ``evaluate`` replays
fusions over the cache and prints the recall table, with both halves (A: tuned on, B: held
out), like ``bench/quality.py``.

Usage::

    python bench/fusion_cache.py collect --out /tmp/signals.json.gz   # minutes
    python bench/fusion_cache.py evaluate --cache /tmp/signals.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality_data as qd
from memdir import Memdir
from memdir.safety import find_secrets, redact_secrets
from memdir.search import BM25_WEIGHTS, best_matches, fts_query, query_terms
from quality import SCRATCH, half

LEXICAL = 50  # cached BM25 pool (memdir uses 25)
SEMANTIC = 50  # cached vector pool (memdir uses 25)
COSINE_FLOOR = 0.1  # cached neighbours down to here (memdir's floor is 0.2)
K = 10


def _signals(md: Memdir, query: str, units: dict[int, str], rowids: dict[tuple[str, str], int],
             names: list[int], matrix: Any) -> dict[str, Any]:
    import numpy as np

    conn = md.index.conn
    dirs = md._dirs()
    fts = fts_query(query)
    lexical: dict[int, float] = {}
    if fts is not None:
        rows = best_matches(conn, fts, dirs, types=[], tags=None, include_archived=False,
                            limit=LEXICAL, whole=False)
        lexical = {rowids[(r[0], r[1])]: -float(r[2]) for r in rows}
    vec = md.embedder.embed([query])[0] if md.embedder else None
    cos = np.einsum("ij,j->i", matrix, vec) if vec is not None else np.zeros(len(names))
    order = np.argsort(-cos, kind="stable")[:SEMANTIC]
    semantic = [names[i] for i in order if cos[i] >= COSINE_FLOOR]
    cosine = {rowid: float(c) for rowid, c in zip(names, cos, strict=True)}
    keys = list(dict.fromkeys([*lexical, *semantic]))
    bm25 = dict(lexical)
    missing = [k for k in keys if k not in bm25]
    if fts is not None and missing:
        weights = ", ".join(str(w) for w in BM25_WEIGHTS)
        for rowid, rank in conn.execute(
                f"SELECT rowid, bm25(memories_fts, {weights}) FROM memories_fts WHERE "
                f"memories_fts MATCH ? AND rowid IN ({','.join('?' * len(missing))})",
                [fts, *missing]):
            bm25[rowid] = -float(rank)
    terms = [[(p, conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?",
                               (f'"{p}"',)).fetchone()[0]) for p in forms]
             for forms in query_terms(query)]
    lex_rank = {k: n for n, k in enumerate(lexical)}
    sem_rank = {k: n for n, k in enumerate(semantic)}
    return {"terms": terms, "cands": [
        [units[k], bm25.get(k, 0.0), cosine.get(k), lex_rank.get(k, -1), sem_rank.get(k, -1)]
        for k in keys]}


def collect(out: Path, datasets: Sequence[str]) -> None:
    import numpy as np

    from memdir.embed import stack_blobs

    cache: dict[str, Any] = {"lexical": LEXICAL, "semantic": SEMANTIC, "queries": []}
    for dataset in datasets:
        corpora = (qd.load_realtalk() if dataset == "realtalk"
                   else [qd.load_madial("user")])
        for corpus in corpora:
            started = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="memdir-fusion-", dir=SCRATCH) as tmp:
                (Path(tmp) / "project").mkdir()
                md = Memdir(home=Path(tmp) / "home", project=Path(tmp) / "project",
                            semantic=True)
                with md:
                    items = []
                    for unit in corpus.units:
                        text = redact_secrets(unit.text) if find_secrets([unit.text]) else unit.text
                        items.append({"content": text, "type": "episode",
                                      "meta": {"unit": unit.id}})
                    aliases: dict[str, list[str]] = defaultdict(list)
                    for unit, memory in zip(corpus.units, md.store_many(items), strict=True):
                        aliases[str(memory.meta.get("unit"))].append(unit.id)
                    md.embed_memories()
                    conn = md.index.conn
                    rowids, units = {}, {}
                    for rowid, d, f, meta in conn.execute(
                            "SELECT rowid, dir, file, meta FROM memories"):
                        rowids[(d, f)] = rowid
                        units[rowid] = str(json.loads(meta).get("unit"))
                    emb = conn.execute("SELECT dir, file, vector FROM embeddings").fetchall()
                    assert md.embedder is not None
                    names = [rowids[(d, f)] for d, f, _ in emb]
                    matrix = stack_blobs([v for _, _, v in emb], md.embedder.dim)
                    matrix = np.asarray(matrix, dtype=np.float32)
                    n_rows = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
                    for query in corpus.queries:
                        entry = _signals(md, qd.prepare(query.text, "memdir"), units, rowids,
                                         names, matrix)
                        entry.update(id=query.id, dataset=dataset, half=half(query),
                                     relevant=list(query.relevant), N=n_rows,
                                     aliases={u: aliases[u] for u in {c[0] for c in
                                                                      entry["cands"]}})
                        cache["queries"].append(entry)
            print(f"[fusion_cache] {dataset} {corpus.name}: {len(corpus.queries)} queries, "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        json.dump(cache, fh)


# -- replaying fusions -------------------------------------------------------------------

Fusion = Callable[[dict[str, Any]], list[str]]  # a cached query -> unit ids, best first
HEADLINE = {"realtalk": ("recall@10", 10), "madial": ("recall@5", 5)}


def pools(entry: dict[str, Any], lexical: int = 25, semantic: int = 25,
          floor: float = 0.2) -> list[list[Any]]:
    """The candidates memdir's hybrid search sees: its BM25 pool and vector pool."""
    return [c for c in entry["cands"]
            if 0 <= c[3] < lexical or (0 <= c[4] < semantic and c[2] >= floor)]


def zfusion(entry: dict[str, Any]) -> list[str]:
    """The z-score fusion as memdir ran it before the absolute scale (the reference)."""
    cands = pools(entry)
    lexical = {c[0]: c[1] for c in cands if c[3] >= 0 and c[3] < 25}
    cosine = {c[0]: c[2] for c in cands if c[2] is not None}
    return [k for k, _, _ in _zfuse([c[0] for c in cands], lexical, cosine)][:K]


def _zscores(values: list[float], min_spread: float) -> list[float]:
    mean = math.fsum(values) / len(values)
    sd = max(math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values)), min_spread)
    if sd <= 1e-12 * max(1.0, abs(mean)):
        return [0.0] * len(values)
    return [(v - mean) / sd for v in values]


def _zfuse(keys: list[str], lexical: dict[str, float],
           semantic: dict[str, float]) -> list[tuple[str, float, float]]:
    """The z-score fusion memdir shipped before the score scale: 0.4 × z(BM25) + 0.6 ×
    z(cosine) over the candidates (spreads floored at 10% of the best BM25 and 0.05)."""
    if not keys:
        return []
    known = [semantic[k] for k in keys if k in semantic]
    neutral = math.fsum(known) / len(known) if known else 0.0
    bm25 = [lexical.get(k, 0.0) for k in keys]
    words = _zscores(bm25, 0.1 * max(abs(v) for v in bm25))
    meaning = _zscores([semantic.get(k, neutral) for k in keys], 0.05)
    mixed = [0.4 * w + 0.6 * m for w, m in zip(words, meaning, strict=True)]
    return sorted(zip(keys, mixed, mixed, strict=True), key=lambda t: (-t[1], t[0]))


def words_only(entry: dict[str, Any]) -> list[str]:
    ranked = sorted((c for c in entry["cands"] if c[3] >= 0), key=lambda c: c[3])
    return [c[0] for c in ranked][:K]


def absolute(entry: dict[str, Any], **constants: float) -> list[str]:
    """memdir's fusion (memdir.hybrid.fuse_scores on the memdir.scale scale) over the cached
    candidates; ``constants`` override memdir.scale's (LEXICAL_WEIGHT, LEXICAL_SATURATION,
    SIMILARITY_FLOOR, COSINE_FULL) for a tuning run."""
    import memdir.scale as scale
    from memdir.hybrid import fuse_scores

    saved = {name: getattr(scale, name) for name in constants}
    try:
        for name, value in constants.items():
            setattr(scale, name, value)
        cands = pools(entry, floor=scale.SIMILARITY_FLOOR)
        ideal = scale.ideal_bm25(entry["N"], [[n for _, n in forms] for forms in entry["terms"]])
        lexical = {c[0]: scale.lexical_evidence(c[1], ideal) for c in cands}
        cosine = {c[0]: c[2] for c in cands if c[2] is not None}
        fused = fuse_scores([c[0] for c in cands], lexical, cosine, {},
                            lexical_weight=scale.LEXICAL_WEIGHT)
    finally:
        for name, value in saved.items():
            setattr(scale, name, value)
    return [k for k, _, _ in fused][:K]


def grid(cache: dict[str, Any]) -> str:
    """The tuning grid: every combination, sorted by the sum of both half-A headlines."""
    rows = []
    for w in (0.35, 0.4, 0.45, 0.5):
        for c in (0.5, 0.75, 1.0, 1.25):
            for full in (0.6, 0.7, 0.8, 0.9):
                def fusion(e: dict[str, Any], w: float = w, c: float = c,
                           full: float = full) -> list[str]:
                    return absolute(e, LEXICAL_WEIGHT=w, LEXICAL_SATURATION=c, COSINE_FULL=full)
                rows.append((f"w={w} c={c} full={full}", fusion))
    scored = [(label, _headlines(cache, fn)) for label, fn in rows]
    scored.sort(key=lambda t: -(t[1]["realtalk"]["A"] + t[1]["madial"]["A"]))
    return "\n".join(f"{label}: " + "  ".join(
        f"{d} {v['all']:.3f} (A {v['A']:.3f}, B {v['B']:.3f})" for d, v in h.items())
        for label, h in scored[:15])


def _headlines(cache: dict[str, Any], fusion: Fusion) -> dict[str, dict[str, float]]:
    out = {}
    for dataset in ("realtalk", "madial"):
        got: dict[str, list[float]] = defaultdict(list)
        for entry in cache["queries"]:
            if entry["dataset"] == dataset:
                value = recall(entry, fusion(entry))
                got["all"].append(value)
                got[entry["half"]].append(value)
        out[dataset] = {k: sum(v) / len(v) for k, v in got.items()}
    return out


def recall(entry: dict[str, Any], ranked: list[str]) -> float:
    _, k = HEADLINE[entry["dataset"]]
    found = [u for hit in ranked for u in entry["aliases"].get(hit, [hit])]
    found = list(dict.fromkeys(found))[:k]
    rel = set(entry["relevant"])
    return len(rel.intersection(found)) / len(rel)


def report(cache: dict[str, Any], fusions: dict[str, Fusion]) -> str:
    lines = ["| fusion | REALTALK R@10 | A | B | MADial R@5 | A | B |", "|---" * 7 + "|"]
    for label, fusion in fusions.items():
        h = _headlines(cache, fusion)
        cells = [f"{h[d][part]:.3f}" for d in ("realtalk", "madial") for part in ("all", "A", "B")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--datasets", default="realtalk,madial")
    e = sub.add_parser("evaluate")
    e.add_argument("--cache", type=Path, required=True)
    e.add_argument("--grid", action="store_true", help="also print the tuning grid")
    args = parser.parse_args(argv)
    if args.command == "collect":
        collect(args.out, args.datasets.split(","))
        return 0
    with gzip.open(args.cache, "rt", encoding="utf-8") as fh:
        cache = json.load(fh)
    print(report(cache, {"words only (BM25)": words_only, "z-score fusion (before)": zfusion,
                         "score scale (memdir now)": absolute}))
    if args.grid:
        print("\n" + grid(cache))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
