"""``stats`` lists at most 10 memories injected often and never used, and says how many there
are in all (issue 28): the library's field, ``memdir stats`` text and ``--json``, the MCP tool
and the HTTP API all carry ``never_used_count``, so 37 idle memories read "never used: 37
(showing 10)", not 10.

Memories become never used for real: recalled into three sessions each (one memory a session),
then the sessions' transcripts checked and found not to use them.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from hook_support import run_memdir
from memdir import Memdir
from memdir.agents.mcp_server import build_server
from memdir.capture.transcript import parse_transcript
from memdir.core.usefulness import Counts, MemoryUse, usefulness
from server_support import running_server

IDLE = 13  # more than are listed
NEVER_USED_LISTED = 10  # the never-used memories stats lists


def _idle(n: int, injected: int = 3) -> MemoryUse:
    return MemoryUse(f"m{n:03d}", f"memory {n}", "fact", "project", "active", injected + 1,
                     injected, 0, 0)


def test_the_summary_counts_every_never_used_memory_and_lists_ten() -> None:
    used = MemoryUse("u1", "used one", "fact", "project", "active", 9, 4, 3, 0)
    archived = MemoryUse("a1", "archived", "fact", "project", "archived", 9, 9, 0, 0)
    result = usefulness([("project", Counts(200, 120, 3))],
                        [*(_idle(n, 3 + n % 5) for n in range(37)), used, archived])
    assert result.never_used_count == 37
    assert len(result.never_used) == NEVER_USED_LISTED
    assert [m.injected for m in result.never_used] == sorted(
        (m.injected for m in result.never_used), reverse=True)  # most injected first
    data = result.to_dict()
    assert data["never_used_count"] == 37 and len(data["never_used"]) == 10
    few = usefulness([("project", Counts(9, 6, 0))], [_idle(1), _idle(2)])
    assert few.never_used_count == 2 and len(few.never_used) == 2
    assert usefulness([], []).never_used_count == 0


def _make_idle(home: Path, repo: Path) -> None:
    idle = parse_transcript([{"role": "user", "content": "go on"},
                             {"role": "assistant", "content": "Done."}])
    with Memdir(home=home, project=repo) as md:
        for i in range(IDLE):
            md.store(f"Service alpha{i} deploys through gateway{i} with flag zeta{i}",
                     type="fact")
        sessions = [f"s{k}-{i}" for k in range(3) for i in range(IDLE)]
        for name in sessions:
            i = int(name.split("-")[1])
            assert md.recall(f"how does service alpha{i} deploy through gateway{i}",
                             name).items
        time.sleep(1.1)  # the transcripts come after the injections
        for name in sessions:
            md.record_uses(name, idle)
        use = md.stats().usefulness
        assert use.never_used_count == IDLE
        assert len(use.never_used) == NEVER_USED_LISTED
        assert md.stats().to_dict()["usefulness"]["never_used_count"] == IDLE


def test_every_output_says_how_many_are_never_used(home: Path, repo: Path) -> None:
    _make_idle(home, repo)
    text = run_memdir(["stats"], home, repo)
    heading = re.search(r"injected 3\+ times, never used: (\d+) \(showing (\d+)\)", text)
    assert heading and heading.groups() == (str(IDLE), str(NEVER_USED_LISTED)), text
    listed = text[heading.end():].splitlines()[1:]
    assert sum(" injected, shown " in line for line in listed) == NEVER_USED_LISTED
    use = json.loads(run_memdir(["stats", "--json"], home, repo))["usefulness"]
    assert use["never_used_count"] == IDLE and len(use["never_used"]) == NEVER_USED_LISTED

    async def mcp() -> dict[str, Any]:
        with Memdir(home=home, project=repo) as md:
            async with Client(build_server(md=md), read_timeout_seconds=60) as client:
                result = await client.call_tool("memory_stats", {})
                assert not result.is_error and result.structured_content is not None
                return dict(result.structured_content)

    assert anyio.run(mcp)["usefulness"]["never_used_count"] == IDLE
    with running_server(home, repo) as srv, srv.client() as api:
        stats = api.get("/api/memory/stats").json()["usefulness"]
        assert stats["never_used_count"] == IDLE
        assert len(stats["never_used"]) == NEVER_USED_LISTED
