"""The items of an import, read and validated in full before anything is written.

Readers turn a folder of Markdown files, one memory file, or JSON Lines into items, each with
where it came from (a file; a file and a line number): a JSON object, a parsed file, or the
:class:`MemdirError` (with its hint) that says why the item could not be read. One item that
cannot be read (not UTF-8, not JSON, nested too deeply, broken frontmatter) never stops the
others from being read.

:func:`validate` turns an item into a memory that can be written as it is, or raises
:class:`MemdirError` saying which field is wrong and how to fix it: the checks of ``store``
(:func:`memdir.core.draft.draft`), and those of what ``draft`` does not see (times that do not fit
in UTC, counters beyond the store's integers, ids that are not text, meta the index cannot
hold, what PostgreSQL refuses). A value that is present but invalid is an error, never
replaced by a default.
"""

from __future__ import annotations

import codecs
import json
import os
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memdir.core.draft import draft
from memdir.core.errors import InvalidMemoryError, MemdirError, MemoryFileError, UnsafeFileError
from memdir.core.files import INDEX_FILE
from memdir.core.markdown import parse
from memdir.core.meta_json import encode_meta
from memdir.core.model import SCOPES, STATUSES, Memory, Scope, meta_strings, parse_time
from memdir.core.safe_open import IMPORT_FILE, MEMORY_FILE, read_file
from memdir.core.safety import check_secrets
from memdir.core.taxonomy import Taxonomy

__all__ = ["Item", "read_items", "validate"]

# The largest reinforcement count each kind of store can hold: SQLite's INTEGER (a home's
# index) is 64-bit, PostgreSQL's ``integer`` column 32-bit.
_MAX_COUNT_HOME = 2**63 - 1
_MAX_COUNT_BULK = 2**31 - 1
_FIX_LINE = "write each memory as one JSON object on its own line, as `memdir export` does"


# -- reading ---------------------------------------------------------------------------------

# What a reader yields for each item, with where it came from: a JSON object (JSON Lines), a
# parsed file (a folder, or one .md file), or why the item could not be read (with a hint).
Item = dict[str, Any] | Memory | MemdirError


def read_items(src: str | Path) -> list[tuple[str, Item]]:
    """The items of ``src``: a folder (recursively), a .md file, a JSON Lines file, or '-'
    (JSON Lines on stdin)."""
    source = Path(src)
    if str(src) == "-":
        stdin: Any = sys.stdin
        data = stdin.buffer.read() if hasattr(stdin, "buffer") else \
            stdin.read().encode("utf-8", "surrogatepass")
        return list(_from_jsonl(data, "stdin"))
    if source.is_dir():
        return list(_from_folder(source))
    if source.is_file() and source.suffix.lower() == ".md":  # one memory file
        return [(str(source), _read_file(source, None, follow=True))]
    if source.exists() and not source.is_file():  # a FIFO or a device: never waited on
        raise InvalidMemoryError(f"{src} is not a regular file",
                                 "give a folder of .md files or a .jsonl file (or '-' to "
                                 "read JSON Lines from stdin)")
    if source.is_file():
        try:  # the path the user named: a symlink to it is followed, the size is capped
            data = read_file(source, IMPORT_FILE, follow=True)
        except UnsafeFileError as exc:
            raise InvalidMemoryError(exc.message, exc.hint) from None
        except OSError as exc:
            raise InvalidMemoryError(f"cannot read {src}: {exc.strerror or exc}",
                                     "check that the file exists and that you may read it"
                                     ) from None
        return list(_from_jsonl(data, source.name))
    raise InvalidMemoryError(f"nothing to import at {src}",
                             "give a folder of .md files or a .jsonl file")


def _from_folder(src: Path) -> Iterator[tuple[str, Memory | MemdirError]]:
    """Every ``*.md`` below ``src`` (a folder the user named, followed if it is a link);
    below it no symlink is followed: a linked file or folder is an item that says so."""
    for path in sorted(_markdown_below(src)):
        if path.name == INDEX_FILE or path.name.startswith("."):
            continue
        rel = path.relative_to(src)
        hinted = next((s for s in SCOPES if len(rel.parts) > 1 and rel.parts[0] == s), None)
        yield str(path), _read_file(path, hinted)


