"""Transcript parsers: Claude Code, Codex, JSON message lists and plain text, on real files."""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

import pytest

from memdir.capture.transcript import Message, Transcript, parse_text, parse_transcript
from memdir.core.errors import InvalidMemoryError

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
CLAUDE_SID = "5c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
CODEX_SID = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"


def shape(transcript: Transcript) -> list[tuple[str, str, bool, str]]:
    for position, message in enumerate(transcript.messages):
        assert message.index == position
    return [(m.role, m.kind, m.sidechain, m.text) for m in transcript.messages]


def claude_line(kind: str, content: Any, **extra: Any) -> str:
    return json.dumps({"type": kind, "sessionId": "s-1", "cwd": "/w", "uuid": "u",
                       "timestamp": "2026-01-02T03:04:05Z",
                       "message": {"role": kind, "content": content}, **extra})


# --- Claude Code ---------------------------------------------------------------------------

def test_claude_code_session_gives_every_message_in_order() -> None:
    transcript = parse_transcript(FIXTURES / "claude_code_session.jsonl")
    assert shape(transcript) == [
        ("system", "summary", False, "Fix the failing due-date test in payments"),
        ("user", "text", False, "<command-name>/clear</command-name>\n<command-message>clear"
                                "</command-message>\n<command-args></command-args>"),
        ("user", "text", False, "<local-command-stdout></local-command-stdout>"),
        ("user", "text", False, "tests/test_invoice.py::test_due_date fails since yesterday's "
                                "merge. Can you fix it? I prefer pnpm over npm, so use pnpm for "
                                "anything JS."),
        ("assistant", "text", False, "I'll run the failing test first."),
        ("assistant", "tool_use", False, "Bash: pytest tests/test_invoice.py -x -q"),
        ("user", "tool_result", False, "F\n=== FAILURES ===\nE   AssertionError: assert "
                                       "datetime.date(2026, 3, 3) == datetime.date(2026, 2, 28)"
                                       "\n1 failed in 0.12s"),
        ("assistant", "tool_use", False, "Read: /home/dev/payments/src/invoice.py"),
        ("user", "tool_result", False, "def due_date(issued, days=30):\n    return "
                                       "issued.replace(day=issued.day + days)"),
        ("assistant", "text", False, "`replace(day=...)` overflows the month; I'll add a "
                                     "timedelta instead."),
        ("assistant", "tool_use", False, "Edit: /home/dev/payments/src/invoice.py"),
        ("user", "tool_result", False, "The file /home/dev/payments/src/invoice.py has been "
                                       "updated."),
        ("user", "text", False, "Here is the CI screenshot.\nAlso, never push directly to main."),
        ("user", "text", False, "Keep the old helper name as an alias."),
        ("assistant", "tool_use", False, "Task: Find other month arithmetic"),
        ("user", "text", True, "Search src/ for day arithmetic that can overflow a month."),
        ("assistant", "tool_use", True, "Grep: day=.*\\+"),
        ("user", "tool_result", True, "src/billing.py:42:    return start.replace(day=start.day "
                                      "+ 14)"),
        ("assistant", "text", True, "Only src/billing.py:42 has the same bug."),
        ("user", "tool_result", False, "Only src/billing.py:42 has the same bug."),
        ("system", "summary", False, "This session is being continued from a previous "
                                     "conversation that ran out of context. Summary: due_date "
                                     "used replace(day=...) and overflowed February; it now adds "
                                     "a timedelta. src/billing.py:42 has the same bug."),
        ("assistant", "tool_use", False, "Write: /home/dev/payments/tests/test_billing.py"),
        ("user", "tool_result", False, "File created successfully at: "
                                       "/home/dev/payments/tests/test_billing.py"),
        ("user", "text", False, "[Request interrupted by user for tool use]"),
        ("user", "text", False, "Actually, always run the suite through `make test`, not bare "
                                "pytest."),
        ("assistant", "tool_use", False, "Bash: make test"),
        ("user", "tool_result", False, "143 passed in 4.20s"),
        ("assistant", "text", False, "All 143 tests pass. I fixed due_date and trial_end and "
                                     "added tests for both."),
    ]


