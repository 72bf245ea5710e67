"""The hook's way to the warm memdir: ``memdir hook session-start`` and ``memdir hook prompt``
handed whole to the daemon (:mod:`memdir.agents.daemon`), without importing memdir.

A hook process is started for every prompt of every agent session; everything it imports is
paid each time. This module imports only what the interpreter has loaded at start-up anyway
(``os``, ``sys``, ``time``), the C module ``_socket`` and ``struct``: not ``json`` (it
pulls in ``re``), not ``socket`` (``enum``), not ``pathlib``, not ``typing``. The agent's
JSON is forwarded unparsed; the daemon parses it.

Protocol (one request per connection): the hook sends one line
``HOOK <event> <format> <by> <home hex> <cwd hex> <size>`` and ``size`` bytes of the agent's
JSON; the daemon answers ``OK <size>`` and that many bytes, exactly what the hook prints, or
``NO <reason>``. ``by`` is a ``time.monotonic()`` instant (one clock for every process of
the machine): the daemon claims nothing for the session after it (a hook that gave up
recalls by itself, so nothing it did not deliver may count as delivered), and the hook
waits ``MARGIN`` longer than that for the answer.

Invariants:
- Anything unexpected (no daemon, an unsafe socket directory, a peer of another user, a
  home this module cannot tell without memdir, a late or malformed answer) returns None, and
  the hook runs in its own process as before (:mod:`memdir.agents.hooks`), which also says
  what was unsafe. Nothing here raises or writes anything.
- The socket is used only in a directory that is this user's alone, and only with a peer
  of this user's uid (``SO_PEERCRED`` where the platform has it), as :func:`daemon.ask`.
"""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket
    from collections.abc import Sequence

__all__ = ["MARGIN", "WAITS", "answer_hook", "ask_daemon", "guess_home", "hook_options",
           "peer_is_me", "socket_file"]

# Seconds a hook waits for the daemon's answer to an event before running it by itself.
WAITS = {"prompt": 0.5, "session-start": 1.5}
MARGIN = 0.15  # seconds between the daemon's last claim and the hook giving up
_MAX_ANSWER = 1 << 20