def _markdown_below(folder: Path) -> Iterator[Path]:
    """The ``*.md`` entries below ``folder`` that are not folders, without entering a
    symlinked folder (a symlink named ``*.md`` is yielded: reading it says what it is)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            real_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if real_dir:
            yield from _markdown_below(Path(entry.path))
        elif entry.name.endswith(".md"):
            yield Path(entry.path)


def _read_file(path: Path, hinted: Scope | None, *,
               follow: bool = False) -> Memory | MemdirError:
    """One memory file, parsed, in the scope of its folder or its frontmatter."""
    try:
        text = read_file(path, MEMORY_FILE, follow=follow).decode("utf-8")
    except UnsafeFileError as exc:
        return InvalidMemoryError(f"not imported: {exc.message}", exc.hint)
    except UnicodeDecodeError as exc:
        return MemoryFileError(f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                               f"{exc.start})", "save the file as UTF-8")
    except OSError as exc:
        return InvalidMemoryError(f"cannot read the file: {exc.strerror or exc}",
                                  "check that the file exists and that you may read it")
    try:
        return parse(text, stem=path.stem, scope=hinted or _file_scope(text))
    except MemdirError as exc:  # nesting too deep included (parse bounds it)
        return exc


def _file_scope(text: str) -> Scope:
    head = text.split("\n---", 1)[0]
    for line in head.splitlines():
        if line.startswith("scope:"):
            value = line.split(":", 1)[1].strip()
            return next((s for s in SCOPES if s == value), "project")
    return "project"


def _from_jsonl(data: bytes, name: str) -> Iterator[tuple[str, dict[str, Any] | MemdirError]]:
    """Each line decoded on its own: one line that is not UTF-8 (or not JSON, or nested too
    deeply to read) is reported with its number, the others are read."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    for n, raw in enumerate(data.splitlines(), start=1):
        where = f"{name}:{n}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield where, InvalidMemoryError(
                f"line {n} is not UTF-8 text (byte {raw[exc.start]:#04x} at column "
                f"{exc.start + 1})", "save the file as UTF-8, as memdir export writes it")
            continue
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except RecursionError:
            yield where, InvalidMemoryError("the JSON nests too deeply to read",
                                            "flatten the nested lists and objects")
            continue
        except ValueError as exc:  # not JSON, or an integer with too many digits
            yield where, InvalidMemoryError(f"not JSON: {exc}", _FIX_LINE)
            continue
        if not isinstance(item, dict):
            yield where, InvalidMemoryError("each line must be a JSON object", _FIX_LINE)
            continue
        yield where, item


# -- validating ------------------------------------------------------------------------------


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _time(item: dict[str, Any], key: str) -> datetime | None:
    """A timestamp field of a JSON item: None when absent (or null); an error if invalid."""
    value = item.get(key)
    if value is None:
        return None
    parsed = parse_time(value) if isinstance(value, str) else None
    if parsed is None:
        raise InvalidMemoryError(f"{key!r} is not a date/time: {_short(value)}",
                                 "give an ISO 8601 time, e.g. 2024-03-04T09:30:00Z")
    return parsed


def _text_field(item: dict[str, Any], key: str, hint: str, *,
                numbers: bool = False) -> str | None:
    """An id field of a JSON item: None when absent, null or empty; else text (or, with
    ``numbers``, an integer, taken as its digits)."""
    value = item.get(key)
    if value is None or value == "":
        return None
    if numbers and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise InvalidMemoryError(f"{key!r} must be text, not {type(value).__name__}: "
                                 f"{_short(value)}", hint)
    return value


def _memory_from_item(taxonomy: Taxonomy, clock: Callable[[], datetime],
                      item: dict[str, Any], scope: Scope) -> Memory:
    """A JSON item (a line of JSON Lines) as a memory, every field checked: a value that is
    present but invalid is an error, never replaced by a default."""
    created = _time(item, "created") or clock()
    updated = _time(item, "updated") or created
    meta = item.get("meta")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise InvalidMemoryError("'meta' must be an object",
                                 'give meta as a JSON object, e.g. {"ticket": "OPS-1"}')
    content = item.get("content", item.get("body"))
    if not isinstance(content, str):
        raise InvalidMemoryError("each memory needs a 'content' string",
                                 'give the text to remember as "content"')
    reinforced = item.get("reinforced")
    status = item.get("status")
    memory = draft(
        content, type=str(item.get("type", "")), scope=scope,
        taxonomy=taxonomy, now=created, anchor=None,
        name=item.get("name"), description=item.get("description"),
        tags=item.get("tags") or (), paths=item.get("paths") or (),
        relevance=item.get("relevance"), meta=meta, source=str(item.get("source") or "imported"),
        context=item.get("context"), date=item.get("date"))
    if status is not None and status not in STATUSES:
        raise InvalidMemoryError(f"unknown status {_short(status)}", "use active or archived")
    return memory.replace(
        id=_text_field(item, "id", "give the id as text, or leave it out for a new one",
                       numbers=True) or "",
        updated=updated, status=status or "active",
        reinforced=0 if reinforced is None else reinforced,
        superseded_by=_text_field(item, "superseded_by",
                                  "give the id of the memory that replaces this one"))