def test_claude_code_session_metadata_and_fields() -> None:
    transcript = parse_transcript(FIXTURES / "claude_code_session.jsonl")
    messages = transcript.messages
    assert transcript.source == "claude-code"
    assert (transcript.session_id, transcript.cwd) == (CLAUDE_SID, "/home/dev/payments")
    # Only the unknown "x-future-kind" line; meta lines, snapshots, queue operations, system
    # lines and the thinking-only line are known kinds without conversation.
    assert transcript.skipped == 1
    assert messages[0].timestamp is None and messages[0].uuid == ""  # summary lines have none
    assert messages[3].timestamp == datetime(2026, 11, 20, 9, 14, 4, 28000, tzinfo=UTC)
    assert messages[3].uuid == "u-004"
    # One assistant message split over two lines stays two messages; one line holding text and
    # a tool call gives two messages with the line's uuid.
    assert (messages[4].uuid, messages[5].uuid) == ("u-005", "u-006")
    assert (messages[9].uuid, messages[10].uuid) == ("u-010", "u-010")
    edit = messages[10]
    assert edit.tool_name == "Edit"
    assert edit.tool_input == {"file_path": "/home/dev/payments/src/invoice.py",
                               "old_string": "issued.replace(day=issued.day + days)",
                               "new_string": "issued + timedelta(days=days)"}
    assert messages[5].tool_input["description"] == "Run the failing test"
    assert [m.index for m in messages if m.is_error] == [6]
    assert all(m.tool_name == "" and m.tool_input == {} for m in messages
               if m.kind != "tool_use")
    assert all(m.timestamp is None or m.timestamp.tzinfo is not None for m in messages)


def test_claude_code_user_messages_are_what_the_user_typed() -> None:
    transcript = parse_transcript(FIXTURES / "claude_code_session.jsonl")
    assert [m.text for m in transcript.user_messages()] == [
        "tests/test_invoice.py::test_due_date fails since yesterday's merge. Can you fix it? I "
        "prefer pnpm over npm, so use pnpm for anything JS.",
        "Here is the CI screenshot.\nAlso, never push directly to main.",
        "Keep the old helper name as an alias.",
        "Actually, always run the suite through `make test`, not bare pytest.",
    ]


def test_claude_code_broken_lines_are_skipped_and_counted() -> None:
    transcript = parse_transcript(FIXTURES / "claude_code_broken.jsonl")
    # BOM, CRLF, a merge-conflict marker, a list, a string, content 42, message "oops" and a
    # truncated last line; blank lines are not counted.
    assert transcript.skipped == 6
    assert shape(transcript) == [
        ("user", "text", False, "Run the linter, please."),
        ("assistant", "text", False, "Ruff found 2 issues:\u2028E501 and F401."),
        ("user", "text", False, "Why is there a NUL\ufffd here?"),
        ("assistant", "text", False, "Fixed caf\ufffd.py"),
    ]
    assert transcript.session_id == CLAUDE_SID


def test_claude_code_blocks_that_are_not_conversation_are_left_out() -> None:
    lines = [
        claude_line("assistant", [{"type": "redacted_thinking", "data": "xx"},
                                  {"type": "text", "text": "one"}, {"type": "text", "text": "two"},
                                  {"type": "server_tool_use", "name": "web_search"},
                                  {"type": "text", "text": "three"}]),
        claude_line("user", [{"type": "document", "source": {}},
                             {"type": "text", "text": "<system-reminder>x</system-reminder>"}]),
        claude_line("user", "<system-reminder>whole string</system-reminder>"),
    ]
    transcript = parse_text("\n".join(lines))
    assert shape(transcript) == [
        ("assistant", "text", False, "one\ntwo\nthree"),
        ("user", "text", False, "<system-reminder>whole string</system-reminder>"),
    ]
    assert transcript.user_messages() == []
    assert transcript.skipped == 0


