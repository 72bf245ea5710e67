"""A/B of two source trees on the processes an agent pays for: ``memdir hook session-start``,
``memdir hook prompt``, ``memdir context`` and ``memdir search`` at one store size.

Each tree gets its own temporary home and project, loaded with the same ``Corpus`` (core.py)
by that tree's own code; then the processes of both trees run interleaved (old, new, old,
new...), so a busy machine slows both alike. With ``--instructions`` each process also runs
once under callgrind: the instruction count does not move with the machine's load.

Usage (the old tree from a git ref, e.g.)::

    git worktree add --detach /tmp/memdir-old REF
    python bench/ab_processes.py --old /tmp/memdir-old/src --new src [--size 10000]
        [--runs 15] [--instructions]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import Corpus
from instructions import count_instructions

KINDS = ("session-start", "prompt", "context", "search")


def _env(src: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(src), MEMDIR_HOME=str(home), MEMDIR_DAEMON="0",
               MEMDIR_SEMANTIC="0")
    return env


def _load(src: Path, home: Path, project: Path, size: int) -> None:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from core import Corpus; "
            "from memdir import Memdir; from pathlib import Path; "
            "items = Corpus(11).memories(int(sys.argv[2])); "
            "md = Memdir(home=Path(sys.argv[3]), project=Path(sys.argv[4]), semantic=False); "
            "[md.store_many(items[i:i + 5000]) for i in range(0, len(items), 5000)]; "
            "md.close()")
    subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parent),
                    str(size), str(home), str(project)], env=_env(src, home), check=True)


def _command(kind: str, project: Path, prompt: str) -> tuple[list[str], str | None]:
    base = {"cwd": str(project), "transcript_path": "", "hook_event_name": ""}
    memdir = [sys.executable, "-m", "memdir"]
    if kind == "session-start":
        return [*memdir, "hook", "session-start"], json.dumps(
            {**base, "session_id": "bench", "source": "startup"})
    if kind == "prompt":
        return [*memdir, "hook", "prompt"], json.dumps(
            {**base, "session_id": f"bench-{prompt}", "prompt": f"how does {prompt} work"})
    if kind == "context":
        return [*memdir, "context"], None
    return [*memdir, "search", prompt], None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="the old tree's src folder")
    parser.add_argument("--new", type=Path, required=True, help="the new tree's src folder")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--instructions", action="store_true")
    opts = parser.parse_args(argv)
    trees = {"old": opts.old.resolve(), "new": opts.new.resolve()}
    corpus = Corpus(11)
    corpus.memories(opts.size)
    prompts = corpus.queries(opts.runs + 1)
    with tempfile.TemporaryDirectory(prefix="memdir-ab-") as tmp:
        places = {}
        for name, src in trees.items():
            home, project = Path(tmp) / name / "home", Path(tmp) / name / "project"
            project.mkdir(parents=True)
            _load(src, home, project, opts.size)
            places[name] = (src, home, project)
        rows = []
        for kind in KINDS:
            times: dict[str, list[float]] = {name: [] for name in trees}
            for n in range(opts.runs + 1):
                for name, (src, home, project) in places.items():
                    command, stdin = _command(kind, project, prompts[n])
                    started = time.perf_counter()
                    done = subprocess.run(command, input=stdin, capture_output=True, text=True,
                                          env=_env(src, home), cwd=project, timeout=120)
                    if done.returncode != 0:
                        raise SystemExit(f"{name} {kind} failed: {done.stderr}")
                    if n:  # the first run of each warms the caches
                        times[name].append((time.perf_counter() - started) * 1000)
            row = [kind, *(f"{statistics.median(times[name]):.0f}" for name in trees)]
            if opts.instructions:
                counts = []
                for src, home, project in places.values():
                    command, stdin = _command(kind, project, prompts[0])
                    if stdin is None:
                        counts.append(count_instructions(command, env=_env(src, home),
                                                         cwd=project))
                    else:  # the hooks read their event on stdin
                        counts.append(_count_with_stdin(command, stdin, _env(src, home), project))
                row += [f"{c:.0f}" if c is not None else "-" for c in counts]
            rows.append(row)
    head = ["process", "old ms", "new ms"] + (["old M instr", "new M instr"]
                                              if opts.instructions else [])
    print(f"| {' | '.join(head)} |\n|{'---|' * len(head)}")
    for row in rows:
        print(f"| {' | '.join(row)} |")
    return 0


def _count_with_stdin(command: list[str], stdin: str, env: dict[str, str],
                      cwd: Path) -> float | None:
    import re
    import shutil

    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    subprocess.run(command, input=stdin, env=env, cwd=cwd, capture_output=True, text=True)
    done = subprocess.run([valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           *command], input=stdin, env=env, cwd=cwd, capture_output=True,
                          text=True)
    found = re.search(r"Collected\s*:\s*([0-9]+)", done.stderr)
    return None if found is None else int(found.group(1)) / 1e6


if __name__ == "__main__":
    sys.exit(main())
