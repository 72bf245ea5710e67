"""Hook processes: wall time of ``memdir hook session-start`` and ``memdir hook prompt`` as
processes, the way Claude Code and Codex run them (a new process per event, the event's JSON
on stdin), at 1k and 10k memories, on their own and answered by the warm daemon.

Each size gets a fresh temporary MEMDIR home and project, loaded with ``store_many`` from
core.py's ``Corpus``, with every vector filled when the ``embed`` extra is installed (the
daemon then recalls by words and meaning, as on a user's machine). The median of ``--runs``
processes per event after one untimed warm-up, each beside a bare ``python -c pass`` (the
interpreter's own start, which no hook can avoid; the rows subtract it); every prompt uses a
fresh session id, so recall never runs out of memories to show. ``PYTHONDONTWRITEBYTECODE``
is dropped for the children, as on a user's machine.

- "alone": ``MEMDIR_DAEMON=0`` and no daemon running: the hook computes in its own process.
- "warm daemon": ``memdir daemon`` running for the home (started by the first hook of a
  session on a user's machine): the hook forwards the event and prints the answer.
- "HTTP": Claude Code's HTTP hook (``hooks install --http``): the prompt event POSTed to the
  daemon on 127.0.0.1 as Claude Code sends it, one connection per call; no process at all.

Targets at 10k, minus bare python: with the warm daemon session-start <= 45 ms and prompt
<= 30 ms; alone, session-start <= 120 ms and prompt <= 150 ms; the HTTP prompt hook's round
trip p50 <= 10 ms.

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

ALONE = {"session-start": 120.0, "prompt": 150.0}  # ms, wall time
WARM = {"session-start": 45.0, "prompt": 30.0}  # ms, minus bare python
HTTP = 10.0  # ms, the prompt hook's round trip


def _http_prompts(port: int, token: str, project: Path, prompts: list[str]) -> list[float]:
    """The prompt event POSTed as Claude Code's HTTP hook does: wall time of each call."""
    import http.client

    times = []
    for n, text in enumerate(prompts):
        body = json.dumps({"session_id": f"http-{n}", "cwd": str(project), "transcript_path":
                           "", "hook_event_name": "UserPromptSubmit",
                           "prompt": f"how does {text} work"})
        started = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("POST", "/memdir/hooks/prompt", body=body, headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        response = conn.getresponse()
        answer = response.read()
        conn.close()
        if response.status != 200 or not answer:
            raise SystemExit(f"the HTTP hook misbehaved: {response.status} {answer[:200]!r}")
        if n:  # the first one warms the caches
            times.append((time.perf_counter() - started) * 1000)
    return times


def _run(args: list[str], env: dict[str, str], cwd: Path, stdin: str = "") -> tuple[
        float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    result = subprocess.run(args, input=stdin, capture_output=True, text=True, env=env,
                            cwd=cwd, timeout=60)
    return (time.perf_counter() - started) * 1000, result


def _hook(event: str, payload: dict[str, object], env: dict[str, str], cwd: Path) -> float:
    elapsed, result = _run([sys.executable, "-m", "memdir", "hook", event], env, cwd,
                           json.dumps(payload))
    if result.returncode != 0 or (event == "session-start" and not result.stdout):
        raise SystemExit(f"hook {event} misbehaved: {result.returncode} {result.stderr}")
    return elapsed


def _round(events: dict[str, list[float]], bare: list[float], env: dict[str, str],
           project: Path, prompts: list[str], tag: str) -> None:
    """One untimed warm-up, then each event's runs, each beside a bare interpreter start."""
    base = {"cwd": str(project), "transcript_path": "", "hook_event_name": ""}
    for n, text in enumerate(prompts):
        start: dict[str, object] = {**base, "session_id": f"{tag}-s{n}", "source": "startup"}
        prompt: dict[str, object] = {**base, "session_id": f"{tag}-p{n}",
                                     "prompt": f"how does {text} work"}
        took = (_hook("session-start", start, env, project), _hook("prompt", prompt, env, project))
        plain = _run([sys.executable, "-c", "pass"], env, project)[0]
        if n:  # the first one warms the caches
            events["session-start"].append(took[0])
            events["prompt"].append(took[1])
            bare.append(plain)


def _daemon(home: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    from memdir.agents.daemon import ask

    proc = subprocess.Popen([sys.executable, "-m", "memdir", "daemon", "--home", str(home),
                             "--idle", "600"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while (ask(home, {"op": "ping"}) or {}).get("model") is not True:
        if time.monotonic() > deadline or proc.poll() is not None:
            from memdir.retrieval.embed import available

            if not available() and ask(home, {"op": "ping"}):
                break  # no embed extra: a daemon that recalls by words
            raise SystemExit("the daemon did not start or load its model")
        time.sleep(0.1)
    return proc


def bench(size: int, runs: int) -> dict[str, float]:
    corpus = Corpus(11)
    items = corpus.memories(size)
    prompts = corpus.queries(runs + 1)
    with tempfile.TemporaryDirectory(prefix="memdir-bench-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        project.mkdir()
        with Memdir(home=home, project=project, semantic=None) as md:
            for start in range(0, size, 5000):
                md.store_many(items[start:start + 5000])
            if md.semantic:  # the daemon searches by meaning too: every vector in place
                md.embed_memories()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(MEMDIR_HOME=str(home), MEMDIR_DAEMON="0")
        from memdir.agents.http_hooks import create

        web = create(home)  # as `memdir hooks install --agent claude-code --http` does
        out: dict[str, float] = {}
        for mode in ("alone", "warm"):
            daemon = _daemon(home, env) if mode == "warm" else None
            events: dict[str, list[float]] = {"session-start": [], "prompt": []}
            bare: list[float] = []
            try:
                _round(events, bare, env, project, prompts, mode)
                if daemon is not None:
                    http = _http_prompts(web.port, web.token, project, prompts * 3)
                    out["prompt http"] = statistics.median(http)
                    out["prompt http p90"] = sorted(http)[int(len(http) * 0.9)]
            finally:
                if daemon is not None:
                    daemon.terminate()
                    daemon.wait(30)
            out[f"bare {mode}"] = statistics.median(bare)
            for event, times in events.items():
                out[f"{event} {mode}"] = statistics.median(times)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args(argv)
    sizes = [int(s) for s in opts.sizes.split(",")]
    results = {size: bench(size, opts.runs) for size in sizes}
    print("| hook process, median ms (minus bare python) | "
          + " | ".join(f"{s:,}" for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for mode in ("alone", "warm"):
        print(f"| bare `python -c pass` ({mode}) | "
              + " | ".join(f"{results[s][f'bare {mode}']:.0f}" for s in sizes) + " |")
        for event in ALONE:
            cells = []
            for s in sizes:
                value, bare = results[s][f"{event} {mode}"], results[s][f"bare {mode}"]
                cells.append(f"{value:.0f} ({value - bare:.0f})")
            label = "with the warm daemon" if mode == "warm" else "alone"
            print(f"| `memdir hook {event}`, {label} | " + " | ".join(cells) + " |")
    print("| `POST /memdir/hooks/prompt` (Claude Code's HTTP hook), p50 / p90 | "
          + " | ".join(f"{results[s]['prompt http']:.1f} / {results[s]['prompt http p90']:.1f}"
                       for s in sizes) + " |")
    print("\n| target | measured | result |\n|---|---|---|")
    top = results[max(sizes)]
    value = top["prompt http"]
    print(f"| HTTP prompt hook at {max(sizes):,}, p50 <= {HTTP:.0f} ms | {value:.1f} ms | "
          f"{'PASS' if value <= HTTP else 'FAIL'} |")
    for event, limit in WARM.items():
        value = top[f"{event} warm"] - top["bare warm"]
        print(f"| {event} with the warm daemon at {max(sizes):,}, minus bare python <= "
              f"{limit:.0f} ms | {value:.0f} ms | {'PASS' if value <= limit else 'FAIL'} |")
    for event, limit in ALONE.items():
        value = top[f"{event} alone"]
        print(f"| {event} alone at {max(sizes):,} <= {limit:.0f} ms | {value:.0f} ms | "
              f"{'PASS' if value <= limit else 'FAIL'} |")
    if opts.json:
        opts.json.write_text(json.dumps({str(s): r for s, r in results.items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
