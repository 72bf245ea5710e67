"""Meta values as JSON, for the index and the PostgreSQL store: YAML frontmatter can hold
dates, times, ``.nan`` and ``.inf``, which JSON cannot.

Invariants: :func:`encode_meta` and :func:`decode_meta` are inverse, so meta read back from
an index equals meta read from the file; :func:`finite` writes no number SQLite's JSON
functions reject.
"""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Any

__all__ = ["decode_meta", "encode_meta", "finite"]


def finite(value: Any) -> Any:
    """Meta with YAML's .nan and .inf as strings: JSON has no such numbers, and SQLite's
    JSON functions reject the ``NaN`` Python would write (session-start context reads meta)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def encode_meta(value: object) -> object:
    """JSON for meta values JSON lacks (YAML dates and times), reversible by decode_meta."""
    if isinstance(value, datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, date):
        return {"$date": value.isoformat()}
    return str(value)


def decode_meta(obj: dict[str, Any]) -> object:
    """The meta values encode_meta wrote, back as they were read from the file."""
    if len(obj) == 1:
        if "$datetime" in obj:
            return datetime.fromisoformat(obj["$datetime"])
        if "$date" in obj:
            return date.fromisoformat(obj["$date"])
    return obj
