"""Hooks on a large transcript: wall time and peak memory of the hook processes.

Generates a Claude Code session file of about ``--mb`` megabytes (default 250; the turns of
``bench/transcript.py``), then runs real hook processes against it, each in a fresh MEMDIR
home unless said otherwise, and measures each one's wall time and the peak resident memory
of its process tree (``ru_maxrss`` of the children of a parent that runs only that hook):

1. ``stop``, first time: nothing read yet for the session;
2. ``stop`` again after one more turn is appended (same home: reads on from the offset);
3. ``pre-compact``, first time;
4. ``session-end`` as the agent runs it (it detaches a child and returns);
5. the detached ``session-end`` child itself (``MEMDIR_HOOK_BACKGROUND=session-end``): the
   session index of the transcript's end, extraction and the dream gate.

Target: hook ``stop`` on a 250 MB transcript within 10 s and 150 MB peak resident memory.

Usage::

    python bench/hooks_transcript.py [--mb 250] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from transcript import SESSION, generate  # bench/ is not a package on the path

TARGET_S = 10.0
TARGET_MB = 150.0
# A parent that runs only the hook: its children's peak RSS is the hook's process tree.
_PARENT = ("import resource, subprocess, sys, time\n"
           "with open(sys.argv[1], 'rb') as fh:\n"
           "    started = time.perf_counter()\n"
           "    subprocess.run([sys.executable, '-m', 'memdir', 'hook', sys.argv[2]], stdin=fh,"
           " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
           "    seconds = time.perf_counter() - started\n"
           "print(seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


def _run(home: Path, project: Path, event: str, payload: Path,
         background: bool = False) -> tuple[float, float]:
    env = {**os.environ, "MEMDIR_HOME": str(home), "MEMDIR_DAEMON": "0"}
    if background:
        env["MEMDIR_HOOK_BACKGROUND"] = event
    out = subprocess.run([sys.executable, "-c", _PARENT, str(payload), event], cwd=project,
                         env=env, capture_output=True, text=True, check=True)
    seconds, kilobytes = out.stdout.split()
    return float(seconds), int(kilobytes) / 1024


def _append_turn(path: Path) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "user", "uuid": "u-last", "sessionId": SESSION,
                             "cwd": "/home/dev/payments", "timestamp": "2026-11-20T10:00:00Z",
                             "message": {"role": "user",
                                         "content": "Always run the linter before pushing."}})
                 + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=250.0)
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args(argv)
    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="memdir-bench-") as tmp:
        root = Path(tmp)
        transcript = root / "session.jsonl"
        started = time.perf_counter()
        size = generate(transcript, opts.mb) / 1024 / 1024
        print(f"transcript: {size:.0f} MB, generated in {time.perf_counter() - started:.0f} s",
              file=sys.stderr)
        project = root / "project"
        project.mkdir()
        payload = root / "payload.json"
        payload.write_text(json.dumps({"session_id": SESSION, "cwd": str(project),
                                       "transcript_path": str(transcript),
                                       "stop_hook_active": False}))

        def home(name: str) -> Path:
            return root / f"home-{name}"

        rows.append(("stop (first)", *_run(home("stop"), project, "stop", payload)))
        _append_turn(transcript)
        rows.append(("stop (one turn later)", *_run(home("stop"), project, "stop", payload)))
        rows.append(("pre-compact (first)", *_run(home("pc"), project, "pre-compact",
                                                  payload)))
        rows.append(("session-end (the hook)", *_run(home("end"), project, "session-end",
                                                     payload)))
        rows.append(("session-end (detached child)", *_run(
            home("child"), project, "session-end", payload, background=True)))
        time.sleep(1)  # let the hook's own detached child finish before the tree goes
    print(f"transcript: {size:.0f} MB\n")
    print("| hook | seconds | peak RSS (MB) |\n|---|---|---|")
    for name, seconds, peak in rows:
        print(f"| {name} | {seconds:.2f} | {peak:.0f} |")
    seconds, peak = rows[0][1], rows[0][2]
    verdict = "PASS" if seconds <= TARGET_S and peak <= TARGET_MB else "FAIL"
    print(f"\nstop on {size:.0f} MB: {seconds:.2f} s, {peak:.0f} MB (target <= {TARGET_S:.0f} s"
          f", <= {TARGET_MB:.0f} MB): {verdict}")
    if opts.json:
        result: dict[str, Any] = {"mb": size, "rows": [
            {"hook": n, "seconds": s, "peak_rss_mb": p} for n, s, p in rows], "pass": verdict}
        opts.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
