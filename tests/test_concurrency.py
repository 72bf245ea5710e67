"""Many processes, one home: nothing is lost, nothing is half-written, reads never fail.

Real subprocesses (``sys.executable -c``), real files, a real SQLite index in WAL mode and
real ``SIGKILL``s: nothing is mocked.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from memdir import Memdir, Problem
from memdir.core.markdown import parse
from memdir.core.placing import BULK

WRITERS = 8
PER_WRITER = 200

# Every child imports memdir, builds its Memdir, says it is ready, then waits for the "go"
# file so that all of them really run at once.
PRELUDE = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from memdir import Memdir, Problem

    args = json.loads(sys.argv[1])
    md = Memdir(home=args["home"], project=args["project"],
                sync_interval=args.get("sync_interval", 1.0))
    Path(args["ready"]).touch()
    limit = time.monotonic() + 60
    while not os.path.exists(args["go"]):
        if time.monotonic() > limit:
            sys.exit("no go signal")
        time.sleep(0.002)
""")

WRITER = PRELUDE + textwrap.dedent("""
    p = args["writer"]
    for i in range(args["count"]):
        # 20 names shared by every writer: file-name collisions across processes on purpose.
        md.store(f"Concurrent note from writer {p} number {i}, marker w{p}n{i}x",
                 type="fact", name=f"shared note {i % 20}", tags=[f"writer{p}"])
    print("done", flush=True)
""")

LOOPING_WRITER = PRELUDE + textwrap.dedent("""
    r = args["round"]
    i = 0
    while True:
        if args["bulk"] and i % 2:
            stored = md.store_many([
                {"content": f"Crash round {r} item {i} part {k} marker r{r}i{i}k{k}z",
                 "type": "fact", "name": f"crash batch {k % 7}"}
                for k in range(args["bulk"])])
        else:
            stored = [md.store(f"Crash round {r} item {i} marker r{r}i{i}z", type="decision",
                               name=f"crash note {i % 7}")]
        for m in stored:
            print(m.id, m.path.name, flush=True)
        i += 1
""")

SEARCHER = PRELUDE + textwrap.dedent("""
    searches = errors = 0
    seen = 0
    while not os.path.exists(args["stop"]):
        hits = md.search("crowded shelf note", limit=500, touch=args["touch"])
        assert isinstance(hits, list)
        seen = max(seen, len(hits))
        if hits and searches % 10 == 0:
            md.get(hits[0].memory.id)
            md.list(limit=20)
            md.memory_index()
        searches += 1
    hits = md.search("crowded shelf note", limit=500, touch=False)
    print(json.dumps({"searches": searches, "max_seen": seen, "final": len(hits)}), flush=True)
""")

STORING = PRELUDE + textwrap.dedent("""
    for i in range(args["count"]):
        md.store(f"Crowded shelf note number {i}, marker s{i}q", type="fact")
    Path(args["stop"]).touch()
    print("done", flush=True)
""")


def _spawn(script: str, **args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _wait_for(paths: Iterable[Path], procs: list[subprocess.Popen[str]],
              timeout: float = 60) -> None:
    limit = time.monotonic() + timeout
    for path in paths:
        while not path.exists():
            for proc in procs:
                if proc.poll() is not None:
                    _, err = proc.communicate()
                    raise AssertionError(f"child exited early ({proc.returncode}): {err}")
            assert time.monotonic() < limit, f"timed out waiting for {path}"
            time.sleep(0.005)


def _collect(proc: subprocess.Popen[str], into: list[str]) -> None:
    """Read a child's stdout line by line until it ends (a thread per child)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        into.append(line)


def _memory_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.md") if p.name != "MEMORY.md")


def _index_entries(directory: Path) -> list[str]:
    """The file each '- [' entry line of MEMORY.md points at, following its overflow pages
    (index/<type>.md) when there are more memories than MEMORY.md lists."""
    lines = (directory / "MEMORY.md").read_text(encoding="utf-8").splitlines()
    files = []
    for line in (ln for ln in lines if ln.startswith("- [")):
        more = re.match(r"- \[\d+ more [\w-]+ memories\]\((index/[\w-]+\.md)\)$", line)
        if more:
            page = (directory / more.group(1)).read_text(encoding="utf-8").splitlines()
            files += [re.match(r"- \[[^\]]*\]\(\.\./([^)]+)\) \(", ln).group(1)  # type: ignore[union-attr]
                      for ln in page if ln.startswith("- [")]
            continue
        found = re.match(r"- \[[^\]]*\]\(([^)]+)\) \(", line)
        assert found, f"malformed MEMORY.md line: {line!r}"
        files.append(found.group(1))
    return files


def _index_rows(index: Path, directory: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(index)
    try:
        return conn.execute("SELECT file, id, body FROM memories WHERE dir = ? ORDER BY file",
                            (str(directory),)).fetchall()
    finally:
        conn.close()


# Hundreds of memories make MEMORY.md longer than what is injected: doctor says so, rightly.
INDEX_SIZE = {"index-too-long", "index-too-large"}


def _problems(md: Memdir) -> list[Problem]:
    return [p for p in md.doctor() if p.kind not in INDEX_SIZE]


def _project_dir(home: Path, repo: Path) -> Path:
    with Memdir(home=home, project=repo) as md:
        return md.directory("project").path


@pytest.mark.slow
def test_eight_processes_storing_at_once_lose_nothing(home: Path, repo: Path,
                                                      tmp_path: Path) -> None:
    sync = tmp_path / "sync"
    sync.mkdir()
    go = sync / "go"
    procs = [
        _spawn(WRITER, home=str(home), project=str(repo), writer=p, count=PER_WRITER,
               ready=str(sync / f"ready-{p}"), go=str(go))
        for p in range(WRITERS)
    ]
    try:
        _wait_for([sync / f"ready-{p}" for p in range(WRITERS)], procs)
        go.touch()
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            assert out.strip() == "done"
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    expected = {f"Concurrent note from writer {p} number {i}, marker w{p}n{i}x"
                for p in range(WRITERS) for i in range(PER_WRITER)}
    total = WRITERS * PER_WRITER
    directory = _project_dir(home, repo)

    # The files: exactly one per store, each complete, all contents present.
    files = _memory_files(directory)
    assert len(files) == total
    parsed = [parse(f.read_text(encoding="utf-8"), stem=f.stem) for f in files]
    assert {m.body for m in parsed} == expected
    assert len({m.id for m in parsed}) == total
    assert not [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]

    # The index as the writers left it (read directly, before any reconcile could fix it).
    rows = _index_rows(home / "index.sqlite", directory)
    assert len(rows) == total
    assert {r[0] for r in rows} == {f.name for f in files}
    assert {r[2] for r in rows} == expected
    assert {(r[0], r[1]) for r in rows} == {(f.name, m.id) for f, m in
                                           zip(files, parsed, strict=True)}

    # MEMORY.md as the last writer left it: one line per memory, each to an existing file.
    entries = _index_entries(directory)
    assert len(entries) == total
    assert len(set(entries)) == total
    assert set(entries) == {f.name for f in files}

    with Memdir(home=home, project=repo, sync_interval=3600) as md:
        assert md.reconcile() is False  # nothing for a reconcile to repair
        stats = md.stats()
        assert stats.total == total and stats.broken_files == 0
        assert _problems(md) == []
        for p in range(WRITERS):
            for i in range(PER_WRITER):
                hits = md.search(f"w{p}n{i}x", touch=False)
                assert [h.memory.body for h in hits] == \
                    [f"Concurrent note from writer {p} number {i}, marker w{p}n{i}x"]
        assert len(md.list(tags=["writer3"], limit=None)) == PER_WRITER


@pytest.mark.slow
def test_a_writer_killed_mid_write_loses_nothing(home: Path, repo: Path,
                                                 tmp_path: Path) -> None:
    acknowledged: dict[str, str] = {}  # id -> file, for every store() that returned
    sync = tmp_path / "sync"
    sync.mkdir()
    # Kill after a varying number of stores, single and in batches (small ones, and ones of
    # more than placing.BULK, written by threads), one or two writers at a time.
    rounds = [(5, 0, 1), (17, 5, 1), (31, 0, 2), (12, 5, 2), (3, 5, 1), (23, 0, 1),
              (45, BULK + 8, 1), (100, BULK + 8, 2)]
    for r, (after, bulk, nprocs) in enumerate(rounds):
        go = sync / f"go-{r}"
        procs = [_spawn(LOOPING_WRITER, home=str(home), project=str(repo), round=r * 10 + n,
                        bulk=bulk, ready=str(sync / f"ready-{r}-{n}"), go=str(go))
                 for n in range(nprocs)]
        outputs: list[list[str]] = [[] for _ in procs]
        readers = [threading.Thread(target=_collect, args=(proc, out), daemon=True)
                   for proc, out in zip(procs, outputs, strict=True)]
        try:
            _wait_for([sync / f"ready-{r}-{n}" for n in range(nprocs)], procs)
            for thread in readers:
                thread.start()
            go.touch()
            limit = time.monotonic() + 60
            while sum(len(out) for out in outputs) < after:
                for proc in procs:
                    if proc.poll() is not None:
                        err = proc.stderr.read() if proc.stderr else ""
                        raise AssertionError(f"writer died on its own: {err}")
                assert time.monotonic() < limit, "the writers made no progress"
                time.sleep(0.001)
            time.sleep(0.0037 * r)  # land the kill at different points of a write
            for proc in procs:
                os.kill(proc.pid, signal.SIGKILL)
            for proc, thread, out in zip(procs, readers, outputs, strict=True):
                proc.wait(timeout=30)
                thread.join(timeout=30)
                assert proc.returncode == -signal.SIGKILL
                # A line cut short by the kill is not an acknowledgement we can check.
                for line in out:
                    if line.endswith("\n"):
                        mid, name = line.split()
                        acknowledged[mid] = name
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()
    assert len(acknowledged) >= sum(after for after, _, _ in rounds)
    assert sum(1 for name in acknowledged.values() if name.startswith("fact_crash-batch")) > 90

    directory = _project_dir(home, repo)
    # Every memory file on disk is complete: no half-written file, ever.
    files = _memory_files(directory)
    on_disk = {}
    for f in files:
        memory = parse(f.read_text(encoding="utf-8"), stem=f.stem)
        on_disk[memory.id] = f.name
    # Every store that returned is on disk, under the file it reported.
    for mid, name in acknowledged.items():
        assert on_disk.get(mid) == name

    with Memdir(home=home, project=repo, sync_interval=0) as md:
        md.reconcile()
        # A kill may land mid-write of MEMORY.md's overflow pages too (index/<type>.md).
        temp_files = {str(p) for p in [*directory.iterdir(), *directory.glob("index/*")]
                      if p.name.startswith(".") and p.name.endswith(".tmp")}
        problems = _problems(md)
        assert {p.kind for p in problems} <= {"temp-file"}
        assert {p.where for p in problems} == temp_files
        stats = md.stats()
        assert stats.total == len(files) and stats.broken_files == 0
        rows = _index_rows(home / "index.sqlite", directory)
        assert sorted(r[0] for r in rows) == [f.name for f in files]
        assert {r[1] for r in rows} == set(on_disk)
        entries = _index_entries(directory)
        assert sorted(entries) == [f.name for f in files]
        # And each acknowledged memory is found by id and by its words.
        for mid in list(acknowledged)[:: max(1, len(acknowledged) // 25)]:
            memory = md.get(mid)
            assert md.search(memory.body, limit=3, touch=False)[0].memory.id == mid


@pytest.mark.slow
def test_searches_never_fail_while_another_process_stores(home: Path, repo: Path,
                                                         tmp_path: Path) -> None:
    sync = tmp_path / "sync"
    sync.mkdir()
    go, stop = sync / "go", sync / "stop"
    count = 250
    common = {"home": str(home), "project": str(repo), "go": str(go), "stop": str(stop)}
    writer = _spawn(STORING, **common, count=count, ready=str(sync / "ready-w"))
    readers = [
        _spawn(SEARCHER, **common, touch=True, sync_interval=0, ready=str(sync / "ready-0")),
        _spawn(SEARCHER, **common, touch=False, sync_interval=1.0, ready=str(sync / "ready-1")),
        _spawn(SEARCHER, **common, touch=True, sync_interval=0.05, ready=str(sync / "ready-2")),
    ]
    procs = [writer, *readers]
    try:
        _wait_for([sync / n for n in ("ready-w", "ready-0", "ready-1", "ready-2")], procs)
        go.touch()
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        reports = []
        for reader in readers:
            out, err = reader.communicate(timeout=60)
            assert reader.returncode == 0, err
            assert "Traceback" not in err
            reports.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    for report in reports:
        assert report["searches"] > 0
        assert 0 < report["max_seen"] <= count
        assert report["final"] == count  # once the writer is done, every memory is found
    with Memdir(home=home, project=repo, sync_interval=0) as md:
        assert md.stats().total == count
        assert _problems(md) == []
