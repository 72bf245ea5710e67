"""The LLM call ledger: every call counted per day, provider and purpose, in the index.

Invariants:
- Counting never fails the caller: a locked or broken index loses a count, never a result.
- The daily budget is checked against the ledger of the local day, across all processes
  (hooks are separate processes), before a call is made.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from memdir.core.index import Index

__all__ = ["LLMUsage", "Ledger"]


@dataclass(frozen=True)
class LLMUsage:
    """LLM calls of one day (all providers and purposes together)."""

    day: str
    calls: int = 0
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class Ledger:
    def __init__(self, index: Index) -> None:
        self.index = index

    def usage(self, day: str) -> LLMUsage:
        """The day's totals; zeros when the index cannot be read."""
        try:
            row = self.index.conn.execute(
                "SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(failures), 0), "
                "COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0) "
                "FROM llm_calls WHERE day = ?", (day,)).fetchone()
        except sqlite3.Error:
            return LLMUsage(day)
        return LLMUsage(day, int(row[0]), int(row[1]), int(row[2]), int(row[3]))

    def calls_today(self, day: str) -> int:
        return self.usage(day).calls

    def record(self, day: str, provider: str, purpose: str, *, ok: bool,
               input_tokens: int = 0, output_tokens: int = 0) -> None:
        """Count one call. Never raises."""
        self.index.try_write(
            "INSERT INTO llm_calls (day, provider, purpose, calls, failures, input_tokens, "
            "output_tokens) VALUES (?, ?, ?, 1, ?, ?, ?) "
            "ON CONFLICT (day, provider, purpose) DO UPDATE SET calls = calls + 1, "
            "failures = failures + excluded.failures, "
            "input_tokens = input_tokens + excluded.input_tokens, "
            "output_tokens = output_tokens + excluded.output_tokens",
            [(day, provider, purpose, 0 if ok else 1, input_tokens, output_tokens)],
            "LLM call not counted")
