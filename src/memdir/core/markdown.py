"""The memory file format: YAML frontmatter between '---' lines, then the Markdown body.

Invariants:
- ``parse(render(m))`` equals ``m`` for every memory whose body is already stripped
  (checked by a hypothesis round-trip test).
- Unknown frontmatter keys are kept in ``Memory.meta`` and written back unchanged.
- ``context:`` (search context) is one line of at most ``MAX_CONTEXT`` characters: a hand
  edit that spans lines or runs longer is folded and cut when read (:func:`bound_context`);
  ``date:`` is a day (``2026-03-05``), written only when set.
- Parsing never modifies the file; a file that cannot be parsed raises
  :class:`MemoryFileError` with the reason, and callers report and skip it.
- Rendering is a small hand-written emitter for the known keys (fast: bulk imports write
  thousands of files a second); values that are not plainly safe YAML are written as JSON
  strings, which YAML reads back exactly.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from memdir.core.errors import MemoryFileError
from memdir.core.model import (
    KNOWN_KEYS,
    MAX_META_DEPTH,
    RELEVANCE_WORDS,
    Memory,
    Scope,
    bound_context,
    format_time,
    meta_depth,
    parse_time,
)

__all__ = ["parse", "parse_relevance", "render", "split_frontmatter"]


_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9 _./()'+-]*\Z")
# Characters YAML does not accept raw (non-printable) or reads as line breaks.
_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]")
_CLOSING = re.compile(r"\r?\n---(?:\r?\n|\Z)")
_YAML_WORDS = frozenset(
    ["y", "yes", "n", "no", "true", "false", "on", "off", "null", "none", "~"]
)


def split_frontmatter(text: str) -> tuple[str, str]:
    """Split a file into (frontmatter text, body). Raises MemoryFileError without one."""
    if text.startswith("\ufeff"):
        text = text[1:]
    opening = re.match(r"---\r?\n", text)
    if not opening:
        raise MemoryFileError("no frontmatter: the file must start with a '---' line")
    closing = _CLOSING.search(text, 3)
    if closing is None:
        raise MemoryFileError("unterminated frontmatter: no closing '---' line")
    front = text[opening.end() : closing.start()].replace("\r\n", "\n") + "\n"
    return front, text[closing.end() :]


def parse_relevance(value: object) -> float:
    """A relevance from a number or a word (critical/high/medium/normal/low)."""
    if isinstance(value, bool):
        raise ValueError("relevance must be a number from 0.0 to 1.0 or a word")
    if isinstance(value, str):
        word = value.strip().lower()
        if word in RELEVANCE_WORDS:
            return RELEVANCE_WORDS[word]
        try:
            value = float(word)
        except ValueError:
            raise ValueError(
                f"relevance {value!r} is not a number from 0.0 to 1.0 nor one of "
                f"{', '.join(RELEVANCE_WORDS)}"
            ) from None
    if not isinstance(value, int | float) or math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"relevance {value!r} must be between 0.0 and 1.0")
    return float(value)


def _str_list(value: object, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value if v is not None and str(v) != "")
    raise MemoryFileError(f"{key!r} must be a list of strings, not {type(value).__name__}")


_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*): (.*)\Z")
_INT = re.compile(r"(?:0|[1-9][0-9]*)\Z")
_FLOAT = re.compile(r"(?:0|[1-9][0-9]*)\.[0-9]+\Z")
_STAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z\Z")
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
_ITEM = re.compile(r'\s*("(?:[^"\\]|\\.)*"|[^,\[\]"]*?)\s*(,|\Z)')


class _NotSimpleError(Exception):
    """The frontmatter uses YAML beyond what :func:`_simple_scalar` reads; use PyYAML."""


def _simple_scalar(text: str, key: str) -> object:
    """One value the way YAML would read it, for the shapes memdir itself writes."""
    if text.startswith('"'):
        try:
            value = json.loads(text)  # a JSON string is a YAML double-quoted scalar
        except ValueError:
            raise _NotSimpleError from None
        if not isinstance(value, str):
            raise _NotSimpleError
        return value
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    if key in ("created", "updated") and _STAMP.match(text):
        return text  # parse_time reads it; only for keys memdir owns
    if key == "date" and _DAY.match(text):
        return text  # _day reads it
    if _PLAIN.match(text) and text.lower() not in _YAML_WORDS and not text.endswith(" "):
        return text
    raise _NotSimpleError


def _simple_frontmatter(front: str) -> dict[str, object]:
    """A fast reader for frontmatter as memdir writes it; raises _NotSimpleError for anything else.

    Reindexing thousands of files spends most of its time in YAML; memdir's own files are
    flat ``key: value`` lines with plain or JSON-quoted scalars and flow lists, which this
    reads exactly as YAML would. Anything it is unsure of goes to PyYAML instead.
    """
    data: dict[str, object] = {}
    for line in front.split("\n"):
        if not line:
            continue
        match = _KEY_LINE.match(line)
        if match is None:
            raise _NotSimpleError
        key, value = match.group(1), match.group(2)
        if value.startswith("["):
            if not value.endswith("]"):
                raise _NotSimpleError
            inner, items, pos = value[1:-1], [], 0
            while pos < len(inner):
                item = _ITEM.match(inner, pos)
                if item is None or item.end() == pos:
                    raise _NotSimpleError
                items.append(_simple_scalar(item.group(1), key))
                pos = item.end()
            data[key] = items
        else:
            data[key] = _simple_scalar(value, key)
    return data


def _load_frontmatter(front: str) -> object:
    try:
        return _simple_frontmatter(front)
    except _NotSimpleError:
        pass
    import yaml  # here, not at the top: a command that parses nothing never pays for it

    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return yaml.load(front, Loader=loader) if front.strip() else {}
    except RecursionError:
        raise MemoryFileError("frontmatter nests too deeply to read",
                              "flatten the deeply nested value") from None
    except yaml.YAMLError as exc:
        raise MemoryFileError(f"invalid YAML in frontmatter: {exc}".replace("\n", " ")) from None


def _odd_key(meta: Mapping[str, Any]) -> object | None:
    """The first mapping key, at any depth, that is not text, a number or a boolean."""
    stack: list[Any] = [meta]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, value in item.items():
                if not isinstance(key, str | int | float | bool):
                    odd: object = key
                    return odd
                stack.append(value)
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return None


def _day(value: object) -> dt.date | None:
    """The ``date:`` of a file: a day (YAML reads ``2026-03-05`` as one), or a timestamp's
    UTC day; MemoryFileError for anything else."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    parsed = parse_time(value)
    if parsed is None:
        raise MemoryFileError(f"'date' is not a date: {value!r}", "write it as YYYY-MM-DD")
    return parsed.astimezone(dt.UTC).date()


