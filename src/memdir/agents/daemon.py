"""A warm memdir for hooks: the embedding model loaded once, recall served over a Unix socket.

Loading the model costs about 0.4 s, far too much for a hook that runs on every prompt. The
daemon (``memdir daemon``) keeps it loaded and answers hook requests; a hook that finds no
daemon recalls with FTS in its own process and starts one for next time (when the ``embed``
extra is installed and ``MEMDIR_DAEMON`` is not ``0``). The daemon exits after
``IDLE_SECONDS`` (or ``$MEMDIR_DAEMON_IDLE``) without a request.

The model loads in the background at start-up (requests answered meanwhile recall with FTS
alone), and the background worker (:mod:`memdir.retrieval.vector_worker`) embeds the memories that
lack a vector: woken by each request's search, and every ``IDLE_CHECK`` seconds while nobody
asks (files stored by hooks in other processes), yielding to requests.

Protocol, one request per connection: a hook event as ``HOOK ...`` (a line and the agent's
JSON; :mod:`memdir.agents.hook_client`), answered with exactly what the hook prints
(:mod:`memdir.agents.daemon_hooks`); or one JSON object per line each way:
``{"op": "ping"}`` -> ``{"ok": true, "pid": ..., "model": true once the model is loaded}``;
errors -> ``{"ok": false, "error": message, "hint": hint}``. A request names its home: a
daemon serving another one refuses it.

Invariants:
- One daemon per home: the socket is bound exclusively; a socket file nobody answers on is
  stale and is replaced.
- What a hook shows is claimed for the session by the process that shows it: the daemon
  claims only before the request's deadline, after which the hook has given up and recalls
  by itself (:mod:`memdir.agents.hook_events`).
- Requests are served one at a time (each is a few milliseconds of SQLite and one small
  model call), so one ``Memdir`` per project is never used from two threads.
- The socket is only reachable by the user (0600 in a 0700 directory).
- Nobody else can stand in for the daemon: the temp dir is shared, so another local user can
  create ``memdir-<uid>`` first and listen there. Hooks and the daemon use the directory only
  if it is a real directory (not a symlink) of this user that nobody else may enter
  (:func:`_private_dir`), and a hook talks only to a peer of its own uid (``SO_PEERCRED``,
  where the platform has it). Otherwise they warn and go without the daemon.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import socket

    from memdir.memdir import Memdir

__all__ = ["IDLE_SECONDS", "ask", "listening", "serve", "socket_path", "start_daemon"]

IDLE_SECONDS = 900.0
IDLE_CHECK = 2.0  # seconds between looks for memories without a vector while nobody asks
_MAX_REQUEST = 1 << 20


def socket_path(home: Path) -> Path:
    """The daemon's socket for a home. Unix socket paths are short (about 100 bytes), so it
    lives in a private directory under the temp dir ($TMPDIR, else /tmp), named after the
    home directory's device and inode numbers: the same however the home is spelled, and
    free to compute in a hook (:func:`memdir.agents.hook_client.socket_file`). Inode numbers
    are reused, so every request names its home and the daemon checks it."""
    from memdir.agents.hook_client import socket_file

    return Path(socket_file(str(home)))


_warned: set[str] = set()  # one warning per directory and process, not one per call


def _private_dir(directory: Path, make_parents: bool = False) -> bool:
    """True if ``directory`` is fit to hold the daemon's socket: a real directory (not a
    symlink) owned by this user, with no permission for group or others. Made (0700) when
    missing, so that nobody else can take the name later; checked again after, whatever the
    umask did or whoever won a race. Otherwise False and a warning saying how to fix it.
    A missing temp dir ($TMPDIR may name one) is made with ``make_parents``, else it means
    quietly that no daemon listens there."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        if make_parents:
            with contextlib.suppress(OSError):  # if it fails, so does the mkdir below
                directory.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass  # made meanwhile, perhaps by someone else: checked below
        except FileNotFoundError:
            if not make_parents:
                return False  # no temp dir: no daemon either
            return _refuse(directory, "the temp dir it lives in cannot be made",
                           "check $TMPDIR (else /tmp)")
        except OSError as exc:
            return _refuse(directory, f"it cannot be made ({exc.strerror or exc})",
                           "check that the temp dir ($TMPDIR, else /tmp) exists and is writable")
        try:
            st = os.lstat(directory)
        except OSError as exc:
            return _refuse(directory, f"it cannot be read ({exc.strerror or exc})",
                           "check the temp dir ($TMPDIR, else /tmp)")
    except OSError as exc:
        return _refuse(directory, f"it cannot be read ({exc.strerror or exc})",
                       "check the temp dir ($TMPDIR, else /tmp)")
    import stat

    if not stat.S_ISDIR(st.st_mode):
        kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a directory"
        return _refuse(directory, f"it is {kind}", f"remove {directory}")
    if st.st_uid != os.getuid():
        return _refuse(directory, f"it is owned by uid {st.st_uid}, not by you "
                       f"(uid {os.getuid()})",
                       f"remove {directory} (as its owner or root); memdir makes it again")
    if st.st_mode & 0o077:
        return _refuse(directory, f"others may use it (mode {st.st_mode & 0o777:o})",
                       f"run `chmod 700 {directory}`")
    return True


