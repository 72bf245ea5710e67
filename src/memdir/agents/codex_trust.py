"""Codex runs a hook only once its exact content is trusted: memdir's hooks, through Codex's
own interface.

Codex keeps a ``trusted_hash`` per hook under ``[hooks.state."<key>"]`` of its user config
and skips, silently in ``codex exec``, every hook whose current hash is not the trusted one
(a new hook, or one edited or upgraded since). ``codex app-server`` (JSON-RPC over stdio)
says which hooks there are and their state (``hooks/list``) and records trust the way
Codex's own ``/hooks`` screen does (``config/batchWrite``). memdir never writes those hashes
itself: it asks Codex.

- :func:`codex_command`: the Codex binary (``$MEMDIR_CODEX``, else ``codex`` on PATH).
- :func:`memdir_hooks`: memdir's hooks as Codex sees them for a working directory.
- :func:`trust`: trust memdir's hooks (only memdir's), then list again to verify;
  :func:`install_notes` says what ``memdir hooks install`` did.
- :func:`doctor_problems`: memdir's hooks Codex would skip, for ``memdir doctor``.

Invariants: only hooks whose command runs ``memdir hook`` are touched; a failure (no Codex,
an app-server that does not answer in ``TIMEOUT`` seconds, an error) is a
:class:`CodexTrustError` with what to do instead, never a half-written config (Codex writes
its own file).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdir.agents.hooks_agents import hook_action
from memdir.core.errors import CodexTrustError, ConfigError

if TYPE_CHECKING:
    from memdir.core.model import Problem

__all__ = ["MANUAL", "TIMEOUT", "CodexHook", "CodexTrustError", "codex_command",
           "doctor_problems", "install_notes", "memdir_hooks", "project_trusted", "trust"]

TIMEOUT = 20.0
MANUAL = CodexTrustError.default_hint
_OK = ("trusted", "managed")


@dataclass(frozen=True)
class CodexHook:
    """One memdir hook as Codex lists it: its key in ``[hooks.state]``, event, current
    hash and trust status (``trusted``, ``untrusted``, ``modified``...)."""

    key: str
    event: str
    current_hash: str
    status: str

    @property
    def runs(self) -> bool:
        return self.status in _OK


def codex_command() -> str | None:
    """The Codex binary: ``$MEMDIR_CODEX`` or ``codex`` on PATH; None when neither."""
    given = os.environ.get("MEMDIR_CODEX", "").strip()
    return given or shutil.which("codex")


class _AppServer:
    """A ``codex app-server`` child, asked one request at a time."""

    def __init__(self, codex: str, cwd: Path) -> None:
        try:
            self.proc = subprocess.Popen([codex, "app-server"], cwd=cwd, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError as exc:
            raise CodexTrustError(f"cannot run {codex} app-server: {exc}", MANUAL) from None
        self.selector = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self.selector.register(self.proc.stdout, selectors.EVENT_READ)
        self.buffer = b""
        self.next_id = 0
        self.deadline = time.monotonic() + TIMEOUT

    def close(self) -> None:
        self.selector.close()
        self.proc.kill()
        self.proc.communicate()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def ask(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        ident = self.next_id
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        while True:
            message = self._receive()
            if message.get("id") != ident or "method" in message:
                continue  # a notification, or a request of Codex's own: not the answer
            if "error" in message:
                raise CodexTrustError(f"codex app-server refused {method}: "
                                      f"{message['error'].get('message', message['error'])}",
                                      MANUAL)
            return message.get("result")

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            raise CodexTrustError("codex app-server stopped early", MANUAL) from None

    def _receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while b"\n" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0 or not self.selector.select(left):
                raise CodexTrustError(f"codex app-server did not answer within {TIMEOUT:g} s",
                                      MANUAL)
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise CodexTrustError("codex app-server stopped early", MANUAL)
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            message = json.loads(line)
        except ValueError:
            return {}
        return message if isinstance(message, dict) else {}


@contextlib.contextmanager
def _session(cwd: Path, codex: str | None) -> Iterator[_AppServer]:
    """An initialised ``codex app-server`` (``codex`` or :func:`codex_command`), closed after."""
    codex = codex or codex_command()
    if codex is None:
        raise CodexTrustError("Codex is not on PATH", MANUAL)
    server = _AppServer(codex, cwd)
    try:
        server.ask("initialize", {"clientInfo": {"name": "memdir", "version": "1"}})
        server.notify("initialized", {})
        yield server
    finally:
        server.close()


def _listed(server: _AppServer, cwd: Path) -> list[CodexHook]:
    result = server.ask("hooks/list", {"cwds": [str(cwd)]})
    found = []
    for entry in (result or {}).get("data") or []:
        for hook in entry.get("hooks") or []:
            if hook_action({"type": "command", "command": hook.get("command")}) is None:
                continue  # not memdir's (memdir.agents.hooks_agents says which are)
            found.append(CodexHook(str(hook.get("key")), str(hook.get("eventName")),
                                   str(hook.get("currentHash")),
                                   str(hook.get("trustStatus"))))
    return found


def memdir_hooks(cwd: Path, codex: str | None = None) -> list[CodexHook]:
    """memdir's hooks as Codex sees them from ``cwd`` (user and project layers)."""
    with _session(cwd, codex) as server:
        return _listed(server, cwd)


