"""Where memory lives: the home, project keys, git roots, and the path-traversal defence.

Invariants:
- Every path built from input (a file name, a team file, an import) goes through
  :func:`safe_join`, which fails closed with :class:`PathTraversalError` before anything is
  written. Its three layers follow seed 004: (1) reject dangerous input outright (NUL bytes,
  URL-encoded or Unicode look-alike separators and dots, backslashes, absolute paths, ``..``);
  (2) normalise and prefix-check against the base directory *with a trailing separator*
  (so ``team-evil/`` never matches ``team/``); (3) resolve symlinks of the deepest existing
  ancestor and prefix-check again against the real base.
- All worktrees of one repository share one project key: the key is derived from the main
  repository's root (the parent of ``git rev-parse --git-common-dir``), found here by reading
  ``.git`` files directly, without spawning git.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISLNK

from memdir.core.errors import PathTraversalError

__all__ = [
    "GitRoots",
    "claude_code_memory_dir",
    "default_home",
    "find_git_roots",
    "project_key",
    "real_join",
    "safe_join",
    "xdg_dir",
]

_MAX_KEY = 200


def default_home() -> Path:
    """Where memdir keeps its files without MEMDIR_HOME: the platform's user data folder."""
    xdg = xdg_dir("XDG_DATA_HOME", "~/.local/share")
    if xdg is not None:
        return xdg / "memdir"
    from platformdirs import user_data_dir

    return Path(user_data_dir("memdir", appauthor=False))


def xdg_dir(variable: str, default: str) -> Path | None:
    """On Linux, the XDG base folder ``variable`` names (an absolute path) or ``default``, as
    platformdirs reads it; None elsewhere (ask platformdirs). Every command resolves its
    config file and home, and importing platformdirs cost 5-8 ms of each."""
    if sys.platform != "linux" or hasattr(sys, "getandroidapilevel") or (
            os.environ.get("ANDROID_DATA") == "/data"
            and os.environ.get("ANDROID_ROOT") == "/system"):
        return None
    value = os.environ.get(variable, "")
    return Path(value if value.strip() and os.path.isabs(value) else os.path.expanduser(default))


def project_key(root: Path) -> str:
    """A flat directory name for a project root, as Claude Code names ~/.claude/projects/."""
    text = str(root)
    key = re.sub(r"[^A-Za-z0-9]", "-", text)
    if len(key) > _MAX_KEY:
        import hashlib

        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        key = key[: _MAX_KEY - 13] + "-" + digest
    return key


def claude_code_memory_dir(root: Path) -> Path:
    """Claude Code's auto-memory directory for a project root."""
    return Path.home() / ".claude" / "projects" / project_key(root) / "memory"


@dataclass(frozen=True)
class GitRoots:
    canonical: Path  # the main repository's root: one per repository, shared by worktrees
    worktree: Path  # the checkout the directory is in (team memory lives here, with the code)
    in_git: bool


def find_git_roots(start: Path) -> GitRoots:
    """The canonical and worktree roots for ``start``; the directory itself outside git."""
    start = start.resolve()
    for d in (start, *start.parents):
        dotgit = d / ".git"
        if dotgit.is_dir():
            return GitRoots(d, d, True)
        if dotgit.is_file():
            return GitRoots(_canonical_from_gitfile(d, dotgit), d, True)
    return GitRoots(start, start, False)


_GITFILE_MAX = 4096  # "gitdir: <path>\n": a path, never a long file


def _small_file(path: Path) -> str | None:
    """A ``.git`` or ``commondir`` file's text: None unless a regular file (a FIFO is never
    waited on) of at most a path's length, as UTF-8 without NUL. These are in repositories
    anyone may have committed to."""
    from memdir.core.errors import UnsafeFileError
    from memdir.core.safe_open import read_head

    try:
        data, st = read_head(path, _GITFILE_MAX + 1, follow=True)
        if st.st_size > _GITFILE_MAX or len(data) > _GITFILE_MAX or b"\0" in data:
            return None
        return data.decode("utf-8").strip()
    except (OSError, UnsafeFileError, UnicodeDecodeError):
        return None


def _canonical_from_gitfile(worktree: Path, dotgit: Path) -> Path:
    line = _small_file(dotgit)
    if line is None:
        return worktree
    if not line.startswith("gitdir:"):
        return worktree
    gitdir = Path(line[len("gitdir:") :].strip())
    if not gitdir.is_absolute():
        gitdir = (worktree / gitdir).resolve()
    commondir_file = gitdir / "commondir"
    if not commondir_file.is_file():
        return worktree  # a submodule: its own checkout is its root
    text = _small_file(commondir_file)
    if text is None:
        return worktree
    common = Path(text)
    if not common.is_absolute():
        common = (gitdir / common).resolve()
    # <main>/.git -> <main>; a bare repository is its own root.
    return common.parent if common.name == ".git" else common


_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


def unquote(text: str) -> str:
    """Percent-decoding (as urllib.parse.unquote, byte-wise; without its import cost)."""
    if "%" not in text:
        return text
    out = bytearray()
    last = 0
    for match in _PERCENT.finditer(text):
        out += text[last : match.start()].encode("utf-8", "surrogatepass")
        out.append(int(match.group(1), 16))
        last = match.end()
    out += text[last:].encode("utf-8", "surrogatepass")
    return out.decode("utf-8", errors="replace")


