"""Cached retrieval signals for tuning the hybrid fusion offline (``bench/quality.py``'s sets).

Embedding REALTALK's 9k turns takes minutes; trying a fusion takes milliseconds once every
query's signals are on disk. ``collect`` builds the same memdir stores as
``bench/quality.py`` (``Memdir.store_many``, every vector computed; by default with issue 20's
signals: each REALTALK turn with the turn before it as search context, every unit's day as its
date; ``--signals none`` for the text alone) and writes, per store, FTS5's row count, average
row length and each row's length; per query, its words (the searched forms, the rows holding
each), each matching row's count of each form in each FTS5 column, and the cosines of those
rows and of the ``SEMANTIC`` nearest vectors (≥ ``COSINE_FLOOR``). From the counts, ``Replay``
recomputes FTS5's bm25() for any column weights (checked against FTS5's own at memdir's
weights), takes the two pools and scores them on the score scale: every constant of
:class:`Setting` (the scale's, the pools, the context and dates column weights) can be tried.
``evaluate`` prints the recall table, with both halves (A: tuned on, B: held out) and the
paired per-query difference from memdir's current setting (95% interval), like
``bench/quality.py``; ``--search`` runs a coordinate search over ``GRIDS`` on half A.

Usage::

    python bench/fusion_cache.py collect --out /tmp/signals.json.gz   # ~4 min on 2 cores
    python bench/fusion_cache.py evaluate --cache /tmp/signals.json.gz --search
    python bench/fusion_cache.py evaluate --cache /tmp/signals.json.gz \
        --setting lexical_weight=0.5,saturation=0.5,full=0.9 --setting context=1.0
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import memdir.retrieval.scale as scale
import quality_data as qd
from memdir import Memdir
from memdir.core.index import BM25_WEIGHTS
from memdir.core.safety import find_secrets, redact_secrets
from memdir.retrieval.search import fts_query, query_terms
from memdir.retrieval.semantic import LEXICAL_POOL, SEMANTIC_POOL
from quality import SCRATCH, half

SEMANTIC = 100  # cached nearest vectors (memdir uses 25)
COSINE_FLOOR = 0.1  # cached neighbours down to here (memdir's floor is 0.2)
COLUMNS = ("name", "description", "body", "tags", "paths", "context", "dates")
K = 10


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints (FTS5's averages and docsize records), in order."""
    out, value, n = [], 0, 0
    for byte in blob:
        if n == 8:
            out.append((value << 8) | byte)
            value, n = 0, 0
            continue
        value = (value << 7) | (byte & 0x7F)
        n += 1
        if not byte & 0x80:
            out.append(value)
            value, n = 0, 0
    return out


def _tokens(conn: Any, phrase: str) -> list[str]:
    """The FTS5 tokens of a query phrase under memdir's tokenizer (a scratch table's vocab)."""
    conn.execute("DELETE FROM temp.tok")
    conn.execute("INSERT INTO temp.tok (rowid, t) VALUES (1, ?)", (phrase,))
    return [r[0] for r in conn.execute(
        "SELECT term FROM temp.tok_vocab WHERE doc = 1 ORDER BY offset")]


def _frequencies(conn: Any, phrase: str) -> dict[int, list[int]]:
    """rowid -> the phrase's count in each column (consecutive tokens, as FTS5 matches it)."""
    tokens = _tokens(conn, phrase)
    if not tokens:
        return {}
    where: list[set[tuple[int, int, int]]] = []
    for token in tokens:
        where.append({(doc, COLUMNS.index(col), off) for doc, col, off in conn.execute(
            "SELECT doc, col, offset FROM temp.vi WHERE term = ?", (token,))})
    out: dict[int, list[int]] = {}
    for doc, col, off in where[0]:
        if all((doc, col, off + i) in where[i] for i in range(1, len(tokens))):
            out.setdefault(doc, [0] * len(COLUMNS))[col] += 1
    return out


