"""What memdir writes for the agents stays inside their limits: hook output (Claude Code's
10,000 characters, Codex's 2,500-token ``additionalContextLimit``) and SessionEnd timeouts
(Codex clamps to 3 s, Claude Code gives all SessionEnd hooks together 1.5 s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memdir import Memdir
from memdir.agents.hook_output import CUT, MAX_CHARS, MAX_TOKENS, fit, tokens
from memdir.agents.hooks_agents import HOOKS


def _reminder(n: int, size: int) -> str:
    return f"<system-reminder>\nmemory {n}\n" + ("word " * size) + "\n</system-reminder>"


@pytest.mark.parametrize("text", [
    "\n".join(_reminder(n, 400) for n in range(40)),  # many blocks: whole ones dropped
    "<memory-context source=\"memdir\">\n```markdown\n"
    + "\n".join(f"- fact {n}: " + "x" * 90 for n in range(400)) + "\n```\n</memory-context>",
    "<memory-context>\n" + "é" * 30_000 + "\n</memory-context>",  # non-ASCII: a token each
])
def test_output_over_the_limits_is_cut_with_its_wrapper_whole(text: str) -> None:
    out = fit(text)
    assert len(out) <= MAX_CHARS and tokens(out) <= MAX_TOKENS
    assert out.count("<system-reminder>") == out.count("</system-reminder>")
    assert out.rstrip().endswith(text.rstrip().splitlines()[-1])  # the closing line kept
    if "```" in text:
        assert out.count("```") == 2
    assert out.startswith(text.splitlines()[0])
    if text.count("</system-reminder>") <= 1:
        assert CUT in out


def test_output_within_the_limits_is_unchanged() -> None:
    text = "\n".join(_reminder(n, 20) for n in range(3))
    assert fit(text) == text


def test_the_session_start_hook_stays_under_the_caps(home: Path, repo: Path) -> None:
    with Memdir(home, repo) as md:
        md.store_many([{"content": f"Convention {n}: " + "always document the widget " * 30,
                        "type": "feedback"} for n in range(60)])
    env = {"MEMDIR_HOME": str(home), "PATH": "/usr/bin:/bin", "MEMDIR_DAEMON": "0"}
    event = json.dumps({"session_id": "s1", "cwd": str(repo), "hook_event_name":
                        "SessionStart", "source": "startup"})
    for fmt in ("text", "json"):
        out = subprocess.run([sys.executable, "-m", "memdir", "hook", "session-start",
                              "--format", fmt], input=event, capture_output=True, text=True,
                             cwd=repo, env=env, timeout=60, check=True).stdout
        text = json.loads(out)["hookSpecificOutput"]["additionalContext"] if fmt == "json" \
            else out
        assert text and len(text) <= MAX_CHARS and tokens(text) <= MAX_TOKENS


def test_session_end_timeouts_are_within_every_host_cap() -> None:
    [end] = [h for h in HOOKS if h.event == "SessionEnd"]
    assert end.timeout <= 1.5  # Claude Code's shared budget; Codex clamps at 3 s
    assert 5 in end.earlier  # an install with memdir's old 5 s is updated, not kept


def test_an_install_with_the_old_session_end_timeout_is_updated(tmp_path: Path) -> None:
    from memdir.agents import hooks_install

    home = tmp_path / "user"
    home.mkdir()
    first = hooks_install.install("codex", "user", project=tmp_path, home=None, mcp=False)
    hooks_file = Path(first.files[0].path)
    data = json.loads(hooks_file.read_text())
    data["hooks"]["SessionEnd"][-1]["hooks"][0]["timeout"] = 5  # as memdir wrote it before
    hooks_file.write_text(json.dumps(data, indent=2))
    again = hooks_install.install("codex", "user", project=tmp_path, home=None, mcp=False)
    data = json.loads(hooks_file.read_text())
    assert data["hooks"]["SessionEnd"][-1]["hooks"][0]["timeout"] == 1
    assert not any("kept your timeout" in note for note in again.notes)