_LOOKALIKES = re.compile(r"[\u2024\u2025\u2026\uFE52\uFF0E\u2215\u2044\uFF0F\u29F8\uFF3C\uFE68]")
_DRIVE = re.compile(r"^[A-Za-z]:")


def _check_input(relative: str) -> None:
    """Layer 1: refuse input that is dangerous however it would be interpreted."""
    if not isinstance(relative, str) or not relative:
        raise PathTraversalError("empty path")
    if "\x00" in relative:
        raise PathTraversalError(f"path contains a NUL byte: {relative!r}")
    decoded = unquote(relative)
    if decoded != relative and (".." in decoded or "/" in decoded or "\\" in decoded):
        raise PathTraversalError(f"URL-encoded traversal in path: {relative!r}")
    if "%" in decoded and unquote(decoded) != decoded:
        raise PathTraversalError(f"doubly URL-encoded path: {relative!r}")
    normalised = unicodedata.normalize("NFKC", relative)
    if normalised != relative and (".." in normalised or "/" in normalised or "\\" in normalised):
        raise PathTraversalError(f"Unicode look-alike characters in path: {relative!r}")
    if _LOOKALIKES.search(relative):
        raise PathTraversalError(f"Unicode look-alike dot or slash in path: {relative!r}")
    if "\\" in relative:
        raise PathTraversalError(f"backslash in path: {relative!r}")
    if relative.startswith("/") or _DRIVE.match(relative) or os.path.isabs(relative):
        raise PathTraversalError(f"absolute path not allowed: {relative!r}")
    if any(part == ".." for part in relative.split("/")):
        raise PathTraversalError(f"'..' in path: {relative!r}")


def _resolve_below(joined: str, base: str, real_base: str) -> str:
    """Layer 3 helper: the real path of ``joined`` (inside ``base``) as far as it exists.

    Walks down from the base one component at a time with one ``lstat`` each: a component
    that does not exist ends the walk (the rest is re-attached as is), a symlink is resolved
    with ``realpath``. For a new or ordinary file directly in the base this costs one call.
    """
    # ``joined`` is normalised and inside ``base`` (layer 2), so slicing is relpath, faster.
    parts = joined[len(base):].lstrip(os.sep).split(os.sep)
    current = base
    for n, part in enumerate(parts):
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except (FileNotFoundError, NotADirectoryError):  # the rest does not exist yet
            return os.path.join(real_base, *parts)
        if S_ISLNK(mode):
            return os.path.join(os.path.realpath(current), *parts[n + 1 :])
    return os.path.join(real_base, *parts)


def _inside(child: str, base: str) -> bool:
    base_sep = base if base.endswith(os.sep) else base + os.sep
    return child == base or child.startswith(base_sep)


# A plain file name: one component of ASCII letters, digits, '_', '-' and '.', not starting
# with '.'. No layer-1 rule can refuse one, and joined to a directory it stays inside it.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


def safe_join(base: Path, relative: str, *, real_base: str | None = None,
              exclusive: bool = False) -> Path:
    """``base / relative``, guaranteed to stay inside ``base``; PathTraversalError otherwise.

    ``real_base`` is ``os.path.realpath(base)`` when the caller already has it (a batch
    joining many names to one directory). ``exclusive``: the caller creates the file with an
    exclusive create, which fails on anything already at the name, a symlink included; for
    a plain file name that leaves no symlink to check, so the join costs no system call.
    """
    if exclusive and isinstance(relative, str) and _PLAIN_NAME.fullmatch(relative):
        return Path(os.path.normpath(os.path.abspath(base)), relative)
    _check_input(relative)
    # Layer 2: string-level normalisation and prefix check with a trailing separator.
    base_abs = os.path.normpath(os.path.abspath(base))
    joined = os.path.normpath(os.path.join(base_abs, relative))
    if not _inside(joined, base_abs) or joined == base_abs:
        raise PathTraversalError(f"path escapes {base_abs}: {relative!r}")
    # Layer 3: symlinks. The real path of the deepest existing ancestor must stay inside the
    # real base, so a symlink planted inside the directory cannot lead writes outside it.
    if real_base is None:
        real_base = os.path.realpath(base_abs)
    real = _resolve_below(joined, base_abs, real_base)
    if not _inside(real, real_base) or real == real_base:
        raise PathTraversalError(
            f"path {relative!r} resolves through a symlink to {real}, outside {real_base}"
        )
    return Path(joined)


def real_join(base: Path, relative: str) -> Path:
    """:func:`safe_join`, and no part of ``relative`` that exists is a symlink: for a folder
    memdir made itself in a repository (``.memdir/team``), where a committed symlink, even to
    another folder of the same repository, would lead reads and writes somewhere memdir
    never put them. PathTraversalError otherwise."""
    joined = safe_join(base, relative)
    path = Path(os.path.normpath(os.path.abspath(base)))
    for part in Path(relative).parts:
        path = path / part
        try:
            if S_ISLNK(os.lstat(path).st_mode):
                raise PathTraversalError(
                    f"{path} is a symlink (to {os.readlink(path)!r}); memdir does not follow "
                    "a symlink it did not make, so it is not used")
        except FileNotFoundError:
            break
    return joined