def _context(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, list | dict):
        raise MemoryFileError("'context' must be one line of text",
                              "write it as context: \"what was said before\"")
    return bound_context(str(value))


def parse(text: str, *, stem: str, scope: Scope = "project") -> Memory:
    """Parse a memory file. ``stem`` (the file name without .md) is the id when none is set."""
    front, body = split_frontmatter(text)
    data = _load_frontmatter(front)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise MemoryFileError("frontmatter must be a mapping of 'key: value' lines")
    mtype = data.get("type")
    if not isinstance(mtype, str) or not mtype.strip():
        raise MemoryFileError("frontmatter has no 'type'", "add a 'type:' line, e.g. 'type: fact'")
    body = body.strip()
    name = data.get("name")
    name = str(name).strip() if name is not None and str(name).strip() else stem
    desc = data.get("description")
    if desc is None or not str(desc).strip():
        desc = body.split("\n", 1)[0][:150] if body else name
    try:
        relevance = parse_relevance(data["relevance"]) if "relevance" in data else 0.9
    except ValueError as exc:
        raise MemoryFileError(str(exc)) from None
    created = parse_time(data.get("created"))
    updated = parse_time(data.get("updated"))
    if "created" in data and created is None:
        raise MemoryFileError(f"'created' is not a date/time: {data['created']!r}")
    reinforced = data.get("reinforced", 0)
    if not isinstance(reinforced, int) or isinstance(reinforced, bool) or reinforced < 0:
        raise MemoryFileError(f"'reinforced' must be a whole number >= 0, not {reinforced!r}")
    status = str(data.get("status") or "active")
    if status not in ("active", "archived"):
        raise MemoryFileError(f"'status' must be active or archived, not {status!r}")
    mid = data.get("id")
    superseded = data.get("superseded_by")
    meta = {k: v for k, v in data.items() if k not in KNOWN_KEYS}
    if meta_depth(meta) > MAX_META_DEPTH:
        raise MemoryFileError(
            f"frontmatter nests more than {MAX_META_DEPTH} levels deep",
            "flatten the deeply nested value (lists or mappings inside each other)")
    odd = _odd_key(meta)
    if odd is not None:  # YAML reads `2024-01-01:` as a date, which JSON (the index) cannot key
        raise MemoryFileError(
            f"frontmatter key {odd} is not text (YAML reads it as a {type(odd).__name__})",
            f"quote the key: '{odd}': ...")
    fields: dict[str, Any] = {
        "id": str(mid) if mid not in (None, "") else stem,
        "name": name,
        "description": str(desc).strip(),
        "type": mtype.strip().lower(),
        "body": body,
        "scope": scope,
        "relevance": relevance,
        "tags": _str_list(data.get("tags"), "tags"),
        "paths": _str_list(data.get("paths"), "paths"),
        "source": str(data.get("source") or "manual"),
        "reinforced": reinforced,
        "status": status,
        "superseded_by": str(superseded) if superseded else None,
        "meta": meta,
        "date": _day(data.get("date")),
        "context": _context(data.get("context")),
    }
    if created is not None:
        fields["created"] = created
    if updated is not None:
        fields["updated"] = updated
    elif created is not None:
        fields["updated"] = created
    return Memory(**fields)


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime):
        return format_time(value)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _YAML_WORDS and not text.endswith(" "):
        return text
    quoted = json.dumps(text, ensure_ascii=False)
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


