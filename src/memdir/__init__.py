"""memdir: memory that lasts for AI coding agents.

Memories are Markdown files a person can read, edit and commit; a derived SQLite index makes
them fast to search. ``from memdir import Memdir`` is the library; the CLI, hooks, MCP server
and HTTP API are thin layers over it. The names below are the whole public API (a test locks
them).
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: `python -m memdir hook` must not import typing
if TYPE_CHECKING:
    from typing import Any

    from memdir.agents.agent import (
        RecallPrefetch,
        build_memory_prompt_section,
        start_recall_prefetch,
    )
    from memdir.core.errors import (
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
    from memdir.core.model import Hit, Memory, Problem, Scope, Stats
    from memdir.core.taxonomy import PRESETS, Taxonomy, TypeSpec
    from memdir.memdir import Memdir
    from memdir.retrieval.context_format import Context, ContextItem, count_tokens
    from memdir.retrieval.recall import Recall, Recalled

# Every name is imported on first use (PEP 562): a hook, the MCP server's handshake or a
# CLI command pays only for what it runs, and `import memdir.x` costs no more than memdir.x.
_ERRORS = ("ConfigError InvalidMemoryError LLMError MemdirError MemoryFileError "
           "MemoryNotFoundError PathTraversalError SecretDetectedError UnknownTypeError")
_LAZY = {
    **dict.fromkeys(_ERRORS.split(), "memdir.core.errors"),
    **dict.fromkeys(("Hit", "Memory", "Problem", "Scope", "Stats"), "memdir.core.model"),
    **dict.fromkeys(("PRESETS", "Taxonomy", "TypeSpec"), "memdir.core.taxonomy"),
    "Memdir": "memdir.memdir",
    "Context": "memdir.retrieval.context_format", "ContextItem": "memdir.retrieval.context_format",
    "count_tokens": "memdir.retrieval.context_format", "Recall": "memdir.retrieval.recall",
    "Recalled": "memdir.retrieval.recall", "RecallPrefetch": "memdir.agents.agent",
    "build_memory_prompt_section": "memdir.agents.agent", "start_recall_prefetch":
    "memdir.agents.agent",
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
