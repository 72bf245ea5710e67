"""Usage counters survive lock contention: reads that cannot write their counts queue them in
the home (memdir.core.usage_queue), the next write transaction applies them exactly once, and a
library user's stderr stays quiet. A real second process holds the write lock."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memdir import Memdir
from memdir.core.usage_queue import MAX_BYTES

HOLDER = textwrap.dedent("""
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
""")


@contextmanager
def write_lock_held(index: Path) -> Iterator[None]:
    """Another process holds the index's write lock (BEGIN IMMEDIATE) until the block ends."""
    with subprocess.Popen([sys.executable, "-c", HOLDER, str(index)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            yield
        finally:
            assert holder.stdin is not None
            holder.stdin.write("\n")
            holder.stdin.flush()
            holder.wait(timeout=30)


def count(md: Memdir, memory_id: str) -> int:
    return next(m.access_count for m in md.list(status="all") if m.id == memory_id)


def test_counts_taken_under_a_lock_arrive_with_the_next_write_and_stderr_stays_quiet(
        md: Memdir, capfd: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    memory = md.store("The billing webhook retries five times", type="project")
    capfd.readouterr()
    with caplog.at_level(logging.WARNING, logger="memdir"), write_lock_held(md.index.path):
        for _ in range(3):
            assert [h.memory.id for h in md.search("billing webhook")] == [memory.id]
        assert [m.id for m in md.context(budget_tokens=2000).memories] == [memory.id]
    assert capfd.readouterr().err == ""  # nothing on a library user's stderr
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert md.index.queue_path.exists()
    assert count(md, memory.id) == 0  # not yet: queued
    md.store("Deploys go out on Tuesdays", type="project")  # any write applies the queue
    assert count(md, memory.id) == 4
    assert not md.index.queue_path.exists()
    last = next(m.last_accessed for m in md.list() if m.id == memory.id)
    assert last is not None
    md.store("Releases are cut from main", type="project")
    assert count(md, memory.id) == 4  # applied once, not again


def test_the_next_read_that_can_write_applies_the_queue_too(md: Memdir) -> None:
    memory = md.store("The billing webhook retries five times", type="project")
    with write_lock_held(md.index.path):
        md.search("billing webhook")
        md.get(memory.id)
    md.search("billing webhook")  # its own count, and the two queued
    assert count(md, memory.id) == 3
    assert not md.index.queue_path.exists()


def test_counts_queued_by_other_processes_are_applied_exactly_once(md: Memdir,
                                                                   home: Path,
                                                                   repo: Path) -> None:
    memory = md.store("The billing webhook retries five times", type="project")
    reader = textwrap.dedent(f"""
        from memdir import Memdir
        with Memdir(home={str(home)!r}, project={str(repo)!r}) as md:
            for _ in range(5):
                assert md.search("billing webhook")
    """)
    with write_lock_held(md.index.path):
        readers = [subprocess.run([sys.executable, "-c", reader], capture_output=True,
                                  text=True, timeout=60) for _ in range(2)]
    for done in readers:
        assert done.returncode == 0 and done.stderr == "", done.stderr
    md.store("Deploys go out on Tuesdays", type="project")
    assert count(md, memory.id) == 10


def test_the_queue_is_bounded(md: Memdir) -> None:
    memory = md.store("The billing webhook retries five times", type="project")
    md.index.queue_path.write_bytes(b"\n" * MAX_BYTES)  # full (of blank lines)
    with write_lock_held(md.index.path):
        md.search("billing webhook")
    assert md.index.queue_path.stat().st_size == MAX_BYTES  # dropped, not appended
    md.store("Deploys go out on Tuesdays", type="project")
    assert count(md, memory.id) == 0
    assert not md.index.queue_path.exists()  # drained all the same


def test_malformed_lines_are_skipped_and_the_rest_applied(md: Memdir) -> None:
    memory = md.store("The billing webhook retries five times", type="project")
    assert memory.path is not None
    good = json.dumps({"at": "2026-01-02T03:04:05Z",
                       "items": [[str(memory.path.parent), memory.id]]})
    md.index.queue_path.write_text("\n".join([
        good, "not json", '{"at": 5, "items": []}', '{"items": [["a", "b"]]}',
        '{"at": "x", "items": [[1, 2]]}', '{"at": "2026-01-01T00:00:00Z", "items": '
        '[["/elsewhere", "nosuchid"]]}', good, '{"at": "2026-01-0',  # torn last line
    ]))
    md.store("Deploys go out on Tuesdays", type="project")
    assert count(md, memory.id) == 2
    assert not md.index.queue_path.exists()
    with md.index.write() as conn:  # a memory that is not there gets no usage row
        assert conn.execute("SELECT count(*) FROM usage WHERE id = 'nosuchid'").fetchone()[0] == 0


def test_a_symlink_in_place_of_the_queue_is_never_followed(md: Memdir, tmp_path: Path) -> None:
    memory = md.store("The billing webhook retries five times", type="project")
    target = tmp_path / "elsewhere.txt"
    target.write_text("someone else's file\n")
    os.symlink(target, md.index.queue_path)
    with write_lock_held(md.index.path):
        md.search("billing webhook")  # must not append through the link
    md.store("Deploys go out on Tuesdays", type="project")  # must not read or remove it
    assert target.read_text() == "someone else's file\n"
    assert md.index.queue_path.is_symlink()
    assert count(md, memory.id) == 0