def _signals(conn: Any, query: str, names: list[int],
             matrix: Any, embedder: Any) -> dict[str, Any]:
    """A query's words (forms and their row counts), every matching row's per-column counts,
    and the cosines of those rows and of the nearest SEMANTIC vectors."""
    import numpy as np

    terms = query_terms(query)
    phrases = list(dict.fromkeys(f for forms in terms for f in forms))
    matches: dict[int, dict[int, list[int]]] = {}
    counts = []
    for n, phrase in enumerate(phrases):
        counts.append(conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts "
                                   "MATCH ?", (f'"{phrase}"',)).fetchone()[0])
        for rowid, tf in _frequencies(conn, phrase).items():
            matches.setdefault(rowid, {})[n] = tf
    cos = np.einsum("ij,j->i", matrix, embedder.embed([query])[0])
    order = [i for i in np.argsort(-cos, kind="stable")[:SEMANTIC] if cos[i] >= COSINE_FLOOR]
    wanted = set(matches) | {names[i] for i in order}
    cosine = {str(names[i]): round(float(cos[i]), 5) for i in range(len(names))
              if names[i] in wanted}
    return {"phrases": phrases, "n": counts,
            "terms": [[phrases.index(f) for f in forms] for forms in terms],
            "matches": {str(r): {str(p): tf for p, tf in m.items()} for r, m in matches.items()},
            "nearest": [names[i] for i in order], "cosine": cosine,
            "check": {str(r): -float(v) for r, v in conn.execute(
                f"SELECT rowid, bm25(memories_fts, {', '.join(map(str, BM25_WEIGHTS))}) "
                "FROM memories_fts WHERE memories_fts MATCH ?", (fts_query(query),))}
            if fts_query(query) else {}}


