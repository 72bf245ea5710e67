"""What a hook may print: within every host's limit, whatever memdir's budgets say.

Claude Code keeps at most 10,000 characters of a hook's added context; Codex at most
``additionalContextLimit`` tokens (2,500 by default), counted with its own tokenizer. A hook's
output is cut to :data:`MAX_CHARS` characters and :data:`MAX_TOKENS` tokens by
:func:`tokens`, which counts three ASCII characters a token (more tokens than English or code
give: the cut errs on the short side) and one a token for any other character.

Invariant: a cut output keeps its wrapper whole: whole ``<system-reminder>`` blocks are
dropped from the end first, then lines from inside the last block, before its closing lines
(a code fence, a closing tag), and a line says that the rest was cut.
"""

from __future__ import annotations

import math
import re

__all__ = ["MAX_CHARS", "MAX_TOKENS", "fit", "tokens"]

MAX_CHARS = 10_000
MAX_TOKENS = 2_500
CUT = "(more memories were cut to fit the agent's limit; memory_recall finds them)"
_CLOSER = re.compile(r"```|</[\w-]+>")
_BLOCK_END = "</system-reminder>"


def tokens(text: str) -> int:
    """A count of ``text``'s tokens no tokenizer goes above by much (module docstring)."""
    ascii_count = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_count / 3) + (len(text) - ascii_count)


def _fits(text: str) -> bool:
    return len(text) <= MAX_CHARS and tokens(text) <= MAX_TOKENS


def fit(text: str) -> str:
    """``text`` cut to the hosts' limits (module docstring); unchanged when it fits."""
    if _fits(text):
        return text
    while text.count(_BLOCK_END) > 1 and not _fits(text):
        last = text.rstrip().removesuffix(_BLOCK_END)
        text = text[:last.rindex(_BLOCK_END) + len(_BLOCK_END)]
    if _fits(text):
        return text
    lines = text.split("\n")
    tail: list[str] = []
    while lines and (not lines[-1].strip() or _CLOSER.fullmatch(lines[-1].strip())):
        tail.insert(0, lines.pop())
    body = lines
    while body and not _fits("\n".join([*body, CUT, *tail])):
        drop = max(1, len(body) // 8) if len("\n".join(body)) > 4 * MAX_CHARS else 1
        del body[-drop:]
    return "\n".join([*body, CUT, *tail])