def hook_options(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """``memdir hook`` arguments: (``--home``/``--format``/``--project`` values, the other
    words). Options may come anywhere; unknown options are dropped (a hook never fails on its
    arguments)."""
    options: dict[str, str] = {}
    words: list[str] = []
    rest = list(argv)
    while rest:
        word = rest.pop(0)
        name, eq, value = word.partition("=")
        if name in ("--home", "--format", "--project"):
            options[name] = value if eq else (rest.pop(0) if rest else "")
        elif not word.startswith("-"):
            words.append(word)
    return options, words


def guess_home(given: str | None = None) -> str | None:
    """The memdir home as :func:`memdir.core.config.resolve_home` finds it, where that needs
    nothing but the environment; None when it needs more (a user config file that may name
    one, a platform without XDG folders): then the hook resolves it the full way."""
    value = given or os.environ.get("MEMDIR_HOME")
    if value:
        return os.path.realpath(os.path.expanduser(value))
    if sys.platform != "linux" or os.environ.get("ANDROID_DATA") == "/data":
        return None
    config = os.environ.get("MEMDIR_CONFIG")
    xdg_config = os.environ.get("XDG_CONFIG_HOME", "")
    if not (xdg_config.strip() and os.path.isabs(xdg_config)):
        xdg_config = os.path.expanduser("~/.config")
    if os.path.lexists(os.path.expanduser(config) if config
                       else os.path.join(xdg_config, "memdir", "config.toml")):
        return None  # it may set `home`: only memdir's own reading can tell
    data = os.environ.get("XDG_DATA_HOME", "")
    if not (data.strip() and os.path.isabs(data)):
        data = os.path.expanduser("~/.local/share")
    return os.path.realpath(os.path.join(data, "memdir"))


def socket_file(home: str) -> str:
    """The daemon's socket for ``home`` (see :func:`memdir.agents.daemon.socket_path`)."""
    try:
        st = os.stat(home)
        name = f"{st.st_dev:x}-{st.st_ino:x}"
    except OSError:
        name = "no-home"  # nothing can serve a home that does not exist: never bound
    root = next((v for v in (os.environ.get(k) for k in ("TMPDIR", "TEMP", "TMP")) if v),
                "/tmp")
    return os.path.join(root, f"memdir-{os.getuid()}", f"{name}.sock")


def _ours(directory: str) -> bool:
    """The socket directory is a real directory of this user that nobody else may enter."""
    try:
        st = os.lstat(directory)
    except OSError:
        return False
    return (st.st_mode & 0o170000 == 0o040000 and st.st_uid == os.getuid()
            and not st.st_mode & 0o077)


def peer_is_me(conn: _socket.socket) -> bool:
    """True if the process at the other end of ``conn`` runs as this user (Linux:
    ``SO_PEERCRED``). Where the platform cannot tell, the private directory is the guard."""
    import _socket

    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:
        return True  # the private directory is the guard
    import struct  # a thin layer over _struct

    try:
        raw = conn.getsockopt(_socket.SOL_SOCKET, option, 12)
        return bool(struct.unpack("iII", raw)[1] == os.getuid())
    except (OSError, ValueError, struct.error):
        return False


def ask_daemon(event: str, fmt: str, home: str, payload: bytes) -> bytes | None:
    """What the hook prints for ``event``, as the warm daemon of ``home`` answers it, or None
    (no daemon, not safely ours, late, or it said no): then the hook runs by itself."""
    wait = WAITS.get(event)
    path = socket_file(home)
    if wait is None or not _ours(os.path.dirname(path)) or not os.path.exists(path):
        return None
    import _socket

    started = time.monotonic()
    by = started + wait - MARGIN
    cwd = os.getcwd().encode("utf-8", "surrogateescape").hex()
    head = (f"HOOK {event} {fmt} {by!r} {home.encode('utf-8', 'surrogateescape').hex()} "
            f"{cwd} {len(payload)}\n").encode("ascii")
    try:
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        conn.settimeout(wait)
        conn.connect(path)
        if not peer_is_me(conn):  # someone else listens there: never send the prompt
            return None
        conn.sendall(head + payload)
        data = b""
        while True:
            left = started + wait - time.monotonic()
            if left <= 0 or len(data) > _MAX_ANSWER:
                return None
            conn.settimeout(left)
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:  # refused, reset, timed out
        return None
    finally:
        conn.close()
    line, _, body = data.partition(b"\n")
    word, _, size = line.partition(b" ")
    if word != b"OK" or not size.isdigit() or int(size) != len(body):
        return None
    return body


def answer_hook(argv: Sequence[str]) -> tuple[bool, bytes | None]:
    """Serve ``memdir hook ARGS`` from the warm daemon: (True, stdin) when it answered and
    its answer is printed; else (False, the agent's JSON if it was read, or None), and the
    hook runs in its own process (:func:`memdir.agents.hooks.hook_main`). Never raises (a
    platform without Unix sockets or uids goes the hook's own way)."""
    raw: bytes | None = None
    try:
        options, words = hook_options(argv)
        event = words[0] if words else ""
        if event not in WAITS or os.environ.get("MEMDIR_DISABLE", "").strip() not in (
                "", "0", "false", "no"):
            return False, None
        home = guess_home(options.get("--home"))
        if home is None or not os.path.exists(socket_file(home)):
            return False, None
        raw = b"" if sys.stdin.isatty() else sys.stdin.buffer.read()
        fmt = "json" if options.get("--format") == "json" else "text"
        answer = ask_daemon(event, fmt, home, raw)
    except Exception:
        return False, raw
    if answer is None:
        return False, raw
    try:
        sys.stdout.buffer.write(answer)
        sys.stdout.flush()
    except (OSError, ValueError):
        pass  # the agent closed the pipe: nothing to deliver to
    return True, raw
