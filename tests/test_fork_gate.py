"""No fork while a background thread of memdir's is inside SQLite or the model
(memdir.core.fork_gate): a fork waits for the thread, and children forked while recall
prefetches run never hang. Real forks, real SQLite files."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from memdir import Memdir, start_recall_prefetch
from memdir.core.fork_gate import working

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux",
                                reason="fork is a POSIX call; the hang was seen on Linux")


def _reap(pid: int, seconds: float) -> int | None:
    """The child's exit code, or None when it did not finish in time (then it is killed)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def test_a_fork_waits_for_the_work_inside_the_gate() -> None:
    inside, finished = threading.Event(), []

    def work() -> None:
        with working():
            inside.set()
            time.sleep(0.3)
            finished.append(True)

    thread = threading.Thread(target=work)
    thread.start()
    assert inside.wait(10)
    pid = os.fork()
    if pid == 0:  # the child sees the memory as it was when the fork happened
        os._exit(0 if finished else 1)
    assert _reap(pid, 30) == 0  # the fork came after the work, not in the middle of it
    thread.join()
    with working():  # the gate is open again in the parent
        pass


def test_children_forked_while_recall_prefetches_run_never_hang(home: Path,
                                                                repo: Path) -> None:
    with Memdir(home, repo, semantic=False) as md:
        md.store_many([{"content": f"Service {n} deploys through the blue-green pipeline on "
                                   f"port {8000 + n}", "type": "fact"} for n in range(600)])
    hung = failed = 0
    for round_ in range(10):
        handles = [start_recall_prefetch("how does the pipeline deploy services",
                                         f"s{round_}-{k}", home=home, project=repo,
                                         use_llm=False) for k in range(3)]
        pids = []
        for n in range(3):
            pid = os.fork()
            if pid == 0:
                try:
                    with Memdir(home, repo, semantic=False) as child:
                        child.store(f"Child {round_}-{n} notes the release train", type="fact")
                    os._exit(0)
                except BaseException:
                    os._exit(3)
            pids.append(pid)
        for pid in pids:
            code = _reap(pid, 30)
            hung += code is None
            failed += code not in (0, None)
        for handle in handles:
            assert handle.wait(30)
    assert hung == 0 and failed == 0
    with Memdir(home, repo, semantic=False) as md:
        assert sum(m.body.startswith("Child ") for m in md.list(limit=None)) == 30
