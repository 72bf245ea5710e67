"""Reading agent transcripts, format by format, into :mod:`memdir.capture.transcript`'s message
model: Claude Code and Codex JSON lines, JSON message lists, plain text with speaker labels.

The invariants are the model's (see :mod:`memdir.capture.transcript`): a bad line or item is dropped
and counted in ``skipped``, known kinds without conversation are dropped uncounted, and
``InvalidMemoryError`` is raised only when nothing at all was understood.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from typing import Any, Literal

from memdir.capture.transcript import (
    FORMATS_HINT,
    TOOL_TEXT_LIMIT,
    Kind,
    Message,
    Role,
    Source,
    Transcript,
)
from memdir.core.errors import InvalidMemoryError

__all__ = ["line_source", "parse", "parse_items", "parse_lines"]

# The tool argument that says what a call does, in order of preference: "Bash: git status".
_MAIN_ARGS = ("command", "cmd", "file_path", "notebook_path", "pattern", "url", "query",
              "description", "prompt", "path")
_CLAUDE_IGNORED = {"system", "file-history-snapshot", "queue-operation", "progress"}
_CODEX_IGNORED = {"reasoning", "ghost_snapshot", "web_search_call"}
_CODEX_ITEMS = {"message", "function_call", "function_call_output", "custom_tool_call",
                "custom_tool_call_output", "local_shell_call"} | _CODEX_IGNORED
_ROLES: dict[str, Role | Literal["tool"]] = {
    "user": "user", "human": "user", "assistant": "assistant", "ai": "assistant",
    "model": "assistant", "system": "system", "developer": "system", "tool": "tool"}
_LINE = re.compile(r"[^\n]+")
_VISIBLE = re.compile(r"\S")
_SPEAKER = re.compile(r"^(user|human|assistant|ai|claude)[ \t]*:[ \t]?", re.I | re.M)


@dataclass
class _Builder:
    """Collects messages and counts while one input is read; ``done`` freezes the result."""

    messages: list[Message] = field(default_factory=list)
    skipped: int = 0
    understood: int = 0
    source: Source | None = None
    session_id: str = ""
    cwd: str = ""
    first_index: int = 0  # a stretch read from the middle of a file numbers on from here

    def add(self, role: Role, kind: Kind, text: str, **extra: Any) -> None:
        text = text.strip()
        if kind in ("text", "summary") and not text:
            return
        if kind in ("tool_use", "tool_result"):
            text = text[:TOOL_TEXT_LIMIT]
        self.messages.append(Message(role, text, self.first_index + len(self.messages), kind,
                                     **extra))

    def tool_use(self, name: Any, given: Any, **meta: Any) -> None:
        name = name if isinstance(name, str) and name else "tool"
        given = given if isinstance(given, Mapping) else {}
        self.add("assistant", "tool_use", _render_tool(name, given), tool_name=name,
                 tool_input=given, **meta)

    def note(self, source: Source, session_id: Any = "", cwd: Any = "") -> None:
        self.understood += 1
        self.source = self.source or source
        self.session_id = self.session_id or (session_id if isinstance(session_id, str) else "")
        self.cwd = self.cwd or (cwd if isinstance(cwd, str) else "")

    def done(self, source: Source) -> Transcript:
        if not self.understood and self.skipped:
            raise InvalidMemoryError(f"nothing usable in the transcript ({self.skipped} "
                                     "unusable lines or items)", FORMATS_HINT)
        return Transcript(tuple(self.messages), self.source or source, self.session_id,
                          self.cwd, self.skipped)


def _render_tool(name: str, given: Mapping[str, Any]) -> str:
    for key in _MAIN_ARGS:
        value = given.get(key)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            value = shlex.join(value)
        if isinstance(value, str) and value.strip() and "\n" not in value:
            return f"{name}: {value.strip()}"
        if value is not None:
            break  # the main argument is multi-line or odd: show everything, on one line
    compact = json.dumps(given, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"{name} {compact}" if given else name


def _loads(text: str) -> Any:
    """JSON value of ``text``, or None when it is not JSON (garbage, a truncated line)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    # Agents write UTC; a timestamp without an offset is read as UTC rather than local time.
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # text blocks; images and the like have no text to show
        texts = [b.get("text") if isinstance(b, Mapping) else b for b in content]
        return "\n".join(t for t in texts if isinstance(t, str))
    if isinstance(content, Mapping):
        return _result_text(content.get("content", content.get("output", "")))
    return ""


