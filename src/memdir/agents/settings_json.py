"""An agent's JSON settings file, read and written back without changing what memdir does not
own: numbers keep the very text they were written with.

Python's ``json`` reads ``1e400`` as ``inf`` and writes it back as ``Infinity`` (not JSON:
the agent could no longer read its settings), ``1.50`` as ``1.5`` and ``1E5`` as
``100000.0``. Here every number is read as a :class:`Number` holding its text, and
:func:`dumps` writes that text back.

Invariants:
- :func:`dumps` writes what ``json.dumps(value, indent=2, ensure_ascii=False)`` writes for
  every value without a :class:`Number`, and each Number as its text.
- A Number equals another Number with the same text (so an unchanged file compares equal to
  itself) and a Python ``int`` or ``float`` of the same value (so memdir's own entries, built
  with Python numbers, compare equal to the same entries read from a file); never a bool.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from memdir.core.errors import ConfigError

__all__ = ["Number", "dumps", "loads"]


class Number:
    """A JSON number as written in the file."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def _value(self) -> Decimal | None:
        try:
            return Decimal(self.text)
        except InvalidOperation:
            return None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Number):
            return self.text == other.text
        if isinstance(other, bool) or not isinstance(other, int | float):
            return NotImplemented
        value = self._value()
        return value is not None and value == Decimal(other)

    def __hash__(self) -> int:
        value = self._value()
        try:
            return hash(value) if value is not None else hash(self.text)
        except TypeError:  # a signalling NaN
            return hash(self.text)

    def __repr__(self) -> str:
        return f"Number({self.text!r})"


def loads(path: Path, text: str | None) -> dict[str, Any]:
    """A settings file's object; ``{}`` for a missing or blank file. A file that is not a JSON
    object is refused with a ConfigError naming it and the problem."""
    if text is None or not text.strip():
        return {}
    fix = f"fix {path} (or move it away) and run the command again; memdir changed nothing"
    try:
        data = json.loads(text, parse_float=Number, parse_int=Number, parse_constant=Number)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, column "
                          f"{exc.colno}", fix) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a JSON object ({{...}}) at its top level", fix)
    return data


def dumps(value: Any, indent: int = 2) -> str:
    """JSON text with ``indent`` spaces per level, non-ASCII kept, numbers as written."""

    def encode(item: Any, level: int) -> str:
        if isinstance(item, Number):
            return item.text
        if isinstance(item, dict | list) and item:
            inner = "\n" + " " * (indent * (level + 1))
            if isinstance(item, dict):
                parts = [f"{json.dumps(str(k), ensure_ascii=False)}: {encode(v, level + 1)}"
                         for k, v in item.items()]
                opening, closing = "{", "}"
            else:
                parts = [encode(v, level + 1) for v in item]
                opening, closing = "[", "]"
            return (opening + inner + ("," + inner).join(parts) + "\n" + " " * (indent * level)
                    + closing)
        return json.dumps(item, ensure_ascii=False)

    return encode(value, 0)
