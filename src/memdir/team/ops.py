"""The team part of the :class:`~memdir.memdir.Memdir` facade: the team scope over the
network, and conflicts between private and team memories. Each function takes the facade first; the
facade's class body binds the public ones as its methods, and its write path calls the rest
(:func:`team_path`, :func:`pull_if_due`, :func:`place`, :func:`write_new`, :func:`apply_change`,
:func:`remove_memory`). The facade keeps the state: ``_remote_on`` (False for a server's own store,
which never calls out), ``_server_memo`` and ``_client_memo``.

With a team server configured (:func:`memdir.team.remote.server_settings`), the team memory
directory is the server's mirror (:mod:`memdir.team.mirror`) instead of ``<repo>/.memdir/team/``:

- reads merge it with the local scopes like any memory directory; before reconciling, the
  facade pulls it, at most once per ``PULL_INTERVAL`` per home, with a short timeout; a
  failed pull is a logged warning and the mirror is used as it is (hooks never break, and
  commands keep working offline);
- writes to the team scope (store, update, reclassify, archive, restore, delete) go to the
  server first, and the mirror takes the server's answer, so ids agree everywhere; if the
  server cannot be reached, the write fails with a hint and nothing changes locally.

Without a server nothing here touches the network, and nothing network-related is imported.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdir.core import store as st
from memdir.core.errors import MemdirError, MemoryNotFoundError, ServerError, warn
from memdir.core.model import Memory, Scope
from memdir.retrieval import vectors
from memdir.team.remote import PULL_TIMEOUT, WRITE_TIMEOUT, ServerSettings, server_settings
from memdir.upkeep.ops import sweep_temps

# How many of its best full-text matches a new memory is checked against for a conflict.
NEIGHBOURS = 8

if TYPE_CHECKING:
    from memdir.memdir import Memdir
    from memdir.team.mirror import PullReport, TeamStatus
    from memdir.team.remote import ServerClient

__all__ = ["apply_change", "conflicts", "place", "pull_if_due", "pull_team", "remove_memory",
           "send_new", "server", "team_path", "team_status", "write_new"]


# Fields a PATCH can change (docs/api.md), as Memory attribute -> API key.
_PATCHABLE = {"body": "content", "name": "name", "description": "description", "tags": "tags",
              "paths": "paths", "relevance": "relevance", "meta": "meta", "type": "type",
              "status": "status"}


def server(md: Memdir) -> ServerSettings | None:
    """The team server in use (MEMDIR_SERVER / ``[server] url``), or None."""
    if md._server_memo is None:
        md._server_memo = (server_settings(md.home) if md._remote_on else None,)
    return md._server_memo[0]


def team_path(md: Memdir) -> Path:
    if md.server is None:
        return md.roots.worktree / ".memdir" / "team"
    from memdir.team.mirror import mirror_root

    return mirror_root(md.home, md.server) / "team"


def _client(md: Memdir) -> ServerClient:
    assert md.server is not None
    if md._client_memo is None:
        from memdir.team.remote import ServerClient

        md._client_memo = ServerClient(md.server)
    return md._client_memo


def pull_team(md: Memdir, *, force: bool = True) -> PullReport | None:
    """Bring the mirror of the team server up to date; None without a server, or when
    not ``force``d and the last pull of this home is recent. Unforced, a failure is
    logged and None returned; forced, it raises."""
    if md.server is None:
        return None
    from memdir.team.mirror import mark_pull, pull, pull_due

    root = team_path(md).parent
    if not force and not pull_due(root):
        return None
    mark_pull(root, ok=None)  # claims the slot first: other processes skip meanwhile
    try:
        report = pull(_client(md), md.directory("team"),
                      timeout=WRITE_TIMEOUT if force else md.server.timeout)
    except (MemdirError, OSError) as exc:
        message = exc.message if isinstance(exc, MemdirError) else str(exc)
        mark_pull(root, ok=False, error=message)
        if force:
            raise
        warn("memdir: team memories not updated, using the local mirror: %s "
             "(hint: %s)", message, getattr(exc, "hint", ServerError.default_hint))
        return None
    mark_pull(root, ok=True, report=report)
    for refused in report.refused:
        warn("memdir: refused a team memory from %s: %s", report.url, refused)
    return report


def pull_if_due(md: Memdir) -> None:
    if md.server is not None:
        md.pull_team(force=False)


def team_status(md: Memdir, *, check: bool = True) -> TeamStatus:
    """Where the team scope lives, what the mirror holds, how the last pull went; with
    ``check``, whether the server answers now."""
    from memdir.team.mirror import TeamStatus, last_pull

    md.reconcile()
    counts = {"active": 0, "archived": 0}
    for memory in md.list(scopes=["team"], status="all"):
        counts[memory.status] = counts.get(memory.status, 0) + 1
    path = str(team_path(md))
    if md.server is None:
        return TeamStatus(None, False, path, counts["active"], counts["archived"])
    reachable, error = None, None
    if check:
        try:
            _client(md).health(timeout=max(PULL_TIMEOUT, md.server.timeout) * 3)
            reachable = True
        except MemdirError as exc:
            reachable, error = False, f"{exc.message} (hint: {exc.hint})"
    return TeamStatus(md.server.url, bool(md.server.token), path, counts["active"],
                      counts["archived"], last_pull(team_path(md).parent), reachable,
                      error)


def _remote(md: Memdir, scope: Scope) -> bool:
    return scope == "team" and md.server is not None


def place(md: Memdir, memory: Memory) -> Memory:
    """Put the server's answer into the mirror and the index; the memory as mirrored."""
    from memdir.team.mirror import place

    mdir = md.directory("team")
    old = [m.path for m in md.index.select("m.dir = ? AND m.id = ?", (mdir.key, memory.id))
           if m.path is not None]
    placed = place(mdir, memory, old)
    st.reconcile(md.index, [mdir])
    return placed