def _content(b: _Builder, role: Role, content: Any, meta: dict[str, Any]) -> bool:
    """Turn a string or a list of blocks into messages, in block order; False if wrong-typed."""
    if isinstance(content, str):
        b.add(role, "text", content, **meta)
        return True
    if not isinstance(content, list):
        return False
    texts: list[str] = []

    def flush() -> None:
        b.add(role, "text", "\n".join(texts), **meta)
        texts.clear()

    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if isinstance(block, str):
            texts.append(block)
        elif kind in ("text", "input_text", "output_text") and isinstance(block.get("text"), str):
            text = block["text"].strip()  # Claude Code adds reminders as blocks of their own
            if not (text.startswith("<system-reminder>") and text.endswith("</system-reminder>")):
                texts.append(text)
        elif kind == "tool_use" and isinstance(block, Mapping):
            flush()
            b.tool_use(block.get("name"), block.get("input"), **meta)
        elif kind == "tool_result" and isinstance(block, Mapping):
            flush()
            b.add("user", "tool_result", _result_text(block.get("content")),
                  is_error=block.get("is_error") is True, **meta)
        # thinking, redacted_thinking, image, document: nothing a person would read here
    flush()
    return True


def _claude(b: _Builder, line: Mapping[str, Any]) -> None:
    kind, message = line.get("type"), line.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    meta = {"timestamp": _when(line.get("timestamp")),
            "uuid": line["uuid"] if isinstance(line.get("uuid"), str) else "",
            "sidechain": line.get("isSidechain") is True}
    if kind == "summary" and isinstance(line.get("summary"), str):
        b.add("system", "summary", line["summary"], **meta)
    elif kind in ("user", "assistant") and isinstance(content, str | list):
        if line.get("isCompactSummary") is True:
            b.add("system", "summary", _result_text(content), **meta)
        elif line.get("isMeta") is not True:  # meta lines: caveats the agent adds, not chat
            _content(b, "user" if kind == "user" else "assistant", content, meta)
    elif kind not in _CLAUDE_IGNORED:  # unknown, or a summary/message line of the wrong shape
        b.skipped += 1
        return
    b.note("claude-code", line.get("sessionId"), line.get("cwd"))


def _codex_output(output: Any) -> tuple[str, bool]:
    # Shell output is often a JSON string: {"output": ..., "metadata": {"exit_code": ...}}.
    decoded = _loads(output) if isinstance(output, str) and output.startswith("{") else None
    if isinstance(decoded, Mapping) and isinstance(decoded.get("output"), str):
        metadata = decoded.get("metadata")
        code = metadata.get("exit_code") if isinstance(metadata, Mapping) else None
        return decoded["output"], isinstance(code, int) and code != 0
    if isinstance(output, Mapping) and isinstance(output.get("success"), bool):
        return _result_text(output), not output["success"]
    return _result_text(output), False


def _codex_item(b: _Builder, item: Mapping[str, Any], when: datetime | None) -> bool:
    """One Codex response item (inside an envelope or bare); False if it was not usable."""
    kind, meta = item.get("type"), {"timestamp": when}
    if kind == "message":
        role = _ROLES.get(str(item.get("role")))
        return role is not None and role != "tool" and _content(b, role, item.get("content"),
                                                                meta)
    if kind == "function_call":
        args = item.get("arguments")
        given = _loads(args) if isinstance(args, str) else args
        b.tool_use(item.get("name"), given if isinstance(given, Mapping) else
                   {"arguments": args}, **meta)
    elif kind == "custom_tool_call":
        b.tool_use(item.get("name"), {"input": item.get("input")}, **meta)
    elif kind == "local_shell_call":
        b.tool_use("local_shell", item.get("action"), **meta)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        text, failed = _codex_output(item.get("output"))
        b.add("user", "tool_result", text, is_error=failed, **meta)
    else:
        return kind in _CODEX_IGNORED
    return True


def _codex(b: _Builder, line: Mapping[str, Any]) -> None:
    kind, when, payload = line.get("type"), _when(line.get("timestamp")), line.get("payload")
    if kind in _CODEX_ITEMS:  # older logs: bare items without the envelope
        usable, payload = _codex_item(b, line, when), {}
    elif not isinstance(payload, Mapping):
        usable, payload = False, {}
    elif kind == "response_item":
        usable, payload = _codex_item(b, payload, when), {}
    elif kind == "compacted" and isinstance(payload.get("message"), str):
        usable = True
        b.add("system", "summary", payload["message"], timestamp=when)
    else:  # session_meta and turn_context hold the id and cwd; event_msg repeats the items
        usable = kind in ("session_meta", "turn_context", "event_msg")
    if not usable:
        b.skipped += 1
        return
    b.note("codex", payload.get("id") if kind == "session_meta" else "", payload.get("cwd"))


