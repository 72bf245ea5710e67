"""How old a recalled memory is, in the words seed 001 gives the model: its age ("today",
"yesterday", "N days ago") and, past a day, a warning to check it against the current code.
"""

from __future__ import annotations

__all__ = ["freshness_warning", "memory_age"]


def memory_age(days: int) -> str:
    """'today', 'yesterday' or 'N days ago': models reason about these better than dates."""
    if days <= 0:
        return "today"
    if days == 1:
        return "yesterday"
    return f"{days} days ago"


def freshness_warning(days: int) -> str:
    """Empty for memories from today or yesterday; an action-cue caveat for older ones."""
    if days <= 1:
        return ""
    return (f"This memory is {days} days old. Memories are point-in-time observations, not "
            "live state: claims about code behavior or file:line citations may be outdated. "
            "Verify against current code before relying on it.")