def trust(cwd: Path, codex: str | None = None) -> list[CodexHook]:
    """Trust memdir's hooks that Codex would skip; memdir's hooks afterwards (each
    :attr:`CodexHook.runs` unless Codex still refuses one)."""
    with _session(cwd, codex) as server:
        hooks = _listed(server, cwd)
        wanted = {h.key: {"trusted_hash": h.current_hash} for h in hooks if not h.runs}
        if wanted:
            server.ask("config/batchWrite", {
                "edits": [{"keyPath": "hooks.state", "value": wanted,
                           "mergeStrategy": "upsert"}],
                "filePath": None, "expectedVersion": None, "reloadUserConfig": True})
            hooks = _listed(server, cwd)
        return hooks


def project_trusted(project: Path) -> bool:
    """Whether ``project`` (or a directory above it) is a trusted project in Codex's user
    config (``[projects."<path>"] trust_level = "trusted"``): Codex reads its ``.codex``
    only then."""
    import tomllib

    from memdir.agents.hooks_install import target
    from memdir.agents.settings_files import read_text

    try:  # the config.toml install writes to, read as install reads it (bounded, no FIFO)
        text = read_text(target("codex", "user", project).mcp_file) or ""
        projects = tomllib.loads(text).get("projects") or {}
    except (ConfigError, ValueError):
        return False
    wanted = [project.resolve(), *project.resolve().parents]
    return any(isinstance(v, dict) and v.get("trust_level") == "trusted"
               and Path(k).expanduser().resolve() in wanted for k, v in projects.items())


def install_notes(cwd: Path, hooks_file: Path, *, ask: bool,
                  project: Path | None = None) -> list[str]:
    """What ``memdir hooks install --agent codex`` says about trust, after asking Codex to
    trust memdir's hooks of ``hooks_file`` (``ask``; else the step for the user).
    ``project``: a project-scope install's project."""
    notes = []
    if project is not None and not project_trusted(project):
        notes.append(f"Codex reads {project / '.codex'} only in a trusted project and "
                     f"{project} is not one yet: start `codex` there once and trust it")
    if not ask:
        return [*notes, f"Codex skips memdir's hooks until you trust them: {MANUAL}"]
    try:
        hooks = [h for h in trust(cwd) if h.key.startswith(f"{hooks_file}:")]
    except CodexTrustError as exc:
        return [*notes, f"Codex will skip memdir's hooks until they are trusted "
                        f"({exc.message}): {exc.hint}"]
    skipped = [f"{h.event} ({h.status})" for h in hooks if not h.runs]
    if skipped:
        return [*notes, f"Codex still skips memdir's hooks {', '.join(skipped)}: {MANUAL}"]
    if not hooks:
        return [*notes, f"Codex does not list the memdir hooks of {hooks_file} yet, so they "
                        f"could not be trusted: {MANUAL}"]
    notes.append(f"trusted memdir's {len(hooks)} Codex hooks through `codex app-server` "
                 "(recorded in Codex's config.toml, [hooks.state]); Codex asks again after "
                 "they change")
    return notes


def doctor_problems(project: Path) -> list[Problem]:
    """memdir's Codex hooks that Codex would skip (untrusted, changed since trusted, in an
    untrusted project), each with its fix; none when memdir has no Codex hooks, or no Codex
    is on PATH to ask."""
    from memdir.core.model import Problem

    ours = {scope: path for scope in ("user", "project")
            if (path := _installed_hooks(scope, project)) is not None}
    codex = codex_command()
    if not ours or codex is None:
        return []
    fix = "run `memdir hooks install --agent codex` (it asks Codex to trust them), or " + MANUAL
    found = []
    if "project" in ours and not project_trusted(project):
        found.append(Problem("codex-hooks", str(ours["project"]), f"Codex skips the hooks of "
                             f"{ours['project']}: {project} is not a trusted Codex project",
                             "start `codex` in the project once and trust it"))
    try:
        hooks = memdir_hooks(project, codex)
    except CodexTrustError as exc:
        return [*found, Problem("codex-hooks", codex, "could not ask Codex whether it runs "
                                f"memdir's hooks: {exc.message}", exc.hint)]
    found += [Problem("codex-hooks", h.key, f"Codex skips memdir's {h.event} hook: it is "
                      f"{h.status} (Codex runs a hook only as it was when trusted)", fix)
              for h in hooks if not h.runs]
    return found


def _installed_hooks(scope: str, project: Path) -> Path | None:
    """The hooks file of ``scope`` when memdir has a hook in it (what ``memdir hooks
    status`` reads); None when it has none or the file cannot be read."""
    from memdir.agents.hooks_install import status

    try:
        found = status("codex", scope, project=project, mcp=True)
    except ConfigError:
        return None  # unreadable: `memdir hooks status --agent codex` says why
    return found.hooks_file if any(h.installed for h in found.hooks) else None
