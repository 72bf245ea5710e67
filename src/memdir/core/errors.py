"""The one exception hierarchy of memdir.

Every error memdir raises on purpose is a :class:`MemdirError`. Each carries a ``hint``: one
sentence telling the user how to fix the problem. Adapters (CLI, hooks, HTTP, MCP) show the
message and the hint and never need to know the subclass to be helpful; they use ``code`` for
machine-readable error shapes and ``exit_code`` for process exit status. A failure that
must not fail the caller (a usage counter, an LLM call, a team server) is logged instead, with
:func:`warn`.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = [
    "CodexTrustError",
    "ConfigError",
    "DatabaseError",
    "DuplicateNameError",
    "IndexBusyError",
    "IndexCorruptError",
    "InvalidMemoryError",
    "LLMError",
    "MemdirError",
    "MemoryFileError",
    "MemoryNotFoundError",
    "MissingExtraError",
    "PathTraversalError",
    "ReadOnlyHomeError",
    "SecretDetectedError",
    "ServerError",
    "UnknownTypeError",
    "UnsafeFileError",
    "warn",
    "warnings_to",
]


_sink: Callable[[str], None] | None = None


def warn(message: str, *args: object) -> None:
    """Log a warning on the ``memdir`` logger, or hand it to the sink set by
    :func:`warnings_to`. ``logging`` is imported here, on the first warning: it costs ~3 ms,
    and most commands and hooks never warn."""
    if _sink is not None:
        _sink(message % args if args else message)
        return
    import logging

    logging.getLogger("memdir").warning(message, *args)


def note(message: str, *args: object) -> None:
    """Log a debug note on the ``memdir`` logger (a library user sees nothing unless they
    ask), or hand it to the sink set by :func:`warnings_to` (a hook's log keeps everything)."""
    if _sink is not None:
        _sink(message % args if args else message)
        return
    import logging

    logging.getLogger("memdir").debug(message, *args)


def warnings_to(sink: Callable[[str], None] | None) -> None:
    """Send every warning to ``sink`` instead of the logger (None: back to the logger). Hook
    processes log to their own file: a warning on stderr would reach the agent."""
    global _sink
    _sink = sink


class MemdirError(Exception):
    """Base class: a message saying what went wrong and a hint saying how to fix it."""

    code = "memdir_error"
    exit_code = 1
    default_hint = "Run `memdir doctor` to check the memory directories and the index."

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint

    def __str__(self) -> str:
        return f"{self.message}\nhint: {self.hint}"


class InvalidMemoryError(MemdirError):
    """A value given for a memory (content, relevance, name, tags...) is not acceptable."""

    code = "invalid_memory"
    exit_code = 2
    default_hint = "Check the value and try again; `memdir store --help` lists the fields."


class UnknownTypeError(InvalidMemoryError):
    """A type that the store's taxonomy does not contain."""

    code = "unknown_type"

    def __init__(self, given: str, preset: str, valid: list[str]) -> None:
        super().__init__(
            f"unknown memory type {given!r} for taxonomy {preset!r}",
            f"use one of: {', '.join(valid)}",
        )
        self.given = given
        self.valid = valid


class SecretDetectedError(InvalidMemoryError):
    """Content that looks like a credential; memdir never stores secrets."""

    code = "secret_detected"

    def __init__(self, what: list[str]) -> None:
        super().__init__(
            f"refusing to store a memory containing a secret: {', '.join(what)}",
            "remove the secret (or wrap it in <private>…</private> to have it stripped) and "
            "store the memory again; keep credentials in a secret manager, not in memory",
        )
        self.what = what


class MemoryNotFoundError(MemdirError):
    code = "not_found"
    exit_code = 3
    default_hint = "Use `memdir list` or `memdir search` to find the memory's id."


class MissingExtraError(MemdirError):
    """A command needs an optional part of the package (an extra: ``memdir[mcp]``,
    ``memdir[server]``...) that is not installed; :mod:`memdir.core.extras` says which and how."""

    code = "missing_extra"
    default_hint = 'Install the extra the message names, e.g. pip install "memdir[all]".'


class DuplicateNameError(MemdirError):
    code = "duplicate"
    exit_code = 2
    default_hint = "Choose another name."


class PathTraversalError(MemdirError):
    """A path built from input would escape its memory directory. Fail closed, write nothing."""

    code = "path_traversal"
    exit_code = 2
    default_hint = (
        "Use a plain relative file name inside the memory directory: no '..', no absolute "
        "path, no backslash, no encoded or look-alike characters, no symlink leading outside."
    )


class MemoryFileError(MemdirError):
    """A memory file that cannot be parsed. It is reported and skipped, never modified."""

    code = "bad_memory_file"
    exit_code = 2
    default_hint = (
        "Fix the YAML frontmatter between the two '---' lines (or delete the file); "
        "`memdir doctor` lists every broken file."
    )


class ConfigError(MemdirError):
    code = "bad_config"
    exit_code = 2
    default_hint = "Fix the setting in config.toml; `memdir doctor` shows which files are read."


class CodexTrustError(ConfigError):
    """Codex could not be asked to trust memdir's hooks (:mod:`memdir.agents.codex_trust`)."""

    code = "codex_trust"
    default_hint = ("run `codex`, type /hooks and trust the memdir hooks (or put `codex` on "
                    "PATH and run `memdir hooks install --agent codex` again)")


class IndexCorruptError(MemdirError):
    code = "index_corrupt"
    default_hint = (
        "The index is derived data: delete index.sqlite (usage counters are lost) or run "
        "`memdir reindex` to rebuild it from the memory files."
    )


class DatabaseError(MemdirError):
    """The PostgreSQL store (a team server's database) could not be reached or failed."""

    code = "database_error"
    default_hint = (
        "Is PostgreSQL running and reachable? Check the URL (postgresql://user@host:5432/db, "
        "from --database or MEMDIR_DATABASE), the password and the user's rights."
    )


class IndexBusyError(MemdirError):
    """Another process held the index's write lock for longer than the busy timeout."""

    code = "index_busy"
    default_hint = (
        "Another memdir process is writing a lot at once (a bulk import or reindex?); "
        "try again when it has finished."
    )


class LLMError(MemdirError):
    """One LLM call failed. :class:`LLM` turns it into a warning; providers raise it. A call
    that failed after the model answered (a reply that is not JSON) still cost tokens: they
    travel with the error so the ledger counts them."""

    code = "llm_error"
    default_hint = (
        "memdir works without the LLM (rules and ranked search); check the [llm] settings in "
        "$MEMDIR_HOME/config.toml, or set MEMDIR_LLM=none to turn it off."
    )

    def __init__(self, message: str, hint: str | None = None, *, input_tokens: int = 0,
                 output_tokens: int = 0) -> None:
        super().__init__(message, hint)
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens


class ServerError(MemdirError):
    """The team server (``MEMDIR_SERVER``) could not be reached or refused a request. Reads
    fall back to the local mirror of the team memories; writes to the team scope fail."""

    code = "server_error"
    default_hint = (
        "Is `memdir serve` running at the URL in MEMDIR_SERVER (or [server] url in "
        "$MEMDIR_HOME/config.toml)? `memdir team status` checks the connection."
    )


class ReadOnlyHomeError(MemdirError):
    """A write to a home that cannot be written (memdir.core.readonly); reads still work."""

    code = "read_only_home"
    default_hint = (
        "Make the memory home writable (`chmod -R u+w \"$MEMDIR_HOME\"`, or mount it "
        "read-write), or set MEMDIR_HOME to a writable folder; reading works meanwhile."
    )


class UnsafeFileError(MemdirError):
    """A file in a memory directory that memdir will not read or replace: a symlink, a
    special file (a FIFO, a device), or a file over the size cap of its kind. It is skipped,
    reported by doctor, and left exactly as it is."""

    code = "unsafe_file"
    exit_code = 2
    default_hint = "Remove it or replace it with a regular file."
