"""How soon ``memdir mcp`` answers an agent: milliseconds from process start to the answers
to ``initialize`` and ``tools/list`` (Codex waits 1,000 ms for an optional server before its
first model request; the target is 150 ms), beside the same for the SDK server started
directly (what ``memdir mcp`` ran before its handshake front) and a bare ``python -c pass``.
Runs alternate, so a slow moment of the machine falls on all three alike.

Usage::

    python bench/mcp_start.py             # 15 runs each
    python bench/mcp_start.py --runs 30
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
from collections.abc import Sequence
from pathlib import Path

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "0"}}}
LIST = [{"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
COMMANDS = {
    "memdir mcp": [sys.executable, "-m", "memdir", "mcp"],
    "SDK server alone": [sys.executable, "-c",
                         "from memdir.agents.mcp_server import main; main()"],
}


def _one(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(INIT).encode() + b"\n")
    proc.stdin.flush()
    proc.stdout.readline()
    init = time.perf_counter() - started
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in LIST))
    proc.stdin.flush()
    proc.stdout.readline()
    listed = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(timeout=30)
    proc.stdout.close()
    return init * 1000, listed * 1000


def _bare() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return (time.perf_counter() - started) * 1000


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=15)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MEMDIR_HOME": str(Path(tmp) / "home"), "MEMDIR_SEMANTIC": "0"}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
        bare = []
        for _ in range(args.runs):
            for name, command in COMMANDS.items():
                times[name].append(_one(command, env, Path(tmp)))
            bare.append(_bare())
    print("| server | initialize p50 (ms) | tools/list p50 (ms) | max initialize (ms) |")
    print("|---|---|---|---|")
    for name, found in times.items():
        inits, lists = [t[0] for t in found], [t[1] for t in found]
        print(f"| {name} | {statistics.median(inits):.0f} | {statistics.median(lists):.0f} | "
              f"{max(inits):.0f} |")
    print(f"| bare `python -c pass` | {statistics.median(bare):.0f} | | |")
    best = statistics.median(t[1] for t in times["memdir mcp"])
    print(f"\nmemdir mcp: tools/list answered {best:.0f} ms after start (target ≤ 150 ms: "
          f"{'PASS' if best <= 150 else 'FAIL'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