def write_new(md: Memdir, scope: Scope, memories: Sequence[Memory]) -> list[Memory]:
    """Store drafted memories: through the server for the team scope, else locally; then
    their vectors when the model is warm (the facade's one funnel for new memories)."""
    from memdir.core.placing import write_new  # only writing commands pay for it

    out = send_new(md, memories) if _remote(md, scope) else write_new(
        md.index, md.directory(scope), memories)
    vectors.after_write(md, len(out))
    sweep_temps(md, always=False)  # temp files of killed writers (memdir.core.temp_files)
    return out


def send_new(md: Memdir, memories: Sequence[Memory]) -> list[Memory]:
    out = []
    for memory in memories:
        fields: dict[str, Any] = {
            "content": memory.body, "type": memory.type, "name": memory.name,
            "description": memory.description, "tags": list(memory.tags),
            "paths": list(memory.paths), "relevance": memory.relevance,
            "meta": dict(memory.meta), "context": memory.context or None,
            "date": memory.date.isoformat() if memory.date else None}
        stored, _ = _client(md).store(fields)
        out.append(place(md, stored))
    return out


def apply_change(md: Memdir, found: Memory, change: Callable[[Memory], Memory],
                 rename: bool) -> Memory:
    """Apply ``change`` to a found memory: the server's copy for a mirrored team memory
    (the change is computed and validated locally, then sent as a PATCH), else the file."""
    assert found.path is not None
    if not _remote(md, found.scope):
        try:
            return st.modify(md.index, md.directory(found.scope), found.path, change,
                             rename=rename, memory_id=found.id)
        except MemoryNotFoundError:  # its file now holds another memory: look again
            md.reconcile()
            again = md._find(found.id, [found.scope])
            assert again.path is not None
            return st.modify(md.index, md.directory(again.scope), again.path, change,
                             rename=rename, memory_id=again.id)
    wanted = change(found)
    fields = {key: _jsonable(getattr(wanted, attr)) for attr, key in _PATCHABLE.items()
              if getattr(wanted, attr) != getattr(found, attr)}
    client = _client(md)
    try:
        if wanted.reinforced > found.reinforced:  # the API reinforces by storing again
            client.store({"content": found.body, "type": found.type})
        if set(fields) == {"status"}:
            verb = "archive" if fields["status"] == "archived" else "restore"
            answer = client.action(found.id, verb)
        else:
            answer = client.update(found.id, fields) if fields else client.get(found.id)
    except MemoryNotFoundError as exc:
        st.remove(md.index, md.directory("team"), found)  # gone from the server
        raise MemoryNotFoundError(exc.message, "it was deleted on the team server; the "
                                  "local mirror no longer shows it") from None
    return place(md, answer)


def remove_memory(md: Memdir, memory: Memory) -> None:
    if _remote(md, memory.scope):
        # Already gone from the server: the deletion is done, the mirror follows.
        with contextlib.suppress(MemoryNotFoundError):
            _client(md).delete(memory.id)
    try:
        st.remove(md.index, md.directory(memory.scope), memory)
    except MemoryNotFoundError:  # its file now holds another memory: look again
        md.reconcile()
        st.remove(md.index, md.directory(memory.scope), md._find(memory.id, [memory.scope]))


def conflicts(md: Memdir, memory: Memory) -> list[Memory]:
    """The active memories that ``memory`` contradicts (:mod:`memdir.upkeep.conflicts`), of
    any type, in any scope in play (user, project, team): found among its ``NEIGHBOURS``
    best matches in the index (:func:`memdir.upkeep.candidates.neighbour_query`), so the
    cost does not grow with the store. Both memories are kept; this only says so."""
    from memdir.retrieval.search import best_matches
    from memdir.upkeep.candidates import neighbour_query
    from memdir.upkeep.conflicts import claim_of, contradicts, find_conflicts

    fts = neighbour_query(claim_of(memory.body)[:2000])
    if not fts:
        return []
    rows = best_matches(md.index.conn, fts, md._dirs(), types=[], tags=None,
                        include_archived=False, limit=NEIGHBOURS, whole=False)
    # The rule on the text first: whole memories only when one of them contradicts it.
    if not any(r["id"] != memory.id and contradicts(memory.body, r["body"]) for r in rows):
        return []
    wanted = [r["rowid"] for r in rows]
    found = md.index.select(f"m.rowid IN ({','.join('?' * len(wanted))})", wanted)
    return find_conflicts(memory, found)


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    return dict(value) if isinstance(value, Mapping) else value
