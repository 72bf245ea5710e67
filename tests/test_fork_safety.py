"""Forking a process whose background vector worker is busy never leaves a child hung: the
worker is quiesced around each fork (``os.register_at_fork``), so no SQLite or model lock is
inherited held. The pattern of every pre-fork server and of ``multiprocessing`` users:
rounds of writes and a search (the worker embedding meanwhile), then children forked that
write through a new ``Memdir`` of their own. Without the quiescing about one child in ten
hung in ``sqlite3.connect`` (11 of 120 in one run), so 60 children all finishing is no
luck."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from memdir import Memdir
from memdir.retrieval.embed import available

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux",
                       reason="fork is a POSIX call; the hang was seen on Linux"),
    pytest.mark.skipif(not available(), reason="the vector worker needs the embed extra"),
]


def _child(home: Path, repo: Path, n: int) -> None:
    try:
        with Memdir(home, repo, semantic=False) as md:
            md.store(f"Child {n} wrote this note about the release train", type="fact")
        os._exit(0)
    except BaseException:
        os._exit(3)


def test_children_forked_while_the_worker_embeds_never_hang(home: Path, repo: Path) -> None:
    hung = failed = forked = 0
    with Memdir(home, repo, semantic=True) as md:
        for round_ in range(15):
            md.store_many([{"content": f"Round {round_} note {k}: the deploy of service "
                                       f"{round_ * 100 + k} uses port {8000 + k}",
                            "type": "fact"} for k in range(300)])
            md.search("deploy service port")  # wakes the worker: it embeds meanwhile
            pids = []
            for n in range(4):
                pid = os.fork()
                if pid == 0:
                    _child(home, repo, round_ * 10 + n)
                pids.append(pid)
                forked += 1
            deadline = time.monotonic() + 30
            for pid in pids:
                while True:
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        failed += os.waitstatus_to_exitcode(status) != 0
                        break
                    if time.monotonic() > deadline:
                        hung += 1
                        os.kill(pid, signal.SIGKILL)
                        os.waitpid(pid, 0)
                        break
                    time.sleep(0.02)
    assert forked == 60
    assert hung == 0, f"{hung} of {forked} forked children hung"
    assert failed == 0
    with Memdir(home, repo, semantic=False) as md:
        assert sum(m.body.startswith("Child ") for m in md.list()) == forked