def _flow(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(_scalar(v) for v in values) + "]"


def render(memory: Memory) -> str:
    """The file text for a memory: known keys in a fixed order, unknown keys after them."""
    lines = [
        "---",
        f"id: {_scalar(memory.id)}",
        f"name: {_scalar(memory.name)}",
        f"description: {_scalar(memory.description)}",
        f"type: {_scalar(memory.type)}",
        f"scope: {memory.scope}",
        f"relevance: {float(memory.relevance)!r}",
        f"tags: {_flow(memory.tags)}",
    ]
    if memory.paths:
        lines.append(f"paths: {_flow(memory.paths)}")
    lines += [
        f"source: {_scalar(memory.source)}",
        f"created: {format_time(memory.created)}",
        f"updated: {format_time(memory.updated)}",
        f"reinforced: {memory.reinforced}",
        f"status: {memory.status}",
    ]
    if memory.superseded_by:
        lines.append(f"superseded_by: {_scalar(memory.superseded_by)}")
    if memory.date:
        lines.append(f"date: {memory.date.isoformat()}")
    if memory.context:
        lines.append(f"context: {_scalar(bound_context(memory.context))}")
    if memory.meta:
        lines.append(_render_meta(memory.meta).rstrip("\n"))
    lines.append("---")
    return "\n".join(lines) + "\n" + memory.body + "\n"


def _render_meta(meta: Mapping[str, Any]) -> str:
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    out: str = yaml.dump(
        dict(meta), Dumper=dumper, sort_keys=False, allow_unicode=True, width=10_000
    )
    return out
