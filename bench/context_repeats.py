"""What a session-start context spends its budget on: memories said twice, and cut words.

Used by ``bench/recall.py`` (the quickstart store and the synthetic 1k / 10k stores) and by
``tests/test_context_duplicates.py``. Only memdir's public API is used, so the same code
measures any commit.

- **memories said twice**: a memory whose text is in one context more than once. A memory is
  counted by the larger of (a) how often its file is linked (``](file)``) plus one if it is
  among the injected memories and (b) how often its name, its description or the first 40
  characters of its text occur, each only when it is at least 12 characters long and no other
  memory of the store has the same (a shared name says nothing about which memory it is). In
  JSON, each injected memory's record (which holds name, description and text apart) counts
  once, and the ``index`` field as text.
- **lines with a cut word**: lines holding ``…`` right after a fragment of a word, that is a
  run of letters or digits that is no whole word of any memory's name, description, text,
  file name or tag (``Deployments go thr…``). JSON output is parsed and each text field's
  lines are checked.
- **index tokens**: :func:`memdir.count_tokens` of the MEMORY.md section (markdown and
  prompt: from its heading to the section's end; JSON: the ``index`` field).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memdir import Memory, count_tokens

__all__ = ["Checker", "Findings"]

INDEX_HEADING = "### Memory index (MEMORY.md)"
_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")
_CUT = re.compile(r"(\w+)\u2026")
MIN_KEY = 12
BODY_KEY = 40


@dataclass(frozen=True)
class Findings:
    """One context's measures."""

    repeated: tuple[str, ...]  # ids of memories said more than once
    cut_lines: tuple[str, ...]  # lines with a cut word
    index_tokens: int


def _flat(text: str) -> str:
    return " ".join(text.split())


class Checker:
    """The measures for contexts of one store (its memories give the keys and the words)."""

    def __init__(self, memories: Iterable[Memory]) -> None:
        self.memories = list(memories)
        self.by_file = {self._file(m): m for m in self.memories}
        keys = Counter(k for m in self.memories for k in set(self._keys(m)))
        self.keys = {m.id: [k for k in self._keys(m) if keys[k] == 1] for m in self.memories}
        self.words = {w.casefold() for m in self.memories for w in _WORD.findall(
            " ".join([m.name, m.description, m.body, self._file(m), *m.tags]))}

    @staticmethod
    def _file(memory: Memory) -> str:
        return (memory.file or "").rsplit("/", 1)[-1]

    @staticmethod
    def _keys(memory: Memory) -> list[str]:
        keys = [_flat(memory.name), _flat(memory.description), _flat(memory.body)[:BODY_KEY]]
        return [k for k in dict.fromkeys(keys) if len(k) >= MIN_KEY]

    def check(self, text: str, shown: Sequence[Memory], fmt: str) -> Findings:
        """The measures of one context's ``text`` that injected the ``shown`` memories."""
        lines, index = self._lines(text, fmt)
        ids = {m.id for m in shown}
        if fmt == "json":  # a record per memory holds its name, description and text apart
            text = "\n".join([json.loads(text).get("index") or "",
                              *(_flat(m.body)[:BODY_KEY] for m in shown)])
        linked = Counter(re.findall(r"\]\(([^)\s]+)\)", text))
        candidates = {m.id: m for m in shown}
        for file in linked:
            memory = self.by_file.get(file.rsplit("/", 1)[-1])
            if memory is not None:
                candidates[memory.id] = memory
        repeated = []
        for memory in candidates.values():
            places = linked[self._file(memory)] + (memory.id in ids)
            said = max((text.count(k) for k in self.keys.get(memory.id, [])), default=0)
            if max(places, said) > 1:
                repeated.append(memory.id)
        cut = [line for line in lines
               if any(w.casefold() not in self.words for w in _CUT.findall(line))]
        return Findings(tuple(sorted(repeated)), tuple(cut), index)

    @staticmethod
    def _lines(text: str, fmt: str) -> tuple[list[str], int]:
        """The lines to check for cut words and the tokens of the MEMORY.md section."""
        if fmt == "json":
            data = json.loads(text)
            fields = [str(v) for m in data["memories"] for v in m.values()
                      if isinstance(v, str)]
            index = data.get("index") or ""
            return [ln for f in [*fields, index] for ln in f.split("\n")], (
                count_tokens(json.dumps(index, ensure_ascii=False)) if index else 0)
        lines = text.split("\n")
        if INDEX_HEADING not in lines:
            return lines, 0
        start = lines.index(INDEX_HEADING)
        end = next((n for n in range(start + 1, len(lines)) if lines[n].startswith("```")),
                   len(lines))
        return lines, count_tokens("\n".join(lines[start:end]))