def collect(out: Path, datasets: Sequence[str], context: bool, dates: bool) -> None:
    """Build each set's stores as bench/quality.py does (with ``context``: each REALTALK turn
    stored with the turn before it as search context; ``dates``: its day as its date) and
    cache every query's signals."""
    import numpy as np

    from memdir.retrieval.embed import stack_blobs

    cache: dict[str, Any] = {"format": 2, "columns": COLUMNS, "weights": BM25_WEIGHTS,
                             "context": context, "dates": dates, "stores": [], "queries": []}
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
                        item: dict[str, Any] = {"content": text, "type": "episode",
                                                "meta": {"unit": unit.id}}
                        if context and unit.before:
                            item["context"] = redact_secrets(unit.before)
                        if dates and unit.date:
                            item["date"] = unit.date
                        items.append(item)
                    aliases: dict[str, list[str]] = defaultdict(list)
                    for unit, memory in zip(corpus.units, md.store_many(items), strict=True):
                        aliases[str(memory.meta.get("unit"))].append(unit.id)
                    md.embed_memories()
                    conn = md.index.conn
                    conn.execute("CREATE VIRTUAL TABLE temp.vi USING "
                                 "fts5vocab(main, memories_fts, instance)")
                    conn.execute("CREATE VIRTUAL TABLE temp.tok USING fts5(t, tokenize="
                                 "'porter unicode61 remove_diacritics 2')")
                    conn.execute("CREATE VIRTUAL TABLE temp.tok_vocab USING "
                                 "fts5vocab(temp, tok, instance)")
                    rowids, units, files = {}, {}, {}
                    for rowid, d, f, meta in conn.execute(
                            "SELECT rowid, dir, file, meta FROM memories"):
                        rowids[(d, f)] = rowid
                        units[rowid] = str(json.loads(meta).get("unit"))
                        files[rowid] = f
                    averages = _varints(bytes(conn.execute(
                        "SELECT block FROM memories_fts_data WHERE id = 1").fetchone()[0]))
                    length = {r: sum(_varints(bytes(sz))) for r, sz in conn.execute(
                        "SELECT id, sz FROM memories_fts_docsize")}
                    ordered = sorted(files, key=lambda r: files[r])
                    store = {"dataset": dataset, "name": corpus.name, "N": averages[0],
                             "avgdl": sum(averages[1:]) / averages[0],
                             "units": {str(r): units[r] for r in ordered},
                             "length": {str(r): length[r] for r in ordered},
                             "position": {str(r): n for n, r in enumerate(ordered)},
                             "aliases": {u: aliases[u] for u in units.values()}}
                    emb = conn.execute("SELECT dir, file, vector FROM embeddings").fetchall()
                    assert md.embedder is not None
                    names = [rowids[(d, f)] for d, f, _ in emb]
                    matrix = np.asarray(stack_blobs([v for _, _, v in emb], md.embedder.dim),
                                        dtype=np.float32)
                    for query in corpus.queries:
                        entry = _signals(conn, qd.prepare(query.text, "memdir"), names, matrix,
                                         md.embedder)
                        entry.update(id=query.id, dataset=dataset, half=half(query),
                                     relevant=list(query.relevant),
                                     store=len(cache["stores"]))
                        cache["queries"].append(entry)
                    cache["stores"].append(store)
            print(f"[fusion_cache] {dataset} {corpus.name}: {len(corpus.queries)} queries, "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        json.dump(cache, fh)


# -- replaying fusions -------------------------------------------------------------------

HEADLINE = {"realtalk": ("recall@10", 10), "madial": ("recall@5", 5)}
K1, B = 1.2, 0.75  # FTS5's bm25() constants


@dataclass(frozen=True)
class Setting:
    """One fusion to replay: memdir's constants (the defaults: what the code holds now)."""

    lexical_weight: float = scale.LEXICAL_WEIGHT
    saturation: float = scale.LEXICAL_SATURATION
    floor: float = scale.SIMILARITY_FLOOR
    full: float = scale.COSINE_FULL
    lexical_pool: int = LEXICAL_POOL
    semantic_pool: int = SEMANTIC_POOL
    context: float = BM25_WEIGHTS[5]  # BM25 column weights of the search context, the dates
    dates: float = BM25_WEIGHTS[6]
    words_only: bool = False
    zscore: bool = False  # the z-score fusion the scale replaced (memdir before d3bc255)

    def label(self) -> str:
        if self.zscore:
            return "z-score fusion (before the scale)"
        plain = Setting(words_only=self.words_only)
        changed = [f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                   if f.name != "words_only" and getattr(self, f.name) != getattr(plain, f.name)]
        return ("words only" if self.words_only else "default") + (
            f" ({', '.join(changed)})" if changed else " (memdir now)")


class Replay:
    """memdir's search over a cached set: BM25 from the per-column counts (exactly FTS5's
    bm25(), checked against it), the two pools, the score scale; strength is equal for all
    memories of a set, so it changes no order and is left out."""

    def __init__(self, cache: dict[str, Any]) -> None:
        self.cache, self.stores, self.queries = cache, cache["stores"], cache["queries"]
        self._bm25: dict[tuple[int, tuple[float, ...]], dict[str, float]] = {}
        self._order: dict[tuple[int, tuple[float, ...], str], list[str]] = {}

    def bm25(self, n: int, weights: tuple[float, ...]) -> dict[str, float]:
        key = (n, weights)
        if key not in self._bm25:
            q = self.queries[n]
            store = self.stores[q["store"]]
            rows, avgdl, length = store["N"], store["avgdl"], store["length"]
            idf = [scale.idf(rows, count) for count in q["n"]]
            out = {}
            for rowid, phrases in q["matches"].items():
                norm = K1 * (1 - B + B * length[rowid] / avgdl)
                total = 0.0
                for p, tf in phrases.items():
                    f = sum(w * t for w, t in zip(weights, tf, strict=True))
                    total += idf[int(p)] * f * (K1 + 1) / (f + norm)
                out[rowid] = total
            self._bm25[key] = out
        return self._bm25[key]

    def check(self) -> float:
        """The largest difference between the replayed BM25 and FTS5's at the cached weights."""
        weights = tuple(self.cache["weights"])
        return max((abs(self.bm25(n, weights)[r] - v) for n, q in enumerate(self.queries)
                    for r, v in q["check"].items()), default=0.0)

    def ranked(self, n: int, s: Setting) -> list[str]:
        """Unit ids, best first (exact duplicates answer for all their units)."""
        q = self.queries[n]
        store = self.stores[q["store"]]
        position = store["position"]
        weights = (*BM25_WEIGHTS[:5], s.context, s.dates)
        bm25 = self.bm25(n, weights)
        ideal = scale.ideal_bm25(store["N"], [[q["n"][p] for p in t] for t in q["terms"]])

        def lexical(rowid: str) -> float:
            value = bm25.get(rowid, 0.0)
            if value <= 0 or ideal <= 0:
                return 0.0
            return floored(-math.expm1(-s.saturation * value / ideal))

        if (n, weights, "order") not in self._order:
            self._order[(n, weights, "order")] = sorted(
                bm25, key=lambda r: (-bm25[r], position[r]))
        by_words = self._order[(n, weights, "order")]
        if s.words_only:
            keys = by_words[:K]
        else:
            near = [str(r) for r in q["nearest"] if q["cosine"][str(r)] >= s.floor]
            cands = dict.fromkeys([*by_words[:max(s.lexical_pool, K)],
                                   *near[:s.semantic_pool]])
            if s.zscore:
                pool = set(by_words[:s.lexical_pool])
                keys = _zfuse([store["units"][r] for r in cands],
                              {store["units"][r]: bm25[r] for r in cands if r in pool},
                              {store["units"][r]: q["cosine"][r] for r in cands})[:K]
                found = [u for key in keys for u in store["aliases"][key]]
                return list(dict.fromkeys(found))
            span = s.full - s.floor
            matched = {}
            for r in cands:
                sem = min(max((q["cosine"][r] - s.floor) / span, 0.0), 1.0)
                m = floored(s.lexical_weight * lexical(r) + (1 - s.lexical_weight) * sem)
                if m > 0:
                    matched[r] = m
            keys = sorted(matched, key=lambda r: (-matched[r], position[r]))[:K]
        found = [u for r in keys for u in store["aliases"][store["units"][r]]]
        return list(dict.fromkeys(found))

    def recalls(self, s: Setting) -> list[float]:
        """Per query, the set's headline recall (R@10 REALTALK, R@5 MADial)."""
        out = []
        for n, q in enumerate(self.queries):
            _, k = HEADLINE[q["dataset"]]
            rel = set(q["relevant"])
            out.append(len(rel.intersection(self.ranked(n, s)[:k])) / len(rel))
        return out


def _zscores(values: list[float], min_spread: float) -> list[float]:
    mean = math.fsum(values) / len(values)
    sd = max(math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values)), min_spread)
    if sd <= 1e-12 * max(1.0, abs(mean)):
        return [0.0] * len(values)
    return [(v - mean) / sd for v in values]


