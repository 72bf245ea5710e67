"""memdir: memory that lasts for AI coding agents.

Memories are Markdown files a person can read, edit and commit; a derived SQLite index makes
them fast to search. ``from memdir import Memdir`` is the library; the CLI, hooks, MCP server
and HTTP API are thin layers over it. The names below are the whole public API (a test locks
them).
"""

from memdir.agent import RecallPrefetch, build_memory_prompt_section, start_recall_prefetch
from memdir.context import Context
from memdir.context_format import ContextItem, count_tokens
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
from memdir.recall import Recall, Recalled
from memdir.taxonomy import PRESETS, Taxonomy, TypeSpec

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