def test_claude_code_wrong_typed_fields_do_not_break_a_line() -> None:
    line = {"type": "assistant", "sessionId": 5, "cwd": ["/w"], "uuid": 7, "isSidechain": "yes",
            "timestamp": "yesterday", "message": {"content": [
                {"type": "tool_use", "input": ["not", "a", "dict"]},
                {"type": "tool_use", "name": "Bash", "input": {"command": 12}},
                {"type": "tool_result", "content": 3.5, "is_error": "true"}]}}
    transcript = parse_text(json.dumps(line))
    assert (transcript.session_id, transcript.cwd, transcript.skipped) == ("", "", 0)
    assert [(m.kind, m.text, m.tool_name, dict(m.tool_input), m.sidechain, m.uuid, m.timestamp,
             m.is_error) for m in transcript.messages] == [
        ("tool_use", "tool", "tool", {}, False, "", None, False),
        ("tool_use", 'Bash {"command":12}', "Bash", {"command": 12}, False, "", None, False),
        ("tool_result", "", "", {}, False, "", None, False),
    ]


# --- Codex ---------------------------------------------------------------------------------

def test_codex_rollout_gives_every_message_in_order() -> None:
    transcript = parse_transcript(FIXTURES / "codex_rollout.jsonl")
    assert transcript.source == "codex"
    assert (transcript.session_id, transcript.cwd) == (CODEX_SID, "/home/dev/webapp")
    assert transcript.skipped == 1  # the x_future_item; events, reasoning, turn context known
    assert shape(transcript) == [
        ("system", "text", False, "<permissions instructions>Filesystem sandboxing: "
                                  "workspace-write.</permissions instructions>"),
        ("user", "text", False, "<user_instructions>\n\nUse TypeScript strict mode. Tests live "
                                "next to the code.\n\n</user_instructions>"),
        ("user", "text", False, "<environment_context>\n  <cwd>/home/dev/webapp</cwd>\n  "
                                "<approval_policy>on-request</approval_policy>\n  <sandbox_mode>"
                                "workspace-write</sandbox_mode>\n  <shell>bash</shell>\n"
                                "</environment_context>"),
        ("user", "text", False, "The signup form test fails after the React upgrade. Fix it, "
                                "and use pnpm, not npm."),
        ("assistant", "tool_use", False, "shell: bash -lc 'pnpm test -- signup'"),
        ("user", "tool_result", False, "FAIL src/signup.test.tsx\n  x submits the form\n    "
                                       "Unable to find role=\"button\" and name \"Sign up\""),
        ("assistant", "text", False, "The test looks the button up by its old label; the "
                                     "upgrade renamed it to \"Create account\"."),
        ("assistant", "tool_use", False, "apply_patch {\"input\":\"*** Begin Patch\\n*** Update "
                                         "File: src/signup.test.tsx\\n@@\\n-  name: 'Sign up'\\n+"
                                         "  name: 'Create account'\\n*** End Patch\"}"),
        ("user", "tool_result", False, "Success. Updated the following files:\n"
                                       "M src/signup.test.tsx"),
        ("assistant", "tool_use", False, "shell: bash -lc 'pnpm test'"),
        ("user", "tool_result", False, "Tests: 48 passed, 48 total"),
        ("assistant", "text", False, "Fixed: the test now finds the button by its new label; "
                                     "all 48 tests pass."),
        ("system", "summary", False, "Summary: fixed the signup test after the React upgrade "
                                     "(button renamed to \"Create account\")."),
        ("user", "text", False, "Thanks. From now on never run npm install in this repo."),
    ]
    messages = transcript.messages
    assert messages[4].tool_name == "shell"
    assert messages[4].tool_input == {"command": ["bash", "-lc", "pnpm test -- signup"],
                                      "workdir": "/home/dev/webapp", "timeout_ms": 120000}
    assert [m.index for m in messages if m.is_error] == [5]  # exit code 1
    assert messages[0].timestamp == datetime(2026, 11, 19, 14, 2, 10, 2000, tzinfo=UTC)
    assert messages[13].timestamp == datetime(2026, 11, 19, 14, 31, 2, tzinfo=UTC)


