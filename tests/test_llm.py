"""The LLM layer against real parts: a real HTTP server on 127.0.0.1 answering scripted
responses, a real executable standing in for the `claude` CLI, a real SQLite ledger, real
child processes, and (marked `llm`) the real SmolLM2 model served by xllamacpp."""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from llm_support import ScriptedServer
from memdir.core.errors import ConfigError
from memdir.core.index import Index
from memdir.llm.client import (
    LLM,
    Completion,
    LLMError,
    LLMSettings,
    llm_settings,
    make_provider,
    shape_problem,
)
from memdir.llm.ledger import Ledger
from memdir.llm.providers import parse_json_reply

KEY = "sk-test-Zq81vS3cr3tK3y0000"
DAY = "2026-11-21"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"selected_memories": {"type": "array", "items": {"type": "string"}}},
    "required": ["selected_memories"],
}
GOOD = '{"selected_memories": ["m1", "m2"]}'


def clock() -> datetime:
    return datetime(2026, 11, 21, 9, 30)


@pytest.fixture
def index_path(tmp_path: Path) -> Path:
    return tmp_path / "index.sqlite"


@pytest.fixture
def ledger(index_path: Path) -> Iterator[Ledger]:
    index = Index(index_path)
    try:
        yield Ledger(index)
    finally:
        index.close()


def openai_llm(server: ScriptedServer, ledger: Ledger | None, *, api_key: str = KEY,
               timeout: float = 5.0, budget: int = 500) -> LLM:
    settings = LLMSettings("openai", model="gpt-test", base_url=f"{server.url}/v1",
                           api_key=api_key, timeout=timeout, api_key_env="OPENAI_API_KEY")
    return LLM(make_provider(settings), ledger, daily_budget=budget, clock=clock)


def anthropic_llm(server: ScriptedServer, ledger: Ledger | None, *, api_key: str = KEY,
                  timeout: float = 5.0) -> LLM:
    settings = LLMSettings("anthropic", base_url=server.url, api_key=api_key, timeout=timeout,
                           api_key_env="ANTHROPIC_API_KEY")
    return LLM(make_provider(settings), ledger, clock=clock)


def ask(llm: LLM, **kw: Any) -> Any:
    return llm.ask("You pick memories.", "Task: fix the deploy", SCHEMA, purpose="recall", **kw)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "memdir" and r.levelno >= logging.WARNING]


def assert_no_key_logged(caplog: pytest.LogCaptureFixture) -> None:
    assert all(KEY not in r.getMessage() for r in caplog.records)
    assert KEY not in caplog.text


# ------------------------------------------------------------- OpenAI-compatible over HTTP

