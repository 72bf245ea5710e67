"""Stored text never reaches a terminal raw: the CLI escapes control characters, escape
sequences and bidi overrides in everything it prints (memdir.cli.terminal). Real files
written by hand (as a teammate's commit would be), real `memdir` subprocesses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Protocol

import pytest

from memdir import Memdir

# A red, retitled, rewritten screen: CSI colour, OSC window title, 8-bit CSI, NUL, a carriage
# return that overwrites the line, DEL, and a right-to-left override.
NAME = "Deploy \x1b[31mred\x1b[0m \x1b]0;owned\x07 \x9b2J nul\x00 cr\rX del\x7f \u202efdp.exe"
BODY = "Body \x1b[2J cleared \x00 and \u2066isolated\u2069 \u202a embedded \u202c"
RAW = ("\x1b", "\x00", "\x07", "\x9b", "\x7f", "\r", "\u202e", "\u2066", "\u202a")


class CLI(Protocol):
    def __call__(self, *args: str, input: str | None = None, cwd: Path | None = None,
                 check: bool = False) -> subprocess.CompletedProcess[str]: ...


def _yaml(text: str) -> str:
    """A YAML double-quoted scalar holding ``text`` exactly (control characters escaped)."""
    return json.dumps(text)  # JSON strings are YAML double-quoted strings


@pytest.fixture
def hostile(md: Memdir) -> str:
    """A memory whose file was rewritten by hand with hostile name, description and body;
    returns its id."""
    memory = md.store("Deploys go out on Tuesdays", type="project")
    assert memory.path is not None
    text = memory.path.read_text()
    head, _, _ = text.rpartition("---\n")
    head = head.replace("name: Deploys go out on Tuesdays", f"name: {_yaml(NAME)}")
    head = head.replace("description: Deploys go out on Tuesdays",
                        f"description: {_yaml(NAME + ' tuesdays')}")
    memory.path.write_text(head + "---\n" + BODY.replace("\r", "") + " tuesdays\n")
    md.reconcile()
    found = md.get(memory.id)
    assert "\x1b[31m" in found.name and "\x00" in found.name  # stored as written
    return memory.id


def _assert_clean(out: str) -> None:
    for char in RAW:
        assert char not in out, (repr(char), out)


@pytest.mark.parametrize("command", [
    ("list",), ("recent",), ("search", "tuesdays"), ("about", "tuesdays"), ("get", "{id}"),
    ("decisions", "--type", "project"),
])
def test_human_output_shows_control_characters_escaped(cli: CLI, hostile: str,
                                                       command: tuple[str, ...]) -> None:
    args = [a.replace("{id}", hostile) for a in command]
    result = cli(*args)
    assert result.returncode == 0, result.stderr
    _assert_clean(result.stdout)
    _assert_clean(result.stderr)
    if args[0] in ("list", "recent", "search", "get", "decisions"):
        assert "\\x1b[31mred" in result.stdout, result.stdout  # visible, not dropped
    if args[0] == "get":
        assert "\\x00" in result.stdout and "\\u202e" in result.stdout


def test_a_hostile_file_name_in_doctor_is_escaped(cli: CLI, md: Memdir) -> None:
    md.store("Something to make the directory", type="project")
    folder = md.directory("project").path
    (folder / "project_evil\x1b]0;pwned\x07\x1b[2J.md").write_text("---\nname: [unclosed\n")
    result = cli("doctor")
    _assert_clean(result.stdout)
    _assert_clean(result.stderr)
    assert "\\x1b]0;pwned\\x07" in result.stdout


def test_json_output_is_escaped_and_still_the_same_data(cli: CLI, hostile: str) -> None:
    result = cli("--json", "list")
    assert result.returncode == 0, result.stderr
    _assert_clean(result.stdout)
    memories = json.loads(result.stdout)
    assert [m["name"] for m in memories] == [NAME]  # the exact text, read back from JSON
    assert "\u202e" not in result.stdout and "\\u202e" in result.stdout


def test_jsonl_export_to_stdout_is_escaped_and_lossless(cli: CLI, hostile: str) -> None:
    result = cli("export", "-")
    assert result.returncode == 0, result.stderr
    _assert_clean(result.stdout)
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert any(r.get("name") == NAME for r in rows), rows
