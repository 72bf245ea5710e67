"""memdir: memory that lasts for AI coding agents.

Memories are Markdown files a person can read, edit and commit; a derived SQLite index makes
them fast to search. ``from memdir import Memdir`` is the library; the CLI, hooks, MCP server
and HTTP API are thin layers over it. The names below are the whole public API (a test locks
them).
"""

from typing import TYPE_CHECKING, Any

from memdir.errors import (
    ConfigError,
    InvalidMemoryError,
    LLMError,
    MemdirError,
    MemoryFileError,
    MemoryNotFoundError,
    PathTraversalError,
    SecretDetectedError,
    UnknownTypeError,
)
from memdir.memdir import Memdir
from memdir.model import Hit, Memory, Problem, Scope, Stats
from memdir.taxonomy import PRESETS, Taxonomy, TypeSpec

if TYPE_CHECKING:
    from memdir.agent import RecallPrefetch, build_memory_prompt_section, start_recall_prefetch
    from memdir.context_format import Context, ContextItem, count_tokens
    from memdir.recall import Recall, Recalled

# Imported on first use (PEP 562): a hook or CLI process pays only for what it runs.
_LAZY = {
    "Context": "memdir.context_format", "ContextItem": "memdir.context_format",
    "count_tokens": "memdir.context_format", "Recall": "memdir.recall",
    "Recalled": "memdir.recall", "RecallPrefetch": "memdir.agent",
    "build_memory_prompt_section": "memdir.agent", "start_recall_prefetch": "memdir.agent",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memdir' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "ConfigError",
    "Context",
    "ContextItem",
    "Hit",
    "InvalidMemoryError",
    "LLMError",
    "Memdir",
    "MemdirError",
    "Memory",
    "MemoryFileError",
    "MemoryNotFoundError",
    "PathTraversalError",
    "Problem",
    "Recall",
    "RecallPrefetch",
    "Recalled",
    "Scope",
    "SecretDetectedError",
    "Stats",
    "Taxonomy",
    "TypeSpec",
    "UnknownTypeError",
    "__version__",
    "build_memory_prompt_section",
    "count_tokens",
    "start_recall_prefetch",
]