def test_openai_reply_is_parsed_and_counted(scripted_llm: ScriptedServer, ledger: Ledger,
                                            caplog: pytest.LogCaptureFixture) -> None:
    scripted_llm.reply_openai(GOOD, prompt_tokens=120, completion_tokens=9)
    assert ask(openai_llm(scripted_llm, ledger), max_tokens=64) == {
        "selected_memories": ["m1", "m2"]}
    [request] = scripted_llm.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    body = request.body
    assert body["model"] == "gpt-test"
    assert body["max_tokens"] == 64
    assert body["temperature"] == 0
    assert body["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "memdir", "schema": SCHEMA}}
    system, user = body["messages"]
    assert system["role"] == "system"
    assert system["content"].startswith("You pick memories.")
    assert json.dumps(SCHEMA, separators=(",", ":")) in system["content"]
    assert user == {"role": "user", "content": "Task: fix the deploy"}
    usage = ledger.usage(DAY)
    assert (usage.calls, usage.failures, usage.input_tokens, usage.output_tokens) == (1, 0, 120, 9)
    assert warnings(caplog) == []


def test_openai_without_key_sends_no_authorization(scripted_llm: ScriptedServer) -> None:
    scripted_llm.reply_openai(GOOD)  # a local server: no key, no header
    assert ask(openai_llm(scripted_llm, None, api_key="")) == {"selected_memories": ["m1", "m2"]}
    assert "authorization" not in scripted_llm.requests[0].headers


def test_invalid_json_is_none_one_warning_and_a_counted_failure(
        scripted_llm: ScriptedServer, ledger: Ledger, caplog: pytest.LogCaptureFixture) -> None:
    scripted_llm.reply_openai("I think m1 is relevant", prompt_tokens=50, completion_tokens=6)
    assert ask(openai_llm(scripted_llm, ledger)) is None
    [warning] = warnings(caplog)
    assert "not JSON" in warning and "I think m1" in warning and "hint:" in warning
    usage = ledger.usage(DAY)  # the model answered: its tokens count even though it failed
    assert (usage.calls, usage.failures, usage.input_tokens, usage.output_tokens) == (
        1, 1, 50, 6)


def test_reply_cut_off_at_max_tokens_says_so(scripted_llm: ScriptedServer,
                                             caplog: pytest.LogCaptureFixture) -> None:
    scripted_llm.reply_openai('{"selected_memories": ["m1", "m', finish_reason="length")
    assert ask(openai_llm(scripted_llm, None)) is None
    [warning] = warnings(caplog)
    assert "cut off at max_tokens" in warning


@pytest.mark.parametrize("reply", [
    '{"other": []}',                       # a required key is missing
    '{"selected_memories": "m1"}',         # a property of the wrong type
    '["m1", "m2"]',                        # the wrong top-level type
])
def test_json_of_the_wrong_shape_is_none(scripted_llm: ScriptedServer, ledger: Ledger,
                                         caplog: pytest.LogCaptureFixture, reply: str) -> None:
    scripted_llm.reply_openai(reply, prompt_tokens=10, completion_tokens=3)
    assert ask(openai_llm(scripted_llm, ledger)) is None
    [warning] = warnings(caplog)
    assert "ignored" in warning and "schema" in warning
    usage = ledger.usage(DAY)
    assert (usage.calls, usage.failures, usage.input_tokens) == (1, 1, 10)


def test_slow_server_times_out(scripted_llm: ScriptedServer, ledger: Ledger,
                               caplog: pytest.LogCaptureFixture) -> None:
    scripted_llm.reply_openai(GOOD, delay=5)
    started = time.monotonic()
    assert ask(openai_llm(scripted_llm, ledger, timeout=0.4)) is None
    assert time.monotonic() - started < 1.4
    [warning] = warnings(caplog)
    assert "timed out after 0.4s" in warning and "[llm] timeout" in warning
    assert ledger.usage(DAY).failures == 1


@pytest.mark.parametrize(("status", "said"), [
    (429, "rate limited"), (500, "provider error (HTTP 500)"), (503, "provider error (HTTP 503)"),
    (404, "rejected the request (HTTP 404)"),
])
def test_http_errors_are_none_with_a_warning(scripted_llm: ScriptedServer, ledger: Ledger,
                                             caplog: pytest.LogCaptureFixture, status: int,
                                             said: str) -> None:
    scripted_llm.reply({"error": {"message": "nope"}}, status=status)
    assert ask(openai_llm(scripted_llm, ledger)) is None
    assert len(scripted_llm.requests) == 1  # no retries: hooks have tight time limits
    [warning] = warnings(caplog)
    assert said in warning
    if status == 429:
        assert "rate limit" in warning.split("hint:")[1]
    assert ledger.usage(DAY).failures == 1


@pytest.mark.parametrize("status", [401, 403])
def test_refused_key_names_the_env_var_and_never_logs_the_key(
        scripted_llm: ScriptedServer, caplog: pytest.LogCaptureFixture, status: int) -> None:
    # Some servers echo (part of) the rejected key: it must not reach the log anyway.
    scripted_llm.reply({"error": {"message": f"Incorrect API key provided: {KEY}"}}, status)
    assert ask(openai_llm(scripted_llm, None)) is None
    [warning] = warnings(caplog)
    assert f"HTTP {status}" in warning and "$OPENAI_API_KEY" in warning
    assert_no_key_logged(caplog)


def test_key_echoed_in_other_errors_is_redacted(scripted_llm: ScriptedServer,
                                                caplog: pytest.LogCaptureFixture) -> None:
    scripted_llm.reply({"error": f"bad request for key {KEY}"}, status=400)
    scripted_llm.reply(f"garbage {KEY}")
    llm = openai_llm(scripted_llm, None)
    assert ask(llm) is None and ask(llm) is None
    assert len(warnings(caplog)) == 2 and "***" in caplog.text
    assert_no_key_logged(caplog)


def test_unsupported_response_format_is_retried_once_without(
        scripted_llm: ScriptedServer, ledger: Ledger, caplog: pytest.LogCaptureFixture) -> None:
    scripted_llm.reply({"error": {"message": "'response_format' of type 'json_schema' is not "
                                             "supported with this model"}}, status=400)
    scripted_llm.reply_openai(GOOD, prompt_tokens=30, completion_tokens=5)
    assert ask(openai_llm(scripted_llm, ledger)) == {"selected_memories": ["m1", "m2"]}
    first, second = scripted_llm.requests
    assert "response_format" in first.body and "response_format" not in second.body
    assert second.body["messages"] == first.body["messages"]  # the schema is still asked for
    usage = ledger.usage(DAY)
    assert (usage.calls, usage.failures, usage.input_tokens) == (1, 0, 30)
    assert warnings(caplog) == []


def test_other_400_is_not_retried(scripted_llm: ScriptedServer,
                                  caplog: pytest.LogCaptureFixture) -> None:
    scripted_llm.reply({"error": {"message": "model gpt-test does not exist"}}, status=400)
    assert ask(openai_llm(scripted_llm, None)) is None
    assert len(scripted_llm.requests) == 1
    [warning] = warnings(caplog)
    assert "HTTP 400" in warning and "does not exist" in warning and "[llm] model" in warning


def test_unreachable_server(scripted_llm: ScriptedServer, caplog: pytest.LogCaptureFixture
                            ) -> None:
    llm = openai_llm(scripted_llm, None)
    scripted_llm.close()  # nothing listens on the port any more
    assert ask(llm) is None
    [warning] = warnings(caplog)
    assert "cannot reach" in warning and "base_url" in warning


def test_answer_without_message(scripted_llm: ScriptedServer,
                                caplog: pytest.LogCaptureFixture) -> None:
    scripted_llm.reply({"choices": []})
    assert ask(openai_llm(scripted_llm, None)) is None
    assert "without a message" in warnings(caplog)[0]


# --------------------------------------------------------------------- Anthropic over HTTP

def test_anthropic_reply_is_parsed_and_counted(scripted_llm: ScriptedServer, ledger: Ledger,
                                               caplog: pytest.LogCaptureFixture) -> None:
    scripted_llm.reply_anthropic(GOOD, input_tokens=200, output_tokens=12)
    assert ask(anthropic_llm(scripted_llm, ledger), max_tokens=100) == {
        "selected_memories": ["m1", "m2"]}
    [request] = scripted_llm.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["content-type"] == "application/json"
    assert "authorization" not in request.headers
    body = request.body
    assert body["model"] == "claude-haiku-4-5"  # the default model
    assert body["max_tokens"] == 100
    assert body["system"].startswith("You pick memories.")
    assert "Reply with only a JSON value matching this JSON schema" in body["system"]
    assert json.dumps(SCHEMA, separators=(",", ":")) in body["system"]
    assert body["messages"] == [{"role": "user", "content": "Task: fix the deploy"}]
    usage = ledger.usage(DAY)
    assert (usage.calls, usage.failures, usage.input_tokens, usage.output_tokens) == (
        1, 0, 200, 12)
    assert warnings(caplog) == []


@pytest.mark.parametrize("text", [
    f"```json\n{GOOD}\n```",
    f"Here are the relevant ones:\n{GOOD}\nHope this helps!",
    f"Sure {{not json}} then: {GOOD}",
])
def test_anthropic_reply_in_fences_or_prose(scripted_llm: ScriptedServer, text: str) -> None:
    scripted_llm.reply_anthropic(text)
    assert ask(anthropic_llm(scripted_llm, None)) == {"selected_memories": ["m1", "m2"]}


def test_anthropic_without_key_makes_no_request(scripted_llm: ScriptedServer, ledger: Ledger,
                                                caplog: pytest.LogCaptureFixture) -> None:
    assert ask(anthropic_llm(scripted_llm, ledger, api_key="")) is None
    assert scripted_llm.requests == []
    [warning] = warnings(caplog)
    assert "$ANTHROPIC_API_KEY is not set" in warning
    assert ledger.usage(DAY).failures == 1


def test_anthropic_refused_key(scripted_llm: ScriptedServer,
                               caplog: pytest.LogCaptureFixture) -> None:
    scripted_llm.reply({"type": "error", "error": {"type": "authentication_error",
                                                   "message": f"invalid x-api-key {KEY}"}}, 401)
    assert ask(anthropic_llm(scripted_llm, None)) is None
    [warning] = warnings(caplog)
    assert "refused the API key (HTTP 401)" in warning and "$ANTHROPIC_API_KEY" in warning
    assert_no_key_logged(caplog)


@pytest.mark.parametrize(("status", "said"), [(429, "rate limited"), (529, "provider error")])
def test_anthropic_http_errors(scripted_llm: ScriptedServer, caplog: pytest.LogCaptureFixture,
                               status: int, said: str) -> None:
    scripted_llm.reply({"type": "error", "error": {"type": "overloaded_error"}}, status)
    assert ask(anthropic_llm(scripted_llm, None)) is None
    assert said in warnings(caplog)[0]


def test_anthropic_timeout_and_odd_answers(scripted_llm: ScriptedServer, ledger: Ledger,
                                           caplog: pytest.LogCaptureFixture) -> None:
    scripted_llm.reply({"content": [{"type": "tool_use", "id": "x"}]})
    scripted_llm.reply_anthropic('{"selected_memories": [', stop_reason="max_tokens")
    scripted_llm.reply(b"<html>proxy error</html>")
    llm = anthropic_llm(scripted_llm, ledger, timeout=0.3)
    assert [ask(llm), ask(llm), ask(llm)] == [None, None, None]
    first, second, third = warnings(caplog)
    assert "without a text block" in first
    assert "cut off at max_tokens" in second
    assert "did not answer with a JSON object" in third and "proxy error" in third
    scripted_llm.reply({"content": []}, delay=3)
    started = time.monotonic()
    assert ask(llm) is None
    assert time.monotonic() - started < 1.3
    assert "timed out after 0.3s" in warnings(caplog)[3]
    assert ledger.usage(DAY).failures == 4


# --------------------------------------------------------------------------- daily budget

def test_budget_stops_calls_before_any_request(scripted_llm: ScriptedServer, ledger: Ledger,
                                               caplog: pytest.LogCaptureFixture) -> None:
    for _ in range(3):
        scripted_llm.reply_openai(GOOD)
    llm = openai_llm(scripted_llm, ledger, budget=2)
    fresh = llm.available
    assert fresh and ask(llm) and ask(llm)
    assert not llm.available
    assert ask(llm) is None and ask(llm) is None
    assert len(scripted_llm.requests) == 2
    [warning] = warnings(caplog)  # once, not once per refused call
    assert "budget spent (2 of 2 calls on 2026-11-21)" in warning
    assert "daily_budget" in warning


def test_budget_is_shared_by_llms_on_one_index(scripted_llm: ScriptedServer,
                                               index_path: Path) -> None:
    # Two Index objects on one file: two hook processes, as far as SQLite is concerned.
    first, second = Index(index_path), Index(index_path)
    try:
        for _ in range(3):
            scripted_llm.reply_openai(GOOD)
        a = openai_llm(scripted_llm, Ledger(first), budget=2)
        b = openai_llm(scripted_llm, Ledger(second), budget=2)
        assert ask(a) and ask(b)
        assert ask(a) is None and ask(b) is None
        assert not a.available and not b.available
        assert len(scripted_llm.requests) == 2
    finally:
        first.close()
        second.close()


def test_budget_is_shared_with_another_process(scripted_llm: ScriptedServer, ledger: Ledger,
                                               index_path: Path) -> None:
    for _ in range(3):
        scripted_llm.reply_openai(GOOD, prompt_tokens=7, completion_tokens=2)
    child = textwrap.dedent(f"""
        import datetime, sys
        from pathlib import Path
        from memdir.core.index import Index
        from memdir.llm.ledger import Ledger
        from memdir.llm.client import LLM, LLMSettings, make_provider
        settings = LLMSettings("openai", base_url={scripted_llm.url + "/v1"!r}, timeout=5)
        index = Index(Path({str(index_path)!r}))
        llm = LLM(make_provider(settings), Ledger(index), daily_budget=2,
                  clock=lambda: datetime.datetime(2026, 11, 21, 12, 0))
        print(llm.ask("s", "p", {SCHEMA!r}, purpose="child"))
        index.close()
    """)
    assert ask(openai_llm(scripted_llm, ledger, budget=2))
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                            timeout=60, check=True)
    assert result.stdout.strip() == "{'selected_memories': ['m1', 'm2']}"
    assert ask(openai_llm(scripted_llm, ledger, budget=2)) is None
    assert len(scripted_llm.requests) == 2
    usage = ledger.usage(DAY)
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (2, 14, 4)