def _zfuse(keys: list[str], lexical: dict[str, float], semantic: dict[str, float]) -> list[str]:
    """The z-score fusion memdir shipped before the score scale: 0.4 × z(BM25 of the BM25
    pool, 0 elsewhere) + 0.6 × z(cosine) over the candidates (spreads floored at 10% of the
    best BM25 and 0.05), ties by unit id."""
    if not keys:
        return []
    bm25 = [lexical.get(k, 0.0) for k in keys]
    words = _zscores(bm25, 0.1 * max(abs(v) for v in bm25))
    meaning = _zscores([semantic[k] for k in keys], 0.05)
    mixed = {k: 0.4 * w + 0.6 * m for k, w, m in zip(keys, words, meaning, strict=True)}
    return sorted(mixed, key=lambda k: (-mixed[k], k))


def floored(evidence: float) -> float:
    return (scale.MIN_MATCH + (1 - scale.MIN_MATCH) * min(evidence, 1.0)) if evidence > 0 else 0.0


def summary(replay: Replay, values: list[float]) -> dict[str, dict[str, float]]:
    """Per set: the mean headline recall over all queries and over each half."""
    out: dict[str, dict[str, float]] = {}
    for dataset in HEADLINE:
        for part in ("all", "A", "B"):
            got = [v for v, q in zip(values, replay.queries, strict=True)
                   if q["dataset"] == dataset and part in ("all", q["half"])]
            out.setdefault(dataset, {})[part] = sum(got) / len(got) if got else math.nan
    return out


