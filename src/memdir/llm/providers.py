"""The LLM providers: Anthropic Messages API, OpenAI-compatible chat completions, ``claude`` CLI.

Each turns (system, prompt, JSON schema) into a :class:`~memdir.llm.client.Completion` or raises
:class:`~memdir.llm.client.LLMError` with a hint. Only the standard library is used (``urllib``,
``json``, ``subprocess``): no SDK, no framework, nothing heavy on the hook start path.

Invariants:
- No retries, except once without ``response_format`` for OpenAI-compatible servers that
  reject it: hooks have tight time limits, and :class:`~memdir.llm.client.LLM` falls back anyway.
- The API key is sent only in its header and is redacted from every error message (some
  servers echo part of a rejected key).
- ``timeout`` bounds every network wait (connect, each read) and the whole CLI run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import urllib.error
import urllib.request
from typing import Any

from memdir.llm.client import Completion, LLMError, LLMSettings

__all__ = ["AnthropicProvider", "ClaudeCLIProvider", "OpenAIProvider", "build",
           "parse_json_reply"]

ANTHROPIC_URL = "https://api.anthropic.com"
OPENAI_URL = "https://api.openai.com/v1"
_FALLBACK = "memdir falls back to ranked search meanwhile"


def schema_instruction(system: str, schema: dict[str, Any]) -> str:
    # The schema goes into the system prompt for every provider: Anthropic has no JSON mode,
    # and OpenAI-compatible servers without response_format support still get told.
    return (f"{system}\n\nReply with only a JSON value matching this JSON schema, no prose:\n"
            f"{json.dumps(schema, separators=(',', ':'))}")


def parse_json_reply(text: str) -> Any:
    """The JSON value in a model's reply: the whole text, or inside ``` fences, or the first
    ``{...}``/``[...]`` that parses amid prose. Raises ValueError when there is none."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    for start, char in enumerate(stripped):
        if char in "{[":
            try:
                return decoder.raw_decode(stripped, start)[0]
            except ValueError:
                continue
    raise ValueError("no JSON value in the reply")


