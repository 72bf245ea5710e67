"""Consolidating 10k memories: planning and applying, wall time.

A fresh temporary MEMDIR home and project get ``--size`` memories from core.py's ``Corpus``
(``store_many``), plus ``--dups`` planted near-duplicates (a memory's text with a few words
appended) so the plan has real merges to find. Then ``consolidate(dry_run=True)`` (the plan)
and ``consolidate(dry_run=False)`` (plan and apply) are timed, with the clock 200 days on so
weak memories are archived too. Target: under 30 s at 10k.

Usage::

    python bench/consolidate.py [--size 10000] [--dups 200]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

from memdir import Memdir
from memdir.core.model import now

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import Corpus

TARGET_S = 30.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--dups", type=int, default=200)
    opts = parser.parse_args(argv)
    items = Corpus(9).memories(opts.size)
    dups = [{**item, "content": item["content"] + " (noted again later)"}
            for item in items[: opts.dups]]
    later = now() + timedelta(days=200)
    with tempfile.TemporaryDirectory(prefix="memdir-bench-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        project.mkdir()
        with Memdir(home=home, project=project, semantic=False) as md:
            for start in range(0, len(items), 5000):
                md.store_many(items[start:start + 5000])
            md.store_many(dups)

        def clock() -> datetime:
            return later

        with Memdir(home=home, project=project, semantic=False, clock=clock) as md:
            started = time.perf_counter()
            planned = md.consolidate(dry_run=True)
            plan_s = time.perf_counter() - started
            started = time.perf_counter()
            applied = md.consolidate(dry_run=False)
            apply_s = time.perf_counter() - started
    ops = Counter(op.op for op in applied.operations)
    print(f"{opts.size + opts.dups:,} memories ({opts.dups} planted near-duplicates)\n")
    print("| step | seconds | operations |\n|---|---|---|")
    print(f"| plan (dry run) | {plan_s:.1f} | {len(planned.operations):,} |")
    print(f"| plan and apply | {apply_s:.1f} | "
          + ", ".join(f"{n:,} {kind}" for kind, n in sorted(ops.items())) + " |")
    print(f"\nconsolidate at {opts.size:,} <= {TARGET_S:.0f} s: {apply_s:.1f} s "
          f"{'PASS' if apply_s <= TARGET_S else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