def paired(replay: Replay, got: list[float], ref: list[float], dataset: str,
           part: str = "all") -> tuple[float, float]:
    """Mean per-query difference and its 95% half-width (normal), as bench/quality.py."""
    diffs = [a - b for a, b, q in zip(got, ref, replay.queries, strict=True)
             if q["dataset"] == dataset and part in ("all", q["half"])]
    if len(diffs) < 2:
        return math.nan, math.nan
    return statistics.fmean(diffs), 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs))


def report(replay: Replay, settings: Sequence[Setting]) -> str:
    """The recall table (both halves) with the paired difference from the first setting."""
    lines = ["| fusion | REALTALK R@10 | A | B | Δ | MADial R@5 | A | B | Δ |",
             "|---" * 9 + "|"]
    ref = replay.recalls(settings[0])
    for s in settings:
        got = replay.recalls(s)
        h = summary(replay, got)
        cells = []
        for d in HEADLINE:
            cells += [f"{h[d][part]:.3f}" for part in ("all", "A", "B")]
            cells.append("{:+.3f} ± {:.3f}".format(*paired(replay, got, ref, d)))
        lines.append(f"| {s.label()} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def search(replay: Replay, start: Setting, grids: dict[str, Sequence[Any]],
           rounds: int = 2) -> list[tuple[float, Setting]]:
    """Coordinate search on half A: each constant in turn over its grid, the others held,
    keeping the best sum of both sets' half-A headlines; repeated ``rounds`` times."""
    def objective(s: Setting) -> float:
        h = summary(replay, replay.recalls(s))
        return h["realtalk"]["A"] + h["madial"]["A"]

    best, best_value = start, objective(start)
    seen = {start: best_value}
    for _ in range(rounds):
        for name, values in grids.items():
            for value in values:
                s = replace(best, **{name: value})
                if s not in seen:
                    seen[s] = objective(s)
                if seen[s] > best_value + 1e-9:
                    best, best_value = s, seen[s]
            print(f"[search] {name}: {best.label()} A sum {best_value:.4f}", file=sys.stderr,
                  flush=True)
    return sorted(((v, s) for s, v in seen.items()), key=lambda t: -t[0])


GRIDS: dict[str, Sequence[Any]] = {
    "context": (0.25, 0.5, 1.0, 2.0, 4.0, 8.0), "dates": (0.0, 0.25, 0.5, 1.0),
    "lexical_weight": (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6),
    "saturation": (0.5, 0.75, 1.0, 1.25, 1.5), "full": (0.6, 0.7, 0.8, 0.9, 1.0),
    "floor": (0.1, 0.15, 0.2, 0.25, 0.3),
    "lexical_pool": (10, 15, 25, 40, 50), "semantic_pool": (10, 15, 25, 40, 60, 100)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--datasets", default="realtalk,madial")
    c.add_argument("--signals", default="context+dates",
                   help="what the stores keep besides the text: context+dates, context, "
                        "dates or none")
    e = sub.add_parser("evaluate")
    e.add_argument("--cache", type=Path, required=True)
    e.add_argument("--search", "--grid", action="store_true",
                   help="also search the constants on half A (coordinate search over GRIDS)")
    e.add_argument("--setting", action="append", default=[],
                   help="a further row, e.g. 'lexical_weight=0.4,context=1.0'")
    args = parser.parse_args(argv)
    if args.command == "collect":
        collect(args.out, args.datasets.split(","), "context" in args.signals,
                "dates" in args.signals)
        return 0
    with gzip.open(args.cache, "rt", encoding="utf-8") as fh:
        replay = Replay(json.load(fh))
    print(f"BM25 replay vs FTS5: largest difference {replay.check():.2e}", file=sys.stderr)
    rows = [Setting(), Setting(words_only=True), Setting(zscore=True)]
    for spec in args.setting:
        changes: dict[str, Any] = {}
        for part in spec.split(","):
            name, _, value = part.partition("=")
            changes[name] = (value == "1") if name in ("words_only", "zscore") else (
                int(value) if "pool" in name else float(value))
        rows.append(Setting(**changes))
    if args.search:
        found = search(replay, Setting(), GRIDS)
        rows.append(found[0][1])
        print("\n".join(f"A sum {v:.4f}: {s.label()}" for v, s in found[:10]))
    print(report(replay, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