def _refuse(directory: Path, problem: str, fix: str) -> bool:
    if str(directory) not in _warned:
        _warned.add(str(directory))
        from memdir.core.errors import warn

        warn("memdir: the recall daemon is not used: its socket directory %s is unsafe: %s. "
             "hint: %s", directory, problem, fix)
    return False


def _readline(conn: socket.socket, deadline: float) -> bytes:
    """What ``conn`` sent up to its first line's end, or more (a ``HOOK`` line's payload may
    follow in the same packet), or all it sent before closing."""
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or len(data) > _MAX_REQUEST:
            raise TimeoutError("no complete line in time")
        conn.settimeout(left)
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def listening(home: Path) -> bool:
    """Whether a daemon may listen for ``home``: its socket exists in a safe directory. An
    unsafe directory is warned about (once per process), with the fix."""
    path = socket_path(home)
    return _private_dir(path.parent) and path.exists()


def ask(home: Path, request: dict[str, Any], timeout: float = 2.0) -> dict[str, Any] | None:
    """The daemon's answer, or None when there is no daemon, it did not answer in time, or
    what listens is not safely ours (an unsafe socket directory, warned; a peer of another
    user): then the request, which holds the prompt, is never sent."""
    if not listening(home):
        return None
    import socket  # only when a daemon may be listening: ~5 ms

    from memdir.agents.hook_client import peer_is_me

    path = socket_path(home)
    request = {**request, "home": str(home)}  # the daemon checks it serves this very home

    deadline = time.monotonic() + timeout
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(min(0.2, timeout))
            conn.connect(str(path))
            if not peer_is_me(conn):  # someone else listens there: never send the prompt
                return None
            conn.sendall(json.dumps(request).encode() + b"\n")
            answer = json.loads(_readline(conn, deadline) or b"null")
    except (OSError, ValueError, TimeoutError):
        return None
    return answer if isinstance(answer, dict) else None


