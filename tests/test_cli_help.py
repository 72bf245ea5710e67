"""The `memdir` help text: every argument of every command explains itself, `memdir hook
--help` answers (the hook itself runs without argparse), and the top-level help names the
options every command takes."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from conftest import CLI
from memdir.agents.hooks import EVENTS
from memdir.cli.hooks_cli import HOOK_EVENTS
from memdir.cli.parser import build_parser


def _arguments(parser: argparse.ArgumentParser,
               path: tuple[str, ...]) -> Iterator[tuple[str, argparse.Action]]:
    """Every argument of every (sub-)command, with the command's words."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _arguments(child, (*path, name))
        else:
            yield " ".join(path), action


def test_every_argument_of_every_command_has_help() -> None:
    found = list(_arguments(build_parser(), ("memdir",)))
    assert len({command for command, _ in found}) > 40  # the walk reached the sub-commands
    missing = [f"{command} {action.option_strings or action.dest}" for command, action in found
               if not action.help or action.help == argparse.SUPPRESS]
    assert missing == []


@pytest.mark.parametrize("command", ["store", "search", "list", "recent", "export", "hook"])
def test_command_help_shows_each_option_with_text(cli: CLI, command: str) -> None:
    result = cli(command, "--help", input="")
    assert result.returncode == 0, result.stderr
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for action in sub.choices[command]._actions:
        for option in action.option_strings:
            assert option in result.stdout
        assert action.help is not None and action.help.split()[0] in result.stdout


def test_store_scope_and_search_limit_explain_themselves(cli: CLI) -> None:
    store = cli("store", "--help", check=True).stdout
    scope = store[store.index("\n  --scope"):store.index("\n  --name")]
    assert "default" in scope and "user (" in scope, scope
    search = cli("search", "--help", check=True).stdout
    limit = search[search.index("\n  --limit"):search.index("\n  --archived")]
    assert "at most" in limit and "10" in limit


def test_hook_help_lists_the_events(cli: CLI) -> None:
    for args in (("hook", "--help"), ("hook", "-h"), ("--home", "/nowhere", "hook", "--help")):
        result = cli(*args, input="")
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("usage: memdir hook"), result.stdout
        for event in EVENTS:
            assert f"\n  {event} " in result.stdout, event


def test_hook_events_match_the_hooks_module() -> None:
    assert tuple(name for name, _ in HOOK_EVENTS) == EVENTS


def test_hook_without_help_still_runs_without_argparse(cli: CLI) -> None:
    """An unknown event or option is logged, never an argparse error: exit 0."""
    result = cli("hook", "no-such-event", "--bogus", input="{}")
    assert result.returncode == 0 and result.stderr == ""


def test_top_level_help_names_the_common_options(cli: CLI) -> None:
    result = cli("--help", check=True)
    for option in ("--home", "--project", "--json"):
        line = next((ln for ln in result.stdout.splitlines()
                     if ln.strip().startswith(option)), "")
        assert len(line.split()) > 2, (option, result.stdout)  # the option and its help