def test_budget_zero_and_no_provider_make_no_call(scripted_llm: ScriptedServer,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    off = openai_llm(scripted_llm, None, budget=0)
    assert not off.available and ask(off) is None
    none = LLM(None)
    assert not none.available and ask(none) is None
    assert scripted_llm.requests == []
    assert len(warnings(caplog)) == 1  # budget 0 warns; "no provider" is the normal case


def test_budget_resets_on_a_new_local_day(scripted_llm: ScriptedServer, ledger: Ledger) -> None:
    now = [datetime(2026, 11, 21, 23, 59)]
    for _ in range(2):
        scripted_llm.reply_openai(GOOD)
    settings = LLMSettings("openai", base_url=f"{scripted_llm.url}/v1")
    llm = LLM(make_provider(settings), ledger, daily_budget=1, clock=lambda: now[0])
    assert ask(llm) and ask(llm) is None
    now[0] = datetime(2026, 11, 22, 0, 1)
    assert llm.available and ask(llm)
    assert [ledger.calls_today(d) for d in ("2026-11-21", "2026-11-22")] == [1, 1]


def test_without_a_ledger_the_budget_still_holds(scripted_llm: ScriptedServer) -> None:
    for _ in range(2):
        scripted_llm.reply_openai(GOOD)
    llm = openai_llm(scripted_llm, None, budget=1)
    assert ask(llm) and ask(llm) is None
    assert len(scripted_llm.requests) == 1


def test_a_broken_index_costs_the_count_never_the_answer(
        scripted_llm: ScriptedServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    broken = tmp_path / "index-is-a-directory"
    broken.mkdir()
    index = Index(broken)
    try:
        for _ in range(2):
            scripted_llm.reply_openai(GOOD)
        llm = openai_llm(scripted_llm, Ledger(index), budget=1)
        assert ask(llm) == {"selected_memories": ["m1", "m2"]}
        assert ask(llm) is None  # the in-process count still enforces the budget
        assert len(scripted_llm.requests) == 1
        assert any("not counted" in w for w in warnings(caplog))
    finally:
        index.close()


class BrokenProvider:
    """A Provider with a bug: LLM.ask must survive any provider, not only memdir's."""

    name = "broken"

    def complete_json(self, system: str, prompt: str, schema: dict[str, Any], *,
                      max_tokens: int = 512) -> Completion:
        raise KeyError("choices")


def test_a_provider_bug_is_a_warning_not_a_crash(ledger: Ledger,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    assert ask(LLM(BrokenProvider(), ledger, clock=clock)) is None
    [warning] = warnings(caplog)
    assert "unexpected KeyError" in warning and "MEMDIR_LLM=none" in warning
    assert ledger.usage(DAY).failures == 1


# ------------------------------------------------------------------------------ claude CLI

FAKE_CLAUDE = """\
#!{python}
import json, os, sys, time
from pathlib import Path
here = Path(__file__).resolve().parent
stdin = sys.stdin.read()
(here / "claude-call.json").write_text(json.dumps(
    {{"argv": sys.argv[1:], "stdin": stdin, "pid": os.getpid(),
      "memdir_llm": os.environ.get("MEMDIR_LLM")}}))
script = json.loads((here / "claude-script.json").read_text())
time.sleep(script.get("sleep", 0))
sys.stdout.write(script.get("stdout", ""))
sys.stderr.write(script.get("stderr", ""))
sys.exit(script.get("exit", 0))
"""


@pytest.fixture
def fake_claude(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "claude"
    path.parent.mkdir()
    path.write_text(FAKE_CLAUDE.format(python=sys.executable))
    path.chmod(0o755)
    return path


def claude_llm(command: str, ledger: Ledger | None = None, timeout: float = 10.0) -> LLM:
    settings = LLMSettings("claude-cli", claude_command=command, timeout=timeout)
    return LLM(make_provider(settings), ledger, clock=clock)


def script(fake: Path, **behaviour: Any) -> None:
    (fake.parent / "claude-script.json").write_text(json.dumps(behaviour))


def envelope(**fields: Any) -> str:
    return json.dumps({"type": "result", "subtype": "success", "is_error": False,
                       "session_id": "s1", **fields})


def test_claude_cli_structured_output(fake_claude: Path, ledger: Ledger,
                                      caplog: pytest.LogCaptureFixture) -> None:
    script(fake_claude, stdout=envelope(
        result="", structured_output={"selected_memories": ["m3"]},
        usage={"input_tokens": 40, "cache_read_input_tokens": 900,
               "cache_creation_input_tokens": 60, "output_tokens": 15}))
    assert ask(claude_llm(str(fake_claude), ledger)) == {"selected_memories": ["m3"]}
    call = json.loads((fake_claude.parent / "claude-call.json").read_text())
    argv = call["argv"]
    assert argv[:2] == ["--bare", "-p"]  # --bare: no recursion into memdir's own hooks
    assert argv[argv.index("--output-format") + 1] == "json"
    assert json.loads(argv[argv.index("--json-schema") + 1]) == SCHEMA
    assert argv[argv.index("--model") + 1] == "haiku"
    assert call["stdin"].startswith("You pick memories.")
    assert call["stdin"].endswith("Task: fix the deploy")
    assert call["memdir_llm"] == "none"
    usage = ledger.usage(DAY)
    assert (usage.calls, usage.failures, usage.input_tokens, usage.output_tokens) == (
        1, 0, 1000, 15)
    assert warnings(caplog) == []


def test_claude_cli_result_text_and_a_command_with_arguments(fake_claude: Path) -> None:
    script(fake_claude, stdout=envelope(result=f"```json\n{GOOD}\n```"))
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(fake_claude))}"
    assert ask(claude_llm(command)) == {"selected_memories": ["m1", "m2"]}


@pytest.mark.parametrize(("behaviour", "said"), [
    ({"exit": 1, "stderr": "Error: Invalid API key"}, "failed (exit 1): Error: Invalid API key"),
    ({"exit": 1, "stdout": envelope(is_error=True, result="Credit balance is too low")},
     "failed (exit 1): Credit balance is too low"),
    ({"stdout": "Welcome to Claude Code!"}, "printed no JSON envelope: Welcome to Claude Code!"),
    ({"stdout": envelope(result="no json here", usage={"input_tokens": 5})},
     "reply is not JSON: 'no json here'"),
])
def test_claude_cli_failures(fake_claude: Path, ledger: Ledger,
                             caplog: pytest.LogCaptureFixture, behaviour: dict[str, Any],
                             said: str) -> None:
    script(fake_claude, **behaviour)
    assert ask(claude_llm(str(fake_claude), ledger)) is None
    [warning] = warnings(caplog)
    assert said in warning and "hint:" in warning
    assert ledger.usage(DAY).failures == 1


def test_claude_cli_timeout_kills_it(fake_claude: Path, caplog: pytest.LogCaptureFixture
                                     ) -> None:
    script(fake_claude, sleep=30, stdout=envelope(structured_output={"selected_memories": []}))
    started = time.monotonic()
    assert ask(claude_llm(str(fake_claude), timeout=0.8)) is None
    assert time.monotonic() - started < 2.5
    [warning] = warnings(caplog)
    assert "timed out after 0.8s" in warning
    pid = json.loads((fake_claude.parent / "claude-call.json").read_text())["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped


def test_claude_cli_missing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert ask(claude_llm(str(tmp_path / "no-such-claude"))) is None
    [warning] = warnings(caplog)
    assert "cannot run the claude command" in warning and "claude_command" in warning


# --------------------------------------------------------------------------------- settings

def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(textwrap.dedent(text))


def test_default_is_none_even_with_a_key_in_the_environment(home: Path) -> None:
    settings = llm_settings(home, {"ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": KEY})
    assert settings.provider == "none" and settings.api_key == ""
    assert make_provider(settings) is None
    assert not LLM.from_settings(settings, None).available


def test_config_file_settings(home: Path) -> None:
    write_config(home, """
        [llm]
        provider = "anthropic"
        timeout = 3
        daily_budget = 7
        api_key_env = "WORK_ANTHROPIC_KEY"
    """)
    settings = llm_settings(home, {"WORK_ANTHROPIC_KEY": KEY, "ANTHROPIC_API_KEY": "other"})
    assert settings == LLMSettings("anthropic", "claude-haiku-4-5", "", KEY, 3, 7, "claude",
                                   "WORK_ANTHROPIC_KEY")


def test_environment_overlays_the_config_file(home: Path) -> None:
    write_config(home, """
        [llm]
        provider = "openai"
        model = "gpt-4.1-mini"
        base_url = "http://10.0.0.5:8000/v1"
        daily_budget = 50
    """)
    assert llm_settings(home, {}).model == "gpt-4.1-mini"
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1", "OPENAI_API_KEY": KEY,
           "MEMDIR_LLM_BUDGET": "3"}
    settings = llm_settings(home, env)
    assert (settings.provider, settings.model, settings.base_url, settings.api_key,
            settings.daily_budget) == ("openai", "gpt-4.1-mini", "http://127.0.0.1:8080/v1",
                                       KEY, 3)
    # provider:model; only the first colon splits (Ollama model tags keep theirs)
    settings = llm_settings(home, {"MEMDIR_LLM": "openai:llama3:8b"})
    assert (settings.model, settings.base_url) == ("llama3:8b", "http://10.0.0.5:8000/v1")
    assert llm_settings(home, {"MEMDIR_LLM": "openai:a", "MEMDIR_LLM_MODEL": "b"}).model == "b"
    # Another provider: the file's model and URL belonged to the file's provider.
    settings = llm_settings(home, {"MEMDIR_LLM": "claude-cli", "OPENAI_BASE_URL": "http://x"})
    assert (settings.provider, settings.model, settings.base_url) == ("claude-cli", "haiku", "")
    assert llm_settings(home, {"MEMDIR_LLM": "none"}).provider == "none"


def test_settings_from_the_environment_end_to_end(scripted_llm: ScriptedServer, home: Path,
                                                  ledger: Ledger) -> None:
    env = {"MEMDIR_LLM": "openai:local-model", "OPENAI_BASE_URL": f"{scripted_llm.url}/v1",
           "OPENAI_API_KEY": KEY}
    scripted_llm.reply_openai(GOOD, prompt_tokens=3, completion_tokens=1)
    llm = LLM.from_settings(llm_settings(home, env), ledger)
    assert llm.available and llm.ask("s", "p", SCHEMA, purpose="recall")
    request = scripted_llm.requests[0]
    assert request.body["model"] == "local-model"
    assert request.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(("config", "env", "message", "hint"), [
    ('provider = "gpt"', {}, "provider = 'gpt' in", "anthropic, openai, claude-cli, none"),
    ("", {"MEMDIR_LLM": "chatgpt"}, "in the MEMDIR_LLM variable", "claude-cli"),
    ("daily_budget = -1", {}, "daily_budget = -1 in", "a whole number >= 0"),
    ("daily_budget = 2.5", {}, "daily_budget = 2.5", "a whole number >= 0"),
    ("", {"MEMDIR_LLM_BUDGET": "lots"}, "'lots' in MEMDIR_LLM_BUDGET", "a whole number"),
    ('timeout = "soon"', {}, "timeout = 'soon'", "a number of seconds > 0"),
    ("timeout = true", {}, "timeout = True", "a number of seconds > 0"),
    ("timeout = 0", {}, "timeout = 0", "a number of seconds > 0"),
    ('base_url = "localhost:8080"', {}, "base_url = 'localhost:8080'", "http://"),
    ("daily_budgett = 5", {}, "unknown [llm] setting(s) daily_budgett", "daily_budget"),
    (f'api_key = "{KEY}"', {}, "contains an API key", "api_key_env"),
    ("model = 5", {}, "model = 5", "a string"),
])
def test_bad_settings_are_config_errors_with_a_hint(home: Path, config: str,
                                                    env: dict[str, str], message: str,
                                                    hint: str) -> None:
    write_config(home, f"[llm]\n{config}\n")
    with pytest.raises(ConfigError) as caught:
        llm_settings(home, env)
    assert message in caught.value.message
    assert hint in caught.value.hint
    if "MEMDIR_LLM" not in message:
        assert str(home / "config.toml") in caught.value.message
    assert KEY not in str(caught.value)


def test_llm_must_be_a_table(home: Path) -> None:
    write_config(home, 'llm = "anthropic"\n')
    with pytest.raises(ConfigError, match=r"\[llm\] in .* must be a table"):
        llm_settings(home, {})


def test_api_key_is_never_in_repr(home: Path) -> None:
    settings = llm_settings(home, {"MEMDIR_LLM": "anthropic", "ANTHROPIC_API_KEY": KEY})
    assert settings.api_key == KEY
    assert KEY not in repr(settings) and KEY not in str(settings)
    assert "ANTHROPIC_API_KEY" in repr(settings)  # the variable's name is fine to show


def test_llm_error_is_a_memdir_error_with_a_hint() -> None:
    error = LLMError("boom")
    assert error.code == "llm_error" and "MEMDIR_LLM=none" in error.hint


# ----------------------------------------------------------------------- reply parsing

@pytest.mark.parametrize(("text", "value"), [
    ('{"a": 1}', {"a": 1}),
    ("  [1, 2]\n", [1, 2]),
    ('```json\n{"a": [1]}\n```', {"a": [1]}),
    ('```\n["x"]\n```', ["x"]),
    ('Answer: {"a": {"b": "}"}} and more {"c": 2}', {"a": {"b": "}"}}),
    ("I'd say [skip] this: [3]", [3]),
    ('"just a string"', "just a string"),
])
def test_parse_json_reply(text: str, value: Any) -> None:
    assert parse_json_reply(text) == value


@pytest.mark.parametrize("text", ["", "no json", "{broken", "[1, 2"])
def test_parse_json_reply_fails(text: str) -> None:
    with pytest.raises(ValueError):
        parse_json_reply(text)


@pytest.mark.parametrize(("data", "schema", "ok"), [
    ({"a": 1}, {"type": "object", "required": ["a"]}, True),
    ({}, {"type": "object", "required": ["a"]}, False),
    ({"a": True}, {"type": "object", "properties": {"a": {"type": "integer"}}}, False),
    ({"a": 2}, {"type": "object", "properties": {"a": {"type": ["string", "integer"]}}}, True),
    ({"a": 2.5}, {"type": "object", "properties": {"a": {"type": "number"}}}, True),
    ([1], {"type": "array"}, True),
    ({"a": 1}, {"type": "array"}, False),
    ("x", {}, True),  # no type constraint
])
def test_shape_problem(data: Any, schema: dict[str, Any], ok: bool) -> None:
    assert (shape_problem(data, schema) is None) is ok


# --------------------------------------------------------------- the real local model

PICK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"selected_memories": {
        "type": "array", "items": {"type": "string", "enum": ["m1", "m2", "m3"]},
        "maxItems": 3}},
    "required": ["selected_memories"],
}
PICK_PROMPT = ("Task: fix the failing deploy.\nMemories:\nm1: deployments go through ArgoCD\n"
               "m2: the user prefers pnpm\nm3: staging is read-only on Fridays")


