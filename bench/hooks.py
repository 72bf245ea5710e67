"""Hook start-up: wall time of ``memdir hook session-start`` and ``memdir hook prompt`` as
processes, the way Claude Code runs them (a new process per event, the event's JSON on
stdin), at 1k and 10k memories.

Each size gets a fresh temporary MEMDIR home and project, loaded with ``store_many`` from
core.py's ``Corpus``. The median of ``--runs`` processes per event after one untimed
warm-up; every prompt uses a fresh session id, so recall never runs out of memories to show.
``PYTHONDONTWRITEBYTECODE`` is dropped for the children, as on a user's machine, and
``MEMDIR_DAEMON=0`` keeps the prompt hook from starting the warm daemon: what is timed is
the hook on its own.

Targets at 10k: session-start median <= 120 ms, prompt <= 150 ms.

Usage::

    python bench/hooks.py [--sizes 1000,10000] [--runs 15] [--json PATH]
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
from pathlib import Path

from memdir import Memdir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import Corpus

TARGETS = {"session-start": 120.0, "prompt": 150.0}


def _hook(event: str, payload: dict[str, object], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "memdir", "hook", event],
                            input=json.dumps(payload), capture_output=True, text=True,
                            env=env, cwd=cwd, timeout=60)
    elapsed = (time.perf_counter() - started) * 1000
    if result.returncode != 0 or (event == "session-start" and not result.stdout):
        raise SystemExit(f"hook {event} misbehaved: {result.returncode} {result.stderr}")
    return elapsed


def bench(size: int, runs: int) -> dict[str, float]:
    corpus = Corpus(11)
    items = corpus.memories(size)
    prompts = corpus.queries(runs + 1)
    with tempfile.TemporaryDirectory(prefix="memdir-bench-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        project.mkdir()
        with Memdir(home=home, project=project, semantic=False) as md:  # hooks search words
            for start in range(0, size, 5000):
                md.store_many(items[start:start + 5000])
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        # The hook on its own (FTS in its process): no warm daemon started for later prompts.
        env.update(MEMDIR_HOME=str(home), MEMDIR_DAEMON="0")
        out: dict[str, float] = {}
        base = {"cwd": str(project), "transcript_path": "", "hook_event_name": ""}
        start_payload = {**base, "session_id": "bench", "source": "startup"}
        _hook("session-start", start_payload, env, project)
        out["session-start"] = statistics.median(
            _hook("session-start", start_payload, env, project) for _ in range(runs))
        times = []
        for n, text in enumerate(prompts):
            payload = {**base, "session_id": f"bench-{n}", "prompt": f"how does {text} work"}
            elapsed = _hook("prompt", payload, env, project)
            if n:  # the first one warms the caches
                times.append(elapsed)
        out["prompt"] = statistics.median(times)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args(argv)
    sizes = [int(s) for s in opts.sizes.split(",")]
    results = {size: bench(size, opts.runs) for size in sizes}
    print("| hook process (median ms) | " + " | ".join(f"{s:,}" for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for event in TARGETS:
        print(f"| memdir hook {event} | "
              + " | ".join(f"{results[s][event]:.0f}" for s in sizes) + " |")
    print("\n| target | measured | result |\n|---|---|---|")
    top = max(sizes)
    for event, limit in TARGETS.items():
        value = results[top][event]
        print(f"| {event} at {top:,} <= {limit:.0f} ms | {value:.0f} ms | "
              f"{'PASS' if value <= limit else 'FAIL'} |")
    if opts.json:
        opts.json.write_text(json.dumps({str(s): r for s, r in results.items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
