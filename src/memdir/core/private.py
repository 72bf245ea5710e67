"""``<private>`` spans: text the user marked as never to be stored, removed before anything else.

Every write path passes every field (body, name, description, tags, paths, meta keys and
values) through :func:`strip_private` before it validates, checks for secrets or stores it.

Invariants:
- What a reader could take for a private tag is one: any case, attributes
  (``<private class="x">``), spaces inside the tag (``< private >``, ``</private >``),
  invisible characters or another tag inside the tag name (``<pri<b></b>vate>``).
- Spans nest: ``<private>a <private>b</private> c</private>`` removes ``c`` too; an unclosed
  span runs to the end of the text; a stray closing tag is removed.
- Stripping repeats until nothing changes, so removing one span can never join the text
  around it into a new tag (``<pri<private>x</private>vate>``).
- A memory file written by hand may hold ``<private>`` spans: :func:`strip_private_memory`
  removes them from every field before the memory is indexed
  (:func:`memdir.core.index.memory_to_row`) or handed back, so no search, context, recall, hook or
  MCP result shows them; the file on disk keeps them (it is the person's) until memdir rewrites it,
  and memdir writes none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memdir.core.model import Memory

__all__ = ["strip_private", "strip_private_data", "strip_private_memory"]

# Between the letters of the tag name: other (complete) tags and invisible characters, so a
# tag split around another tag, or by a zero-width space, still counts.
_GAP = r"(?:<[^<>]{0,200}>|[\u00ad\u200b-\u200f\u2060\ufeff])*"
_NAME = _GAP.join("private")
_TAG = (
    rf"<\s*{_GAP}(?P<close>/)?\s*{_GAP}{_NAME}{_GAP}(?=[\s/>]|$)[^<>]{{0,1000}}(?:>|$)"
)


@cache
def _tag() -> re.Pattern[str]:
    """Compiled on first use: most texts hold no ``<``, and start-up stays cheap."""
    return re.compile(_TAG, re.IGNORECASE)


def _strip_once(text: str) -> str:
    out: list[str] = []
    depth = 0
    pos = 0
    for tag in _tag().finditer(text):
        if depth == 0:
            out.append(text[pos:tag.start()])
        if tag.group("close"):
            depth = max(depth - 1, 0)
        else:
            depth += 1
        pos = tag.end()
    if depth == 0:
        out.append(text[pos:])
    return "".join(out)


def strip_private(text: str) -> str:
    """``text`` without its ``<private>`` spans (nested, unclosed, in any spelling)."""
    if "<" not in text:  # every tag starts with one; the regex then scans from each "<"
        return text
    for _ in range(100):  # each round removes at least one tag; a bound all the same
        stripped = _strip_once(text)
        if stripped == text:
            break
        text = stripped
    return text


def strip_private_data(value: object) -> object:
    """``value`` (plain data: text, lists, mappings) with :func:`strip_private` applied to
    every string in it, mapping keys included; a key left empty is dropped with its value.
    The caller bounds the nesting depth first."""
    if isinstance(value, str):
        return strip_private(value)
    if isinstance(value, Mapping):
        out: dict[object, object] = {}
        for key, item in value.items():
            clean = strip_private(key).strip() if isinstance(key, str) else key
            if clean != "":
                out[clean] = strip_private_data(item)
        return out
    if isinstance(value, list | tuple):
        return [strip_private_data(item) for item in value]
    return value


def _clean(text: str) -> str:
    stripped = strip_private(text)
    return stripped if stripped == text else stripped.strip()


def strip_private_memory(memory: Memory) -> Memory:
    """``memory`` without ``<private>`` spans in any free-text field (name, description, body,
    source, search context, tags, paths, meta keys and values); the same object when it
    holds none (the common case)."""
    texts = [memory.name, memory.description, memory.body, memory.source, memory.context,
             *memory.tags, *memory.paths]
    if not any("<" in t for t in texts) and "<" not in repr(memory.meta):
        return memory
    meta = strip_private_data(memory.meta) if memory.meta else memory.meta
    return memory.replace(name=_clean(memory.name), description=_clean(memory.description),
                          body=_clean(memory.body), source=_clean(memory.source),
                          context=_clean(memory.context),
                          tags=tuple(t for t in map(_clean, memory.tags) if t),
                          paths=tuple(p for p in map(_clean, memory.paths) if p), meta=meta)