def test_codex_user_messages_leave_out_injected_context() -> None:
    transcript = parse_transcript(FIXTURES / "codex_rollout.jsonl")
    assert [m.text for m in transcript.user_messages()] == [
        "The signup form test fails after the React upgrade. Fix it, and use pnpm, not npm.",
        "Thanks. From now on never run npm install in this repo.",
    ]


def test_codex_legacy_items_without_envelope() -> None:
    transcript = parse_transcript(FIXTURES / "codex_legacy.jsonl")
    assert transcript.source == "codex"
    assert (transcript.session_id, transcript.cwd, transcript.skipped) == (
        "0b3f6c1e-7d2a-4e8b-9c5f-1a2b3c4d5e6f", "", 0)
    assert shape(transcript) == [
        ("user", "text", False, "<environment_context>\n  <cwd>/srv/deploy</cwd>\n"
                                "</environment_context>"),
        ("user", "text", False, "Add a --dry-run flag to the deploy script."),
        ("assistant", "tool_use", False, "shell: bash -lc 'cat scripts/deploy.sh'"),
        ("user", "tool_result", False, "#!/bin/sh\nset -e\nrsync -a build/ prod:/srv/app"),
        ("assistant", "text", False, "I added --dry-run: it prints the rsync command instead of "
                                     "running it."),
        ("assistant", "tool_use", False, "local_shell: sh scripts/deploy.sh --dry-run"),
        ("user", "tool_result", False, "would run: rsync -a build/ prod:/srv/app"),
    ]
    assert all(m.timestamp is None for m in transcript.messages)
    assert [m.text for m in transcript.user_messages()] == [
        "Add a --dry-run flag to the deploy script."]


def test_codex_odd_items_are_kept_or_counted() -> None:
    lines = [
        {"type": "function_call", "name": "shell", "arguments": "{not json", "call_id": "c"},
        {"type": "function_call_output", "call_id": "c", "output": {"content": "done",
                                                                     "success": False}},
        {"type": "message", "role": "narrator", "content": []},
        {"timestamp": "2026-01-01T00:00:00Z", "type": "response_item", "payload": "oops"},
        {"timestamp": "2026-01-01T00:00:00Z", "type": "x_envelope", "payload": {}},
        {"timestamp": "2026-01-01T00:00:00Z", "type": "turn_context",
         "payload": {"cwd": "/from/turn/context"}},
    ]
    transcript = parse_text("\n".join(json.dumps(line) for line in lines))
    assert [(m.kind, m.text, dict(m.tool_input), m.is_error) for m in transcript.messages] == [
        ("tool_use", 'shell {"arguments":"{not json"}', {"arguments": "{not json"}, False),
        ("tool_result", "done", {}, True),
    ]
    assert (transcript.skipped, transcript.cwd, transcript.source) == (3, "/from/turn/context",
                                                                       "codex")


# --- JSON lists and plain text ---------------------------------------------------------------

def test_json_message_list_file() -> None:
    transcript = parse_transcript(FIXTURES / "messages.json")
    assert transcript.source == "json"
    assert transcript.skipped == 3  # role "narrator", content 7, a bare string
    assert shape(transcript) == [
        ("system", "text", False, "You are a careful coding assistant."),
        ("user", "text", False, "Our API tests are flaky on CI. We use Postgres 16 in "
                                "docker-compose."),
        ("assistant", "text", False, "Let me run them a few times."),
        ("assistant", "tool_use", False, "Bash: pytest tests/api --count 5"),
        ("user", "tool_result", False, "2 failed, 18 passed"),
        ("assistant", "text", False, "The failures share one cause: tests reuse a database "
                                     "without truncating tables."),
        ("user", "text", False, "Integration tests must hit a real database, not mocks."),
        ("user", "tool_result", False, "CREATE DATABASE"),
    ]
    assert transcript.messages[1].timestamp == datetime(
        2026, 11, 18, 8, tzinfo=timezone(timedelta(hours=1)))
    assert transcript.messages[4].is_error
    assert [m.index for m in transcript.user_messages()] == [1, 6]


