"""Shared fixtures: every test gets its own home, project (a real git repo) and user HOME.

Nothing here mocks memdir: tests use real files, real SQLite and real subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memdir import Memdir


def git(*args: str, cwd: Path) -> str:
    result = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
        env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
             "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"},
    )
    return result.stdout


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may read or write the real user's memory, config or ~/.claude."""
    fake_home = tmp_path / "userhome"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    monkeypatch.setenv("MEMDIR_HOME", str(tmp_path / "memdir-home"))
    monkeypatch.setenv("MEMDIR_CONFIG", str(tmp_path / "no-such-config.toml"))
    monkeypatch.setenv("XDG_DATA_HOME", str(fake_home / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(fake_home / ".config"))
    monkeypatch.delenv("MEMDIR_DEBUG", raising=False)
    monkeypatch.delenv("MEMDIR_NOW", raising=False)  # the real clock unless a test fixes it
    # No test may talk to the developer's team server; tests that want one start their own.
    monkeypatch.delenv("MEMDIR_SERVER", raising=False)
    monkeypatch.delenv("MEMDIR_TOKEN", raising=False)
    # No test may reach a real LLM API with the developer's own keys.
    for name in ("MEMDIR_LLM", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                 "MEMDIR_LLM_MODEL", "MEMDIR_LLM_BUDGET"):
        monkeypatch.delenv(name, raising=False)
    # Hooks would start a warm daemon (it lingers up to 15 minutes); tests that want one say so.
    monkeypatch.setenv("MEMDIR_DAEMON", "0")
    # Search by words unless a test asks for meaning: expectations about exact matches stay
    # exact (tests/test_semantic.py covers the default with the extra installed).
    monkeypatch.setenv("MEMDIR_SEMANTIC", "0")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "memdir-home"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with one commit."""
    path = tmp_path / "repo"
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    (path / "README").write_text("hello\n")
    git("add", "README", cwd=path)
    git("commit", "-q", "-m", "init", cwd=path)
    return path


@pytest.fixture
def md(home: Path, repo: Path) -> Iterator[Memdir]:
    # sync_interval=0: reconcile before every call, as a fresh CLI process would.
    with Memdir(home=home, project=repo, sync_interval=0) as instance:
        yield instance


CLI = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli(home: Path, repo: Path) -> CLI:
    """Run the real `memdir` CLI in a subprocess, in the repo, with the test's home."""

    def run(*args: str, input: str | None = None, cwd: Path | None = None,
            check: bool = False) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, "-m", "memdir", *args], cwd=cwd or repo, input=input,
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "MEMDIR_HOME": str(home)},
        )
        if check and result.returncode != 0:
            raise AssertionError(f"memdir {args} failed ({result.returncode}): {result.stderr}")
        return result

    return run


def cli_json(result: subprocess.CompletedProcess[str]) -> object:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


from llm_support import local_llm, scripted_llm  # noqa: E402, F401
from server_support import server  # noqa: E402, F401