class _StatusError(LLMError):
    """An HTTP error status, with the server's full answer for the response_format retry."""

    def __init__(self, message: str, hint: str, status: int, detail: str) -> None:
        super().__init__(message, hint)
        self.status = status
        self.detail = detail


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _snippet(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


class _HTTPProvider:
    name = "http"
    key_env = ""

    def __init__(self, settings: LLMSettings, default_url: str) -> None:
        self.model = settings.effective_model
        self.base_url = (settings.base_url or default_url).rstrip("/")
        self.timeout = settings.timeout
        self._key = settings.api_key
        self.key_env = settings.api_key_env or self.key_env

    def _redact(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def _error(self, message: str, hint: str, tokens: tuple[int, int] = (0, 0)) -> LLMError:
        return LLMError(self._redact(message), self._redact(hint), input_tokens=tokens[0],
                        output_tokens=tokens[1])

    def _post(self, url: str, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
        """POST JSON, return the JSON object answered; LLMError for every failure."""
        request = urllib.request.Request(
            url, data=json.dumps(body).encode(), method="POST",
            headers={"content-type": "application/json", "accept": "application/json",
                     **headers})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            with contextlib.closing(exc):  # holds the socket: unclosed it leaks a warning
                try:
                    detail = self._redact(exc.read().decode("utf-8", "replace"))
                except OSError:  # the error body itself timed out or was cut
                    detail = ""
            error = self._status_error(exc.code, detail, url)
            raise _StatusError(error.message, error.hint, exc.code, detail) from None
        except TimeoutError:
            raise self._timeout_error(url) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise self._timeout_error(url) from None
            raise self._error(f"cannot reach {url}: {exc.reason}",
                              "check that the server is running and the [llm] base_url "
                              f"(or OPENAI_BASE_URL); {_FALLBACK}") from None
        except OSError as exc:  # a reset connection, a refused write, ...
            raise self._error(f"connection to {url} failed: {exc}",
                              f"check the network and the [llm] base_url; {_FALLBACK}") from None
        try:
            answer = json.loads(raw)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise self._error(f"{url} did not answer with a JSON object: "
                              f"{_snippet(raw.decode('utf-8', 'replace'))!r}",
                              "check that [llm] base_url points at the API itself")
        return answer

    def _timeout_error(self, url: str) -> LLMError:
        return self._error(f"{self.name} timed out after {self.timeout:g}s ({url})",
                           "raise [llm] timeout in $MEMDIR_HOME/config.toml or use a faster "
                           f"model; {_FALLBACK}")

    def _status_error(self, status: int, detail: str, url: str) -> LLMError:
        if status in (401, 403):  # no detail: some servers echo part of the rejected key
            where = f"${self.key_env}" if self.key_env else "the API key variable"
            return self._error(f"{self.name} refused the API key (HTTP {status})",
                               f"check the API key env var {where} (or set [llm] api_key_env "
                               "to the variable that holds it)")
        if status == 429:
            return self._error(f"{self.name} rate limited the call (HTTP 429)",
                               "lower memdir's usage ([llm] daily_budget) or raise the "
                               f"provider's rate limit; {_FALLBACK}")
        if status >= 500:
            return self._error(f"{self.name} provider error (HTTP {status}): {_snippet(detail)}",
                               f"the provider has a problem, try again later; {_FALLBACK}")
        return self._error(f"{self.name} rejected the request (HTTP {status}) at {url}: "
                           f"{_snippet(detail)}",
                           "check [llm] model and base_url in $MEMDIR_HOME/config.toml")

    def _parse(self, text: str, truncated: bool, tokens: tuple[int, int]) -> Completion:
        try:
            return Completion(parse_json_reply(text), *tokens)
        except ValueError:
            hint = ("the reply was cut off at max_tokens; ask for less" if truncated else
                    "the model did not answer in JSON; use a stronger model ([llm] model)")
            raise self._error(f"{self.name} reply is not JSON: {_snippet(text, 80)!r}",
                              hint, tokens) from None


class AnthropicProvider(_HTTPProvider):
    name = "anthropic"
    key_env = "ANTHROPIC_API_KEY"

    def __init__(self, settings: LLMSettings) -> None:
        super().__init__(settings, ANTHROPIC_URL)

    def complete_json(self, system: str, prompt: str, schema: dict[str, Any], *,
                      max_tokens: int = 512) -> Completion:
        if not self._key:
            raise LLMError(f"no API key for anthropic: ${self.key_env} is not set",
                           f"export {self.key_env}=... or choose another provider with "
                           "MEMDIR_LLM / [llm] provider")
        answer = self._post(
            f"{self.base_url}/v1/messages",
            {"x-api-key": self._key, "anthropic-version": "2023-06-01"},
            {"model": self.model, "max_tokens": max_tokens,
             "system": schema_instruction(system, schema),
             "messages": [{"role": "user", "content": prompt}]})
        content = answer.get("content")
        texts = [block.get("text") for block in content if isinstance(block, dict)
                 and block.get("type") == "text"] if isinstance(content, list) else []
        if not texts or not isinstance(texts[0], str):
            raise self._error(f"anthropic answered without a text block: "
                              f"{_snippet(json.dumps(answer))!r}",
                              "check [llm] model; the API may have changed")
        usage = _dict(answer.get("usage"))
        return self._parse(texts[0], answer.get("stop_reason") == "max_tokens",
                           (_int(usage.get("input_tokens")), _int(usage.get("output_tokens"))))


class OpenAIProvider(_HTTPProvider):
    name = "openai"
    key_env = "OPENAI_API_KEY"

    def __init__(self, settings: LLMSettings) -> None:
        super().__init__(settings, OPENAI_URL)

    def complete_json(self, system: str, prompt: str, schema: dict[str, Any], *,
                      max_tokens: int = 512) -> Completion:
        # No key is fine: local servers (llama.cpp, Ollama, vLLM) usually need none.
        headers = {"authorization": f"Bearer {self._key}"} if self._key else {}
        body: dict[str, Any] = {
            "model": self.model, "max_tokens": max_tokens, "temperature": 0,
            "messages": [{"role": "system", "content": schema_instruction(system, schema)},
                         {"role": "user", "content": prompt}],
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "memdir", "schema": schema}},
        }
        url = f"{self.base_url}/chat/completions"
        try:
            answer = self._post(url, headers, body)
        except _StatusError as exc:
            # Some servers reject response_format: retry once without (the schema is in the
            # system prompt too). Any other failure is final.
            said = exc.detail.lower()
            if exc.status not in (400, 422) or not ("response_format" in said or
                                                    "json_schema" in said):
                raise
            del body["response_format"]
            answer = self._post(url, headers, body)
        choices = answer.get("choices")
        choice = _dict(choices[0]) if isinstance(choices, list) and choices else {}
        text = _dict(choice.get("message")).get("content")
        if not isinstance(text, str):
            raise self._error(f"openai-compatible server answered without a message: "
                              f"{_snippet(json.dumps(answer))!r}",
                              "check [llm] base_url and model")
        usage = _dict(answer.get("usage"))
        return self._parse(text, choice.get("finish_reason") == "length",
                           (_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens"))))


class ClaudeCLIProvider:
    """``claude --bare -p``: uses Claude Code's own login. ``--bare`` skips hooks, so the
    call cannot recurse into memdir's hooks; ``MEMDIR_LLM=none`` in its environment makes
    sure a memdir started anyway inside it makes no LLM call."""

    name = "claude-cli"

    def __init__(self, settings: LLMSettings) -> None:
        self.command = shlex.split(settings.claude_command) or ["claude"]
        self.model = settings.effective_model
        self.timeout = settings.timeout

    def complete_json(self, system: str, prompt: str, schema: dict[str, Any], *,
                      max_tokens: int = 512) -> Completion:
        # max_tokens: the CLI has no such flag; the schema keeps replies short.
        argv = [*self.command, "--bare", "-p", "--output-format", "json",
                "--json-schema", json.dumps(schema), "--model", self.model]
        shown = shlex.join(self.command)
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, env={**os.environ, "MEMDIR_LLM": "none"},
                start_new_session=True)  # its own process group: a timeout kills all of it
        except OSError as exc:
            raise LLMError(f"cannot run the claude command {shown!r}: {exc.strerror or exc}",
                           "install Claude Code (https://claude.com/claude-code) or set "
                           "[llm] claude_command in $MEMDIR_HOME/config.toml to its path") from None
        with proc:
            try:
                out, err = proc.communicate(schema_instruction(system, schema) + "\n\n" + prompt,
                                            timeout=self.timeout)
            except subprocess.TimeoutExpired:
                self._kill(proc)
                proc.communicate()
                raise LLMError(f"claude-cli timed out after {self.timeout:g}s",
                               "raise [llm] timeout in $MEMDIR_HOME/config.toml; "
                               f"{_FALLBACK}") from None
        try:
            envelope = json.loads(out)
        except ValueError:
            envelope = None
        usage = _dict(envelope.get("usage") if isinstance(envelope, dict) else None)
        # Cached prompt tokens are still tokens read: count all three kinds as input.
        tokens = {"input_tokens": sum([_int(usage.get(k)) for k in (
                      "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]),
                  "output_tokens": _int(usage.get("output_tokens"))}
        if not isinstance(envelope, dict):
            detail = _snippet(err or out or "no output")
            if proc.returncode == 0:
                raise LLMError(f"{shown} printed no JSON envelope: {detail}",
                               "check that [llm] claude_command runs Claude Code and that it "
                               "is recent enough for --output-format json (`claude update`)")
            envelope = {"result": detail}
        if proc.returncode != 0 or envelope.get("is_error"):
            # A failure inside the run (no login, no credit) is the envelope's result.
            detail = _snippet(str(envelope.get("result") or err or "no output"))
            raise LLMError(f"{shown} failed (exit {proc.returncode}): {detail}",
                           f"run `{shown} --bare -p hello` yourself to see why (--bare needs "
                           "ANTHROPIC_API_KEY in the environment); or choose another provider",
                           **tokens)
        if envelope.get("structured_output") is not None:
            return Completion(envelope["structured_output"], **tokens)
        text = str(envelope.get("result", ""))
        try:
            return Completion(parse_json_reply(text), **tokens)
        except ValueError:
            raise LLMError(f"claude-cli reply is not JSON: {_snippet(text, 80)!r}",
                           "check that the installed Claude Code supports --json-schema "
                           "(`claude update`)", **tokens) from None

    @staticmethod
    def _kill(proc: subprocess.Popen[str]) -> None:
        killpg = getattr(os, "killpg", None)  # POSIX only
        try:
            if killpg is not None:
                killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except ProcessLookupError:
            pass


def build(settings: LLMSettings) -> AnthropicProvider | OpenAIProvider | ClaudeCLIProvider:
    if settings.provider == "anthropic":
        return AnthropicProvider(settings)
    if settings.provider == "openai":
        return OpenAIProvider(settings)
    return ClaudeCLIProvider(settings)