def test_json_messages_object_and_loaded_lists() -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "I prefer tabs."},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]}]
    expected = [("user", "text", False, "I prefer tabs."),
                ("assistant", "text", False, "Noted.")]
    assert shape(parse_text(json.dumps({"messages": items}, indent=2))) == expected
    assert shape(parse_transcript(items)) == expected
    assert shape(parse_transcript(tuple(items))) == expected
    assert parse_transcript(items).source == "json"
    # One pretty-printed message is a list of one.
    assert shape(parse_text(json.dumps(items[0], indent=2))) == expected[:1]
    # JSON lines of {role, content} are read too.
    assert shape(parse_text("\n".join(json.dumps(i) for i in items))) == expected


def test_plain_text_chat_file() -> None:
    with pytest.raises(InvalidMemoryError) as refused:  # plain text only when asked
        parse_transcript(FIXTURES / "chat.txt")
    assert "--format text" in refused.value.hint
    transcript = parse_transcript(FIXTURES / "chat.txt", format="text")
    assert (transcript.source, transcript.skipped) == ("text", 0)
    assert shape(transcript) == [
        ("user", "text", False, "The deploy script fails on macOS with \"sed: illegal option\"."
                                "\nI prefer pnpm, by the way."),
        ("assistant", "text", False, "macOS ships BSD sed; `sed -i ''` differs from GNU sed."),
        ("user", "text", False, "Can we avoid the difference entirely?"),
        ("assistant", "text", False, "Yes: use perl -pi -e instead of sed -i; it behaves the "
                                     "same on both."),
        ("assistant", "text", False, "Want me to patch scripts/deploy.sh?"),
        ("user", "text", False, "Yes please."),
    ]
    assert all(m.timestamp is None for m in transcript.messages)


def test_plain_text_variants() -> None:
    assert shape(parse_text("just fix the build\nplease\n")) == [
        ("user", "text", False, "just fix the build\nplease")]
    assert shape(parse_text("[WIP] fix the build")) == [
        ("user", "text", False, "[WIP] fix the build")]
    assert shape(parse_text("{braces} on the same line, please")) == [
        ("user", "text", False, "{braces} on the same line, please")]
    assert shape(parse_text("Notes from Monday\r\nUser: hi\r\nAssistant: hello\r\n there\r\n"
                            "Assistant:\r\n")) == [
        ("user", "text", False, "Notes from Monday"),
        ("user", "text", False, "hi"),
        ("assistant", "text", False, "hello\n there"),
    ]
    # Only a speaker at the start of a line starts a message.
    assert shape(parse_text("Human: the username: field and AI: in the middle")) == [
        ("user", "text", False, "the username: field and AI: in the middle")]


# --- tail() ----------------------------------------------------------------------------------

def chat(texts: list[str]) -> Transcript:
    return parse_transcript([{"role": "user" if i % 2 == 0 else "assistant", "content": text}
                             for i, text in enumerate(texts)])


def test_tail_keeps_the_last_20_messages() -> None:
    transcript = chat([f"message {i}" for i in range(30)])
    tail = transcript.tail()
    assert [m.index for m in tail] == list(range(10, 30))
    assert [m.index for m in transcript.tail(3)] == [27, 28, 29]
    assert transcript.tail(0) == []
    assert chat([]).tail() == []


def test_tail_drops_the_oldest_until_8000_characters() -> None:
    transcript = chat(["a" * 3000, "b" * 3000, "c" * 3000, "d" * 1999])  # 8,001 with "c"+"b"
    tail = transcript.tail()
    assert [m.index for m in tail] == [2, 3]
    assert len("\n".join(m.text for m in tail)) == 5000
    # Exactly at the limit, joined with "\n", nothing is dropped.
    exact = chat(["x" * 3999, "y" * 4000])
    assert [m.index for m in exact.tail()] == [0, 1]
    assert [m.index for m in exact.tail(max_chars=7999)] == [1]