def _chat_item(b: _Builder, item: Any) -> None:
    """One ``{role, content}`` item of a JSON list (or a JSON line of that shape)."""
    if isinstance(item, Mapping) and "role" not in item and "type" in item:
        _line(b, item)  # a Claude Code or Codex line inside a list
        return
    role = _ROLES.get(str(item.get("role")).lower()) if isinstance(item, Mapping) else None
    if role is None or not isinstance(item, Mapping):
        b.skipped += 1
        return
    meta, content = {"timestamp": _when(item.get("timestamp"))}, item.get("content")
    if role == "tool" and isinstance(content, str | list):  # OpenAI chat: a tool's result
        b.add("user", "tool_result", _result_text(content), **meta)
    elif role == "tool" or not _content(b, role, content, meta):
        b.skipped += 1
        return
    b.note("json")


def _line(b: _Builder, obj: Any) -> None:
    if not isinstance(obj, Mapping):
        b.skipped += 1
    elif "payload" in obj or obj.get("type") in _CODEX_ITEMS:
        _codex(b, obj)
    elif "record_type" in obj or ("type" not in obj and "id" in obj and "timestamp" in obj):
        b.note("codex", obj.get("id"))  # older Codex: a bare session header and state lines
    elif "type" in obj:
        _claude(b, obj)
    else:
        _chat_item(b, obj)


def _split(text: str) -> Iterator[str]:
    """Non-blank lines one at a time (never a list of a large file's lines), cut at "\\n"."""
    return (line for m in _LINE.finditer(text) if (line := m[0].rstrip("\r")).strip())


def _parse_jsonl(text: str) -> Transcript:
    b = _Builder()
    for line in _split(text):
        _line(b, _loads(line))  # garbage and a truncated last line are not objects
    return b.done("claude-code")


def parse_lines(lines: Iterable[str], *, first_index: int = 0,
                source: Source = "claude-code") -> Transcript:
    """JSON lines one at a time (a file streamed, never held whole); messages are numbered
    from ``first_index``. Unlike :func:`parse`, a stretch of which nothing was understood is
    an empty transcript (its lines counted in ``skipped``), not an error: a window read from
    the middle of a file may hold only lines of kinds that carry no conversation."""
    b = _Builder(first_index=first_index)
    for line in lines:
        if line.strip():
            _line(b, _loads(line))
    return Transcript(tuple(b.messages), b.source or source, b.session_id, b.cwd, b.skipped)


def line_source(line: str) -> Source | None:
    """The format one JSON line is written in ("claude-code", "codex", "json"), or None
    when it is not a line of any accepted format (not JSON, not an object, unknown kind)."""
    b = _Builder()
    _line(b, _loads(line))
    return b.source if b.understood else None


def parse_items(items: Sequence[Any]) -> Transcript:
    """A JSON list of ``{role, content}`` messages (or Claude Code / Codex line objects)."""
    b = _Builder()
    for item in items:
        _chat_item(b, item)
    return b.done("json")


def _parse_plain(text: str) -> Transcript:
    b = _Builder()
    # [text before the first speaker, speaker, text, speaker, text...]
    parts = _SPEAKER.split(text.replace("\r\n", "\n").replace("\r", "\n"))
    b.add("user", "text", parts[0])
    for speaker, said in zip(parts[1::2], parts[2::2], strict=True):
        b.add("user" if speaker.lower() in ("user", "human") else "assistant", "text", said)
    b.note("text")
    return b.done("text")


def parse(text: str, suffix: str = "") -> Transcript:
    """Any accepted format, found from the content (``suffix``: the file's, if any)."""
    text = text.removeprefix("\ufeff").replace("\x00", "\ufffd")  # no copy when no NUL
    first = _VISIBLE.search(text)  # not text.lstrip(): that would copy a large file
    if first is None:
        return Transcript((), "text")
    if suffix == ".jsonl":
        return _parse_jsonl(text)
    one_line = isinstance(_loads(next(_split(text))), dict)
    if suffix == ".json" or (first[0] in "[{" and not one_line):
        doc = _loads(text)
        if isinstance(doc, Mapping) and isinstance(doc.get("messages"), list):
            doc = doc["messages"]
        if isinstance(doc, list | Mapping):  # a list, or one pretty-printed message
            return parse_items(doc if isinstance(doc, list) else [doc])
        if suffix == ".json":
            return _parse_jsonl(text)  # JSON lines in a .json file, or a broken document
    if any(isinstance(_loads(line), dict) for line in islice(_split(text), 10)):
        return _parse_jsonl(text)
    return _parse_plain(text)
