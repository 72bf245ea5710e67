"""Indexing and extracting a large transcript: time and memory.

Generates a Claude Code session file of about ``--mb`` megabytes (default 5): user prompts
with a preference or a correction now and then, assistant answers, tool calls and long tool
output, as a real session has. Then, in a fresh temporary MEMDIR home, measures:

1. parse: ``parse_transcript`` of the file;
2. index-session: ``Memdir.index_session`` (chunks + FTS5), the parse included;
3. extract: ``Memdir.extract(..., llm=False)`` (rule extraction over every user message,
   writing what it finds), the parse included;
and the peak of memory allocated by Python during each step (``tracemalloc``), next to the
file size: "bounded" means a small multiple of the file, not of the store.

Target: index-session + extract of a 5 MB transcript under 5 s.

Usage::

    python bench/transcript.py [--mb 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memdir import Memdir
from memdir.capture.transcript import parse_transcript

SESSION = "bench-5c1d2e3f"
PROMPTS = [
    "The payments test fails on the due date again, can you look?",
    "I prefer pnpm over npm for everything in this repo.",
    "Actually, the staging database is Postgres 16, not 15.",
    "We must never push directly to main.",
    "Run the linter and fix what it reports.",
    "Why does the webhook retry three times?",
    "Always use UTC in log timestamps.",
    "Let's add a test for the refund path.",
]


def _line(kind: str, n: int, message: dict[str, Any]) -> str:
    return json.dumps({"type": kind, "uuid": f"u-{n}", "parentUuid": f"u-{n - 1}",
                       "sessionId": SESSION, "cwd": "/home/dev/payments",
                       "timestamp": f"2026-11-20T09:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
                       "isSidechain": False, "message": message})


def generate(path: Path, megabytes: float, seed: int = 7) -> int:
    rng = random.Random(seed)
    target = int(megabytes * 1024 * 1024)
    written = n = 0
    with path.open("w", encoding="utf-8") as fh:
        while written < target:
            n += 1
            prompt = rng.choice(PROMPTS) + f" (turn {n})"
            lines = [_line("user", n * 4, {"role": "user", "content": prompt})]
            lines.append(_line("assistant", n * 4 + 1, {"role": "assistant", "content": [
                {"type": "text", "text": "Looking at it. " + "The handler validates input. " * 8},
                {"type": "tool_use", "id": f"t{n}", "name": "Bash",
                 "input": {"command": f"pytest tests/test_payments.py -k case{n}"}}]}))
            output = "\n".join(f"tests/test_payments.py::case{n}_{i} PASSED" for i in range(40))
            lines.append(_line("user", n * 4 + 2, {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{n}", "content": output}]}))
            lines.append(_line("assistant", n * 4 + 3, {"role": "assistant", "content": [
                {"type": "text", "text": "All green now; the fix was in the date parsing."}]}))
            chunk = "\n".join(lines) + "\n"
            fh.write(chunk)
            written += len(chunk.encode("utf-8"))
    return written


def _measure(step: Callable[[], Any]) -> tuple[float, float, Any]:
    tracemalloc.start()
    started = time.perf_counter()
    result = step()
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] / 1024 / 1024
    tracemalloc.stop()
    return seconds, peak, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=5.0)
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memdir-bench-") as tmp:
        root = Path(tmp)
        transcript = root / "session.jsonl"
        size = generate(transcript, opts.mb) / 1024 / 1024
        (root / "project").mkdir()
        with Memdir(home=root / "home", project=root / "project") as md:
            md.reconcile()
            parse_s, parse_mb, parsed = _measure(lambda: parse_transcript(transcript))
            index_s, index_mb, indexed = _measure(lambda: md.index_session(transcript))
            extract_s, extract_mb, report = _measure(
                lambda: md.extract(transcript, llm=False, session_id=SESSION))
    rows = [("parse", parse_s, parse_mb, f"{len(parsed.messages):,} messages"),
            ("index-session", index_s, index_mb, f"{indexed.chunks:,} chunks"),
            ("extract (rules)", extract_s, extract_mb,
             f"{len(report.stored)} stored, {len(report.reinforced)} reinforced")]
    print(f"transcript: {size:.1f} MB, {len(parsed.messages):,} messages\n")
    print("| step | seconds | peak Python memory (MB) | result |\n|---|---|---|---|")
    for name, seconds, peak, what in rows:
        print(f"| {name} | {seconds:.2f} | {peak:.1f} | {what} |")
    total = index_s + extract_s
    verdict = "PASS" if total <= 5.0 else "FAIL"
    print(f"\nindex-session + extract: {total:.2f} s (target <= 5 s): {verdict}")
    if opts.json:
        opts.json.write_text(json.dumps({"mb": size, "steps": [
            {"step": n, "seconds": s, "peak_mb": p, "result": w} for n, s, p, w in rows],
            "total_s": total}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