def test_tail_cuts_a_huge_single_message_from_its_start() -> None:
    transcript = chat(["short question", "start " + "x" * 20_000 + " the end"])
    tail = transcript.tail()
    assert len(tail) == 1
    assert tail[0].index == 1 and len(tail[0].text) == 8000
    assert tail[0].text.endswith("x the end")
    assert transcript.messages[1].text.startswith("start ")  # the transcript is unchanged


def test_tail_is_the_main_thread_without_summaries() -> None:
    transcript = parse_transcript(FIXTURES / "claude_code_session.jsonl")
    tail = transcript.tail(count=100)
    assert [m.index for m in tail] == [i for i in range(28) if i not in (0, 15, 16, 17, 18, 20)]
    assert [m.index for m in transcript.tail(count=4)] == [24, 25, 26, 27]


# --- tool text limits --------------------------------------------------------------------------

def test_tool_texts_are_cut_at_2000_characters() -> None:
    long_command = "echo " + "x" * 5000
    items = [{"role": "assistant", "content": [
                 {"type": "tool_use", "name": "Bash", "input": {"command": long_command}},
                 {"type": "tool_use", "name": "Bash", "input": {"command": "cat <<EOF\nhi\nEOF"}},
                 {"type": "tool_use", "name": "TodoWrite", "input": {"todos": ["y" * 3000]}}]},
             {"role": "user", "content": [{"type": "tool_result", "content": "z" * 3000}]}]
    messages = parse_transcript(items).messages
    assert [len(m.text) for m in messages] == [2000, len('Bash {"command":"cat <<EOF\\nhi\\nEOF"}'),
                                               2000, 2000]
    assert messages[0].text.startswith("Bash: echo xxx")
    assert messages[0].tool_input == {"command": long_command}  # the input stays whole
    assert messages[1].text == 'Bash {"command":"cat <<EOF\\nhi\\nEOF"}'
    assert messages[2].text.startswith('TodoWrite {"todos":["yyy')


# --- autodetection ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["claude_code_session.jsonl", "claude_code_broken.jsonl",
                                  "codex_rollout.jsonl", "codex_legacy.jsonl", "messages.json",
                                  "chat.txt"])
def test_parse_text_finds_the_same_format_as_the_file(name: str, tmp_path: Path) -> None:
    path = FIXTURES / name
    fmt: Literal["auto", "text"] = "text" if name == "chat.txt" else "auto"
    from_file = parse_transcript(path, format=fmt)
    assert parse_text(path.read_bytes().decode("utf-8", errors="replace")) == from_file
    renamed = tmp_path / "transcript.log"  # the extension is not needed to find the format
    renamed.write_bytes(path.read_bytes())
    assert parse_transcript(renamed, format=fmt) == from_file
    assert parse_transcript(str(path), format=fmt) == from_file


def test_extension_decides_ambiguous_files(tmp_path: Path) -> None:
    lines = FIXTURES.joinpath("codex_legacy.jsonl").read_text()
    as_json = tmp_path / "rollout.json"  # JSON lines in a .json file are still read
    as_json.write_text(lines)
    assert parse_transcript(as_json).source == "codex"
    assert len(parse_transcript(as_json).messages) == 7
    listed = tmp_path / "listed.jsonl"  # a .jsonl file is never one JSON document
    listed.write_text('[{"role": "user", "content": "hi"}]\n{"type": "user", "message": '
                      '{"role": "user", "content": "hello"}}\n')
    transcript = parse_transcript(listed)
    assert (shape(transcript), transcript.skipped) == ([("user", "text", False, "hello")], 1)


# --- errors and empty input ---------------------------------------------------------------------

def test_missing_or_unreadable_file_raises_with_hint(tmp_path: Path) -> None:
    with pytest.raises(InvalidMemoryError) as missing:
        parse_transcript(tmp_path / "nope.jsonl")
    assert "nope.jsonl" in missing.value.message
    assert "Claude Code" in missing.value.hint and "Codex" in missing.value.hint
    with pytest.raises(InvalidMemoryError) as directory:
        parse_transcript(tmp_path)
    assert "JSON" in directory.value.hint


