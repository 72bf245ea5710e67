"""The LLM extractor of :mod:`memdir.capture.extract`: the prompt (the taxonomy's guidance,
what not to extract, dates kept in the words said), the JSON schema of the answer, and the
check of every item in it.

Invariant: a reply is trusted for nothing: each item is checked (known type, non-empty content
of at most ``MAX_CONTENT`` characters, relevance a number in [0, 1], at most ``MAX_ITEMS``);
anything else comes back with its skip reason, never as a memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memdir.capture.transcript import Message
from memdir.core.safety import strip_private
from memdir.core.taxonomy import Taxonomy

if TYPE_CHECKING:
    from memdir.llm.client import LLM

__all__ = ["MAX_CONTENT", "MAX_ITEMS", "Checked", "Raw", "by_llm"]

MAX_CONTENT = 100
MAX_ITEMS = 10

_PROMPT = """You extract durable memories from a conversation between a user and an AI coding \
assistant. A memory is something worth knowing in a FUTURE session that cannot be read from \
the project itself.

Memory types:
{types}

Do NOT extract: anything derivable from the code, file paths or git history; code itself; \
ephemeral task details (what is being done right now, debugging steps, command output); \
greetings and acknowledgements; secrets of any kind. If the user asks to "remember" a list, \
keep only what is surprising or not derivable. Most conversations contain nothing worth \
keeping: return an empty list then.

Rules:
- content: one self-contained sentence of at most 100 characters.
- relevance: 0.9-1.0 critical (core preferences, major decisions), 0.7-0.8 important, \
0.5-0.6 useful context, 0.1-0.4 minor.
- feedback memories (corrections or confirmations of how the assistant works) also give \
"why" and "how_to_apply".
- Keep dates in the words said ("after Thursday", "next Friday"): memdir adds the \
date by fixed rules; write a date yourself only as YYYY-MM-DD; today is {today}.
Reply with JSON only: {{"memories": [{{"type": ..., "content": ..., "relevance": ...}}]}}."""


def _schema(taxonomy: Taxonomy) -> dict[str, Any]:
    names = [t.name for t in taxonomy.types if not t.system]
    item = {"type": "object", "properties": {
        "type": {"type": "string", "enum": names},
        "content": {"type": "string", "maxLength": MAX_CONTENT},
        "relevance": {"type": "number", "minimum": 0, "maximum": 1},
        "why": {"type": "string"}, "how_to_apply": {"type": "string"}},
        "required": ["type", "content", "relevance"]}
    return {"type": "object", "properties": {"memories": {"type": "array", "items": item,
                                                          "maxItems": MAX_ITEMS}},
            "required": ["memories"]}


def _conversation(messages: Sequence[Message]) -> str:
    # Private spans go per message (an unclosed one ends with its message); LLM.ask then
    # redacts secrets from the whole prompt.
    return "\n\n".join(f"{'summary' if m.kind == 'summary' else m.role}: "
                       f"{strip_private(m.text)}" for m in messages)


Checked = tuple[str, str, float, str, str]  # content, type, relevance, excerpt, skip reason
Raw = tuple[str, str, float, str, str, str]  # ... and search context (the turn before)


def _check_item(item: object, taxonomy: Taxonomy) -> Checked:
    if not isinstance(item, dict):
        return ("", "", 0.0, "", "not an object")
    content = item.get("content")
    kind = item.get("type")
    relevance = item.get("relevance")
    text = " ".join(content.split()) if isinstance(content, str) else ""
    spec = taxonomy.lookup(kind) if isinstance(kind, str) else None
    if not text:
        return ("", str(kind), 0.0, "", "no content")
    if spec is None or spec.system:
        return (text, str(kind), 0.0, "", f"unknown type {kind!r}")
    if len(text) > MAX_CONTENT:
        return (text, spec.name, 0.0, "", f"content over {MAX_CONTENT} characters")
    if isinstance(relevance, bool) or not isinstance(relevance, int | float) \
            or not 0 <= relevance <= 1:
        return (text, spec.name, 0.0, "", f"relevance {relevance!r} is not a number in 0-1")
    body = text
    why, how = item.get("why"), item.get("how_to_apply")
    if spec.name == "feedback":
        if isinstance(why, str) and why.strip():
            body += f"\n\n**Why:** {' '.join(why.split())[:300]}"
        if isinstance(how, str) and how.strip():
            body += f"\n**How to apply:** {' '.join(how.split())[:300]}"
    return (body, spec.name, float(relevance), "", "")


def by_llm(llm: LLM, window: Sequence[Message], taxonomy: Taxonomy,
           today: str) -> list[Raw] | None:
    """The model's candidates for ``window``, each checked; None when the answer is unusable
    (the caller falls back to the rules)."""
    types = "\n".join(f"- {t.name}: {t.guidance}" for t in taxonomy.types if not t.system)
    answer = llm.ask(_PROMPT.format(types=types, today=today),
                     "Conversation:\n\n" + _conversation(window), _schema(taxonomy),
                     purpose="extract", max_tokens=800)
    if not isinstance(answer, dict) or not isinstance(answer.get("memories"), list):
        return None
    items = answer["memories"]
    # An item comes from the whole window, not one turn: no search context.
    out: list[Raw] = [(*_check_item(item, taxonomy), "") for item in items[:MAX_ITEMS]]
    out += [("", "", 0.0, "", f"more than {MAX_ITEMS} items", "") for _ in items[MAX_ITEMS:]]
    return out