def _memory_from_file(taxonomy: Taxonomy, parsed: Memory, scope: Scope) -> Memory:
    """A parsed file as a memory, validated as ``store`` would; its unknown frontmatter keys
    are kept exactly as YAML read them (dates stay dates, integer keys integers)."""
    keys = {str(key): value for key, value in parsed.meta.items()}
    if len(keys) != len(parsed.meta):
        raise InvalidMemoryError(
            "two frontmatter keys are the same once read as text (e.g. 7 and '7')",
            "rename one of them")
    memory = draft(
        parsed.body, type=parsed.type, scope=scope, taxonomy=taxonomy, now=parsed.created,
        anchor=None, name=parsed.name, description=parsed.description, tags=parsed.tags,
        paths=parsed.paths, relevance=parsed.relevance, meta=keys, source=parsed.source,
        context=parsed.context, date=parsed.date)
    return memory.replace(
        id=parsed.id, updated=parsed.updated, reinforced=parsed.reinforced,
        status=parsed.status, superseded_by=parsed.superseded_by, meta=dict(parsed.meta))


def _storable(memory: Memory, *, bulk: bool) -> Memory:
    """``memory`` if every field can be written as it is (file, index row, database row),
    with its times in UTC; else InvalidMemoryError saying which field and how to fix it.
    What ``draft`` does not see: times, counters, ids, and meta as the index stores it."""
    times: dict[str, datetime] = {}
    for key, value in (("created", memory.created), ("updated", memory.updated)):
        try:
            times[key] = value.astimezone(UTC)
        except (OverflowError, ValueError):
            raise InvalidMemoryError(
                f"{key!r} is out of range once converted to UTC: {value.isoformat()}",
                "give a time between the years 1 and 9999 in UTC") from None
    count, limit = memory.reinforced, _MAX_COUNT_BULK if bulk else _MAX_COUNT_HOME
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise InvalidMemoryError(f"'reinforced' must be a whole number >= 0, not "
                                 f"{_short(count)}", "give how many times it was reinforced")
    if count > limit:
        raise InvalidMemoryError(f"'reinforced' is too large: {_short(count)}",
                                 f"give a count of at most {limit}")
    ids = [("id", memory.id), ("superseded_by", memory.superseded_by or "")]
    for key, text in ids:
        if not isinstance(text, str):
            raise InvalidMemoryError(f"{key!r} must be text, not {_short(text)}",
                                     "give the id as text")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidMemoryError(f"{key!r} is not valid Unicode: {_short(text)}",
                                     "remove the lone surrogate (e.g. a \\ud800 escape)") from None
    check_secrets(text for _, text in ids)
    if bulk:  # PostgreSQL's text and jsonb cannot hold NUL; a home's files and SQLite can
        texts = [memory.id, memory.superseded_by or "", memory.name, memory.description,
                 memory.body, *memory.tags, *memory.paths, *meta_strings(memory.meta)]
        if any("\x00" in text for text in texts):
            raise InvalidMemoryError("the text holds a NUL character (\\u0000), which the "
                                     "database cannot store", "remove the NUL characters")
    try:  # the index stores meta as JSON: keys it cannot write (a date key) fail here
        json.dumps(dict(memory.meta), default=encode_meta)
    except (TypeError, ValueError) as exc:
        raise InvalidMemoryError(f"meta cannot be stored: {exc}",
                                 "use text keys and plain values (text, numbers, booleans, "
                                 "dates, lists and mappings)") from None
    return memory.replace(created=times["created"], updated=times["updated"])


def validate(item: dict[str, Any] | Memory, *, taxonomy: Taxonomy,
             clock: Callable[[], datetime], scope: Scope, bulk: bool) -> Memory:
    """The memory an item becomes in ``scope``, ready to be written as it is (into a
    :class:`~memdir.upkeep.transfer.BulkStore` if ``bulk``, else a home); MemdirError if not."""
    memory = _memory_from_file(taxonomy, item, scope) if isinstance(item, Memory) else \
        _memory_from_item(taxonomy, clock, item, scope)
    return _storable(memory, bulk=bulk)
