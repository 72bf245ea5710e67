"""The API token: where it is kept, how it is created, how a request's token is checked.

Invariants:
- The token lives in ``$MEMDIR_HOME/server.token``, readable by its owner only (0600). It is
  created complete or not at all: written to a private temporary file (``O_CREAT|O_EXCL``,
  0600) and then hard-linked into place, so two servers starting at once over the same home
  agree on one token and none ever reads a half-written file.
- A token is compared in constant time (:func:`hmac.compare_digest`); a missing, malformed or
  wrong ``Authorization`` header is refused the same way.
- This module imports no web framework: the CLI's ``--show-token`` uses it without starting
  one.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import os
import secrets
import stat
import sys
from pathlib import Path

from memdir.core.errors import ConfigError

__all__ = ["TOKEN_FILE", "is_loopback", "load_or_create_token", "token_matches"]

TOKEN_FILE = "server.token"
_MIN_LENGTH = 16  # a shorter token in the file is not one memdir made, and too easy to guess


def _create(path: Path) -> None:
    token = secrets.token_urlsafe(32)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(token + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):  # another server made it first: use theirs
            os.link(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def load_or_create_token(home: Path) -> str:
    """The server token of ``home``, created on first use."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / TOKEN_FILE
    if not path.exists():
        _create(path)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        print(f"memdir serve: warning: {path} was readable by others (mode {mode:o}); "
              "set it to 0600", file=sys.stderr)
        path.chmod(0o600)
    from memdir.core.safe_open import read_head

    # Bounded, never from a FIFO planted at the name (UnsafeFileError says how to fix it).
    token = read_head(path, 4096, follow=True)[0].decode("utf-8", "replace").strip()
    if len(token) < _MIN_LENGTH or not token.isprintable() or " " in token:
        raise ConfigError(f"the server token in {path} is not usable (empty, too short or "
                          "not printable)",
                          f"delete {path}: the next `memdir serve` creates a new one")
    return token


def token_matches(authorization: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header value carries ``token`` as a Bearer token."""
    if not authorization:
        return False
    scheme, _, given = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode("utf-8", "surrogatepass"),
                               token.encode("utf-8"))


def is_loopback(host: str) -> bool:
    """Whether binding to ``host`` keeps the server on this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere
