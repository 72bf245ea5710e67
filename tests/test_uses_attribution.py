"""Related memories injected together: the one the agent followed counts as used, by what is
distinctive to it; shared words alone never make a use, and never hide one. Measured on the
labelled sessions of bench/uses.py (precision must stay ≥ 0.95), and through the real stop
hook on a Claude Code transcript."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hook_support import run_memdir
from memdir import Memdir
from memdir.capture.transcript import parse_transcript
from memdir.capture.uses import Injected, drawn_on

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.uses import evaluate

PNPM = ("Use pnpm, never npm, in this repo", "pnpm workspaces live under packages/ and apps/",
        "CI installs with pnpm install --frozen-lockfile")


def _said(reply: str, prompt: str = "set up the dependencies") -> object:
    return parse_transcript([{"role": "user", "content": prompt},
                             {"role": "assistant", "content": reply}])


def test_of_three_pnpm_memories_the_one_followed_is_used() -> None:
    injected = [Injected(n, text) for n, text in enumerate(PNPM)]
    assert drawn_on(injected, _said("Use pnpm here, not npm.")) == [0]  # type: ignore[arg-type]
    assert drawn_on(injected, _said("Added it as a pnpm workspace under packages/.")) == [1]  # type: ignore[arg-type]
    assert drawn_on(injected, _said("pnpm it is.")) == []  # type: ignore[arg-type]


def test_the_labelled_sessions() -> None:
    result = evaluate()
    assert result["precision"] >= 0.95, result["wrong"]
    assert result["recall"] >= 0.85, result["wrong"]
    assert result["by_kind"]["shared-word"]["fp"] == 0  # shared words alone: never a use


def test_the_stop_hook_credits_the_memory_followed(home: Path, repo: Path,
                                                    tmp_path: Path) -> None:
    with Memdir(home, repo) as md:
        stored = [md.store(text, type="preference") for text in PNPM]
        recalled = md.recall("pnpm npm workspaces lockfile", "s1")
        assert {m.id for m in recalled.memories} == {m.id for m in stored}
    transcript = tmp_path / "s1.jsonl"
    lines = [{"type": "user", "sessionId": "s1", "message": {
                  "role": "user", "content": "set up the dependencies"}},
             {"type": "assistant", "sessionId": "s1", "message": {
                  "role": "assistant", "content": [{"type": "text",
                                                    "text": "Use pnpm here, not npm."}]}}]
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run_memdir(["hook", "stop"], home, repo, stdin=json.dumps({
        "session_id": "s1", "transcript_path": str(transcript), "cwd": str(repo),
        "hook_event_name": "Stop", "stop_hook_active": False}))
    with Memdir(home, repo) as md:
        assert [md.get(m.id).used_count for m in stored] == [1, 0, 0]