def start_daemon(home: Path) -> bool:
    """Start a daemon for ``home`` in the background, if it makes sense; True if started.
    Without the ``embed`` extra it still pays: the hooks skip their start-up and recall by
    words from an open index."""
    if os.environ.get("MEMDIR_DAEMON", "").strip().lower() in ("0", "off", "false", "no"):
        return False
    if ask(home, {"op": "ping"}, timeout=0.3) is not None:
        return False
    if not _private_dir(socket_path(home).parent, make_parents=True):
        return False  # it would refuse to bind there (warned)
    import subprocess

    idle = os.environ.get("MEMDIR_DAEMON_IDLE", "").strip()  # seconds; tests set it short
    extra = ["--idle", idle] if idle.replace(".", "", 1).isdigit() else []
    subprocess.Popen([sys.executable, "-m", "memdir", "daemon", "--home", str(home), *extra],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    return True


def _handle(request: Any, home: Path) -> dict[str, Any]:
    if not isinstance(request, dict):
        return {"ok": False, "error": "the request is not a JSON object",
                "hint": "send one JSON object per line"}
    if "home" in request and not _same_dir(str(request["home"]), home):
        # The socket is named by the home's inode: a home deleted and made again can get the
        # number of one this daemon still serves. Never answer for another home.
        return {"ok": False, "error": f"this daemon serves {home}, not {request['home']}",
                "hint": "it exits when idle; recall runs in the hook meanwhile"}
    if request.get("op") == "ping":
        from memdir.retrieval.vector_worker import model

        return {"ok": True, "pid": os.getpid(), "model": model(wait=False) is not None}
    return {"ok": False, "error": f"unknown op {request.get('op')!r}",
            "hint": "use ping, or HOOK for a hook event"}


def _serve_one(conn: socket.socket, home: Path, store: Any) -> None:
    """Read one request from ``conn`` and answer it (never raises for a bad client)."""
    from memdir.agents import daemon_hooks

    deadline = time.monotonic() + 5
    try:
        data = _readline(conn, deadline)
    except (TimeoutError, OSError):
        return
    line, _, rest = data.partition(b"\n")
    if line.startswith(b"HOOK "):
        request = daemon_hooks.parse_head(line)
        if request is None:
            reply = b"NO bad request\n"
        else:
            try:
                while len(rest) < request.size and time.monotonic() < deadline:
                    conn.settimeout(max(0.01, deadline - time.monotonic()))
                    chunk = conn.recv(min(1 << 20, request.size - len(rest)))
                    if not chunk:
                        break
                    rest += chunk
            except OSError:
                return
            reply = b"NO short\n" if len(rest) != request.size else daemon_hooks.answer(
                request, rest, home, store, lambda other: _same_dir(other, home))
    else:
        try:
            parsed = json.loads(line or b"null")
        except ValueError:
            parsed = None
        reply = json.dumps(_handle(parsed, home)).encode() + b"\n"
    with contextlib.suppress(OSError):
        conn.sendall(reply)


def _same_dir(a: str, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # either is gone
        return False


def _look(md: Memdir) -> None:
    """Wake the worker for a store whose index changed (memories stored by hooks, which do
    not embed): the worker fills in the background. Never raises: the daemon stays up."""
    from memdir.retrieval import vectors

    try:
        vectors.after_search(md)
    except Exception as exc:  # a locked or vanished index: the next look, or a request
        from memdir.core.errors import note

        note("memdir daemon: vectors not looked at: %s", exc)


def _bind(path: Path) -> socket.socket | None:
    import socket

    if not _private_dir(path.parent):  # checked by serve too; never bind anywhere else
        return None
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
    except OSError:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(0.5)
            probe.connect(str(path))
            server.close()
            return None  # a live daemon answers there already
        except OSError:
            with contextlib.suppress(OSError):
                path.unlink()  # stale: its daemon is gone
            server.bind(str(path))
        finally:
            probe.close()
    os.chmod(path, 0o600)
    server.listen(16)
    return server


def _failed(home: Path, exc: Exception) -> None:
    from memdir.agents.hooks import _log

    _log("daemon", f"a request failed: {exc.__class__.__name__}: {exc}", home)


def _bind_tcp(home: Path, port: int) -> socket.socket | None:
    """The loopback listener of Claude Code's HTTP hooks; None (logged, with the fix) when
    the port is taken."""
    import socket

    web = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        web.bind(("127.0.0.1", port))
    except OSError as exc:
        web.close()
        from memdir.agents.hooks import _log

        _log("daemon", f"Claude Code's HTTP hooks cannot reach memdir: 127.0.0.1:{port} is "
                       f"taken ({exc.strerror or exc}); run `memdir hooks install --agent "
                       "claude-code --http` again to move to a free port", home)
        return None
    web.listen(16)
    return web


def serve(home: Path, idle: float = IDLE_SECONDS) -> int:
    """Serve until ``idle`` seconds pass without a request. 0 when done (or another daemon
    already serves this home); 1 when the socket's directory is unsafe (warned)."""
    import signal
    import threading

    from memdir.retrieval.vector_worker import start_loading

    home.mkdir(parents=True, exist_ok=True)  # its inode names the socket
    path = socket_path(home)
    if not _private_dir(path.parent, make_parents=True):
        return 1
    server = _bind(path)
    if server is None:
        return 0
    if threading.current_thread() is threading.main_thread():
        # A polite stop (SIGTERM) still removes the socket: leave through the finally below.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    start_loading()  # in the background: the first requests recall with FTS meanwhile
    stores: dict[str, Memdir] = {}
    from memdir.agents import daemon_hooks, http_hooks

    store = daemon_hooks.stores_for(home, stores)
    target = http_hooks.load(home)
    web = _bind_tcp(home, target.port) if target is not None else None
    if web is not None and idle == IDLE_SECONDS:  # Claude Code's HTTP hooks rely on it
        idle = http_hooks.HTTP_IDLE_SECONDS
    import selectors

    listening = selectors.DefaultSelector()
    for sock in (server, web):
        if sock is not None:
            listening.register(sock, selectors.EVENT_READ)
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle:
            wait = max(0.05, idle - (time.monotonic() - last))
            ready = listening.select(min(wait, IDLE_CHECK) if stores else wait)
            if not ready:
                for md in stores.values():
                    _look(md)
                continue
            for key, _ in ready:
                try:
                    conn, _ = key.fileobj.accept()  # type: ignore[union-attr]
                except OSError:
                    continue
                last = time.monotonic()
                with conn:
                    try:
                        if key.fileobj is web and target is not None:
                            http_hooks.serve_one(conn, target, lambda action, body: (
                                daemon_hooks.http_answer(action, body, home, store)))
                        else:
                            _serve_one(conn, home, store)
                    except Exception as exc:  # one request's failure never ends the daemon
                        _failed(home, exc)
    finally:
        listening.close()
        server.close()
        if web is not None:
            web.close()
        with contextlib.suppress(OSError):
            path.unlink()
        for md in stores.values():
            md.close()
    return 0