@pytest.mark.parametrize(("suffix", "content", "as_text"), [
    (".jsonl", "<<<<<<< HEAD\nnot json at all\n[1, 2]\n", "plain"),
    (".jsonl", '{"foo": 1}\n{"bar": 2}\n', "error"),
    (".json", '[1, "two", {"role": "narrator", "content": "x"}]', "error"),
    (".json", '{"messages": [{"role": "user"', "plain"),
    (".log", '{"foo": 1}\n', "error"),
])
def test_input_with_nothing_usable_raises_with_hint(tmp_path: Path, suffix: str, content: str,
                                                    as_text: str) -> None:
    path = tmp_path / f"bad{suffix}"
    path.write_text(content)
    with pytest.raises(InvalidMemoryError) as error:
        parse_transcript(path)
    assert "Codex" in error.value.hint and "plain text" in error.value.hint
    # Without an extension, text that is not JSON is a plain-text message ("[WIP] fix it").
    if as_text == "plain":
        assert shape(parse_text(content)) == [("user", "text", False, content.strip())]
    else:
        with pytest.raises(InvalidMemoryError):
            parse_text(content)


def test_empty_input_is_an_empty_transcript(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\ufeff \n\r\n")
    assert parse_transcript(empty) == Transcript((), "text")
    assert parse_text("") == Transcript((), "text")
    assert parse_transcript([]) == Transcript((), "json")
    assert parse_text("[]") == Transcript((), "json")
    # Known lines without conversation: nothing to show, nothing wrong.
    only_meta = parse_text('{"type": "file-history-snapshot", "snapshot": {}}\n'
                           '{"type": "queue-operation", "sessionId": "s-9"}')
    assert only_meta == Transcript((), "claude-code", session_id="s-9")


def test_timestamps_are_aware() -> None:
    transcript = parse_transcript([
        {"role": "user", "content": "a", "timestamp": "2026-03-04T05:06:07"},
        {"role": "user", "content": "b", "timestamp": "2026-03-04T05:06:07.5+02:00"},
        {"role": "user", "content": "c", "timestamp": 1767225600},
        {"role": "user", "content": "d", "timestamp": "not a date"},
    ])
    assert [m.timestamp for m in transcript.messages] == [
        datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC),  # no offset: read as UTC
        datetime(2026, 3, 4, 5, 6, 7, 500000, tzinfo=timezone(timedelta(hours=2))),
        None, None]


def test_messages_are_frozen_values() -> None:
    message = parse_text("User: hi").messages[0]
    assert message == Message("user", "hi", 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.text = "changed"  # type: ignore[misc]


# --- size ---------------------------------------------------------------------------------------

def test_a_5_mb_claude_code_transcript_parses_quickly(tmp_path: Path) -> None:
    lines: list[str] = []
    expected = size = 0
    while size < 5_000_000:
        i = len(lines)
        if i % 50 == 49:
            line = '{"type":"assistant","message":{"role":"assist'  # a broken line now and then
        elif i % 2 == 0:
            line = claude_line("user", f"question {i}: " + "why does the build fail? " * 40,
                               isSidechain=i % 10 == 0)
            expected += 1
        else:
            line = claude_line("assistant", [
                {"type": "thinking", "thinking": "hmm " * 50},
                {"type": "text", "text": f"answer {i}: " + "check the lockfile. " * 40},
                {"type": "tool_use", "id": f"t{i}", "name": "Bash",
                 "input": {"command": "pnpm install --frozen-lockfile"}}])
            expected += 2
        lines.append(line)
        size += len(line) + 1
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n")
    started = time.perf_counter()
    transcript = parse_transcript(path)
    elapsed = time.perf_counter() - started
    assert elapsed < 5
    assert len(transcript.messages) == expected
    assert transcript.skipped == len(lines) // 50
    assert transcript.messages[-1].index == expected - 1
    tail, main = transcript.tail(), [m for m in transcript.messages if not m.sidechain]
    assert 1 < len(tail) < 20 and tail == main[-len(tail):]
    assert len("\n".join(m.text for m in tail)) <= 8000 < len(
        "\n".join(m.text for m in main[-len(tail) - 1:]))
