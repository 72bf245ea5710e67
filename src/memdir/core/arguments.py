"""Arguments the facade takes from its callers (the library, the CLI, hooks, MCP, HTTP), made
safe before they reach SQLite or the tokenizer.

Invariants: a limit is a whole number from 1 to MAX_LIMIT (SQLite's LIMIT takes 64-bit
integers; a bigger one used to surface as an internal error); text never holds lone
surrogates (undecodable bytes on a command line arrive as ``\\udcff``, hook JSON may carry
``\\ud800``), which neither SQLite nor the tokenizer can encode.
"""

from __future__ import annotations

from collections.abc import Sequence

from memdir.core.errors import InvalidMemoryError

__all__ = ["MAX_LIMIT", "checked_limit", "scrub", "scrub_all"]


MAX_LIMIT = 1_000_000  # far above any store; keeps LIMIT clauses inside SQLite's integers


def checked_limit(limit: int) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidMemoryError(f"limit must be a whole number from 1 to {MAX_LIMIT:,}, "
                                 f"not {limit!r}", "pass a smaller --limit")
    return limit


def scrub(text: str) -> str:
    """Text with lone surrogates (undecodable bytes in arguments, ``\\ud800`` escapes in hook
    JSON) replaced by U+FFFD: SQLite and the tokenizer cannot encode them."""
    if isinstance(text, str) and not text.isascii():
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def scrub_all(values: Sequence[str] | str | None) -> Sequence[str] | None:
    if isinstance(values, str):  # tags="ops" means the tag ops, not o, p and s
        values = [values]
    return None if values is None else [scrub(v) for v in values]
