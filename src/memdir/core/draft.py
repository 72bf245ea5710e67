"""Turning input into a memory that may be written: normalise, validate, make safe.

Every write path (store, store_many, update, import) builds its memory here, so the rules
hold everywhere: ``<private>`` spans stripped, secrets refused, relative dates made absolute,
the type resolved through the store's taxonomy (unknown -> error listing valid types),
relevance given as a number or a word and kept in [0, 1], meta keys that would shadow a known
field refused.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any, cast

from memdir.core.dates import absolutize_dates, anchor_day
from memdir.core.errors import InvalidMemoryError
from memdir.core.markdown import parse_relevance
from memdir.core.model import (
    KNOWN_KEYS,
    MAX_META_DEPTH,
    SOURCES,
    Memory,
    Scope,
    bound_context,
    meta_depth,
    meta_strings,
    parse_time,
)
from memdir.core.private import strip_private_data
from memdir.core.safety import check_secrets, strip_private
from memdir.core.taxonomy import Taxonomy

__all__ = [
    "MANUAL_RELEVANCE",
    "clean_text",
    "default_description",
    "default_name",
    "draft",
    "relevance_of",
    "revise",
    "tag_list",
]

MANUAL_RELEVANCE = 0.9  # seed 000: manually stored memories default to 0.9
MAX_NAME = 80
MAX_DESCRIPTION = 200
# Bytes of a body: half the cap at which a memory file is no longer read (safe_open), so the
# frontmatter always fits beside it.
MAX_BODY_BYTES = 512 * 1024


def clean_text(value: str, anchor: date | None) -> str:
    """``<private>`` stripped; relative dates made absolute unless ``anchor`` is None."""
    text = strip_private(value).replace("\r\n", "\n").replace("\r", "\n")
    return (absolutize_dates(text, anchor) if anchor is not None else text).strip()


def _text(value: object, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InvalidMemoryError(f"{what} must be text, not {value.__class__.__name__}",
                             f"give {what} as a string")


def _first_line(text: str, limit: int) -> str:
    line = next((ln.strip(" #*-") for ln in text.splitlines() if ln.strip(" #*-")), text)
    line = " ".join(line.split())
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0]
    # A parenthesis cut open is a date cut in two ("next week (2026-11-30 to…"): drop it whole.
    cut = re.sub(r"\s*\([^()]*$", "", cut)
    return (cut or line[:limit]).rstrip(" ,.;:") + "…"


def default_name(body: str) -> str:
    return _first_line(body, MAX_NAME)


def default_description(body: str) -> str:
    return _first_line(body, MAX_DESCRIPTION)


def tag_list(values: Iterable[str] | str | None, what: str = "tags") -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        values = values.split(",")
    if not isinstance(values, list | tuple | set | frozenset):
        raise InvalidMemoryError(f"{what} must be a list of strings, not "
                                 f"{values.__class__.__name__}", f"give {what} as a list")
    out: list[str] = []
    for value in values:
        if not isinstance(value, str):
            raise InvalidMemoryError(f"{what} must be strings, not {value!r}")
        item = " ".join(strip_private(value).split())
        if item and item not in out:
            out.append(item)
    return tuple(out)


def relevance_of(value: float | str | None, taxonomy: Taxonomy, type_name: str,
                 default: float = MANUAL_RELEVANCE) -> float:
    if value is None:
        spec = taxonomy.spec(type_name)
        return spec.relevance if spec.relevance is not None else default
    try:
        return parse_relevance(value)
    except ValueError as exc:
        raise InvalidMemoryError(
            str(exc), "give a number from 0.0 to 1.0 or critical/high/medium/normal/low"
        ) from None


def _meta(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    if not meta:
        return {}
    if meta_depth(meta) > MAX_META_DEPTH:
        raise InvalidMemoryError(f"meta nests more than {MAX_META_DEPTH} levels deep",
                                 "flatten the nested lists and mappings")
    # <private> parts go first, from keys and values alike (a key left empty goes with its
    # value): nothing below, the secret check included, sees them.
    meta = cast("dict[str, Any]", strip_private_data(meta))
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if not isinstance(key, str) or not key.strip():
            raise InvalidMemoryError(f"meta keys must be non-empty strings, not {key!r}")
        if key in KNOWN_KEYS:
            raise InvalidMemoryError(
                f"meta key {key!r} is a memory field",
                f"pass {key} as its own argument, not inside meta",
            )
        try:
            json.dumps(value, default=_no_default)
        except TypeError:
            raise InvalidMemoryError(
                f"meta value for {key!r} is not plain data: {value!r}",
                "use strings, numbers, booleans, lists and mappings",
            ) from None
        out[key] = value
    return out


def _no_default(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError


def _day(value: object) -> date | None:
    """A memory's ``date``: a date, a datetime (its UTC day) or ISO text; None when not given."""
    if value is None or value == "":
        return None
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    parsed = parse_time(value) if isinstance(value, str | datetime) else None
    if parsed is None:
        raise InvalidMemoryError(f"date {value!r} is not a date",
                                 "give the day as YYYY-MM-DD (e.g. 2026-03-05)")
    return parsed.astimezone(UTC).date()