@pytest.mark.llm
def test_real_model_answers_in_the_schema(local_llm: LLMSettings, ledger: Ledger,
                                          caplog: pytest.LogCaptureFixture) -> None:
    llm = LLM.from_settings(local_llm, ledger)
    data = llm.ask("Select the memories relevant to the task.", PICK_PROMPT, PICK_SCHEMA,
                   purpose="recall", max_tokens=128)
    assert isinstance(data, dict), warnings(caplog)
    assert set(data["selected_memories"]) <= {"m1", "m2", "m3"}
    usage = ledger.usage(datetime.now().date().isoformat())
    assert (usage.calls, usage.failures) == (1, 0)
    assert usage.input_tokens > 0 and usage.output_tokens > 0


@pytest.mark.llm
def test_real_model_cut_off_is_none_and_counted(local_llm: LLMSettings, ledger: Ledger,
                                                caplog: pytest.LogCaptureFixture) -> None:
    llm = LLM.from_settings(local_llm, ledger)
    assert llm.ask("Select the memories relevant to the task.", PICK_PROMPT, PICK_SCHEMA,
                   purpose="recall", max_tokens=3) is None
    [warning] = warnings(caplog)
    assert "cut off at max_tokens" in warning
    usage = ledger.usage(datetime.now().date().isoformat())
    assert (usage.calls, usage.failures) == (1, 1) and usage.output_tokens > 0