def _check_text(texts: Sequence[str]) -> None:
    """Refuse secrets, and text that cannot be written as UTF-8 (lone surrogates: bytes that
    were not UTF-8, decoded with ``surrogateescape``, or a ``\ud800`` escape in JSON)."""
    for text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidMemoryError(
                f"text is not valid Unicode (a lone surrogate in {text[:40]!r})",
                "save the input as UTF-8 (or remove the undecodable bytes)") from None
    check_secrets(texts)


def draft(content: str, *, type: str, scope: Scope, taxonomy: Taxonomy, now: datetime,
          anchor: date | None, name: str | None = None, description: str | None = None,
          tags: Iterable[str] | str | None = (), paths: Iterable[str] | str | None = (),
          relevance: float | str | None = None, meta: Mapping[str, Any] | None = None,
          source: str = "manual", context: str | None = None,
          date: dt.date | dt.datetime | str | None = None) -> Memory:
    """A new, validated memory (no id or path yet: the store assigns them).

    ``anchor`` is the day relative dates are counted from; None leaves dates as written
    (imports: the text was already stored once). ``context`` (search context) is checked
    like the body (``<private>`` stripped, secrets refused) and kept as one line of at most
    ``MAX_CONTEXT`` characters, its relative dates as said (the words a question repeats;
    it is never shown); ``date`` is the day the memory is about.
    """
    content = _text(content, "content") or ""
    name, description = _text(name, "name"), _text(description, "description")
    context = _text(context, "context")
    if not isinstance(type, str):
        raise InvalidMemoryError("type must be text", f"use one of: {', '.join(taxonomy.names)}")
    canonical = taxonomy.resolve(type)
    if source not in SOURCES:
        raise InvalidMemoryError(f"unknown source {source!r}", f"use one of: {', '.join(SOURCES)}")
    body = clean_text(content, anchor)
    if not body:
        raise InvalidMemoryError(
            "the memory is empty (after removing <private> parts)",
            "give the text to remember, e.g. memdir store --type fact \"Prod runs Ubuntu 24.04\"",
        )
    if len(body) * 4 > MAX_BODY_BYTES and len(body.encode("utf-8")) > MAX_BODY_BYTES:
        raise InvalidMemoryError(
            f"the memory is {len(body.encode('utf-8')):,} bytes, over the {MAX_BODY_BYTES:,} "
            "a memory file may hold", "store a short note (the point, why, how to apply); "
            "keep long documents in the repository and refer to them")
    title = clean_text(name, anchor) if name else ""
    title = " ".join(title.split()) or default_name(body)
    desc = clean_text(description, anchor) if description else ""
    desc = " ".join(desc.split()) or default_description(body)
    memory = Memory(
        id="", name=title, description=desc, type=canonical, body=body, scope=scope,
        relevance=relevance_of(relevance, taxonomy, canonical),
        tags=tag_list(tags), paths=tag_list(paths, "paths"), source=source,
        created=now, updated=now, meta=_meta(meta), date=_day(date),
        context=bound_context(clean_text(context, None)) if context else "",
    )
    _check_text([memory.body, memory.name, memory.description, *memory.tags,
                 *memory.paths, *meta_strings(memory.meta), memory.context])
    return memory


def revise(current: Memory, *, taxonomy: Taxonomy, now: datetime, content: str | None = None,
           name: str | None = None, description: str | None = None,
           tags: Iterable[str] | None = None, paths: Iterable[str] | None = None,
           relevance: float | str | None = None, meta: Mapping[str, Any] | None = None,
           reinforce: bool = False) -> Memory:
    """``current`` with the given fields changed, validated as a new memory would be.

    Fields left as None keep their value; a name or description that was derived from the
    old body follows the new body."""
    keep_name = content is None or current.name != default_name(current.body)
    keep_desc = content is None or current.description != default_description(current.body)
    candidate = draft(
        content if content is not None else current.body, type=current.type,
        scope=current.scope, taxonomy=taxonomy, now=now, anchor=anchor_day(now),
        name=name if name is not None else (current.name if keep_name else None),
        description=description if description is not None else (
            current.description if keep_desc else None),
        tags=tag_list(tags) if tags is not None else current.tags,
        paths=tag_list(paths, "paths") if paths is not None else current.paths,
        relevance=relevance if relevance is not None else current.relevance,
        meta={**current.meta, **(meta or {})}, source=current.source)
    return current.replace(
        body=candidate.body, name=candidate.name, description=candidate.description,
        tags=candidate.tags, paths=candidate.paths, relevance=candidate.relevance,
        meta=candidate.meta, updated=now, reinforced=current.reinforced + (1 if reinforce else 0))
