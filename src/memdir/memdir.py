"""The Memdir facade: the one object every adapter (CLI, hooks, MCP, HTTP) calls.

It resolves the memory directories in play (user, project, team) for a home and a project
path, keeps the index in step with the files (reconcile before reads: at every call of a new
instance, then at most once per ``sync_interval`` seconds of a long-lived one), and routes
every write through :mod:`memdir.core.store`. It holds no state that the files and the index do
not, so any number of processes may use the same home at once.

Besides the write path and search, its methods are package functions bound in the class body.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdir.capture import ops as capture_ops
from memdir.core import store as st
from memdir.core.arguments import checked_limit, scrub, scrub_all
from memdir.core.config import load_config, resolve_home
from memdir.core.errors import InvalidMemoryError, MemoryNotFoundError, PathTraversalError
from memdir.core.index import Index
from memdir.core.model import SCOPES, Hit, Memory, Scope, now, parse_time
from memdir.core.paths import find_git_roots, project_key, real_join, safe_join
from memdir.core.taxonomy import get_taxonomy
from memdir.retrieval import injection, lookup, vectors
from memdir.retrieval.search import run_search
from memdir.team import ops as team_ops
from memdir.upkeep import ops as upkeep_ops
from memdir.upkeep import transfers

if TYPE_CHECKING:
    from memdir.core.dir_watch import DirWatch
    from memdir.llm.client import LLM
    from memdir.retrieval.embed import Embedder
    from memdir.team.remote import ServerClient, ServerSettings

__all__ = ["Memdir"]


class Memdir:
    """Memory for one project, as seen from ``project`` (default: the working directory)."""

    kind = "sqlite"  # which store this is (HTTP /healthz; PostgresStore says "postgresql")
    _semantic_on: bool | None = None  # resolved once (memdir.retrieval.vectors.semantic)
    _data_version: int | None = None  # the index's PRAGMA data_version at the last search
    _server_memo: tuple[ServerSettings | None] | None = None  # memdir.team.ops.server
    _client_memo: ServerClient | None = None  # memdir.team.ops
    _watch: DirWatch | None = None  # a long-lived process's: reconcile only after a change

    # capture: how memories come in besides store (memdir/capture/ops.py)
    index_session = capture_ops.index_session
    extract = capture_ops.extract
    onboarding = capture_ops.onboarding
    write_user_profile = capture_ops.write_user_profile
    episode = capture_ops.episode
    procedure = capture_ops.procedure
    procedure_run = capture_ops.procedure_run
    record_uses = capture_ops.record_uses
    # what is injected into the agent's prompt (memdir/retrieval/injection.py)
    memory_index = injection.memory_index
    context = injection.context
    recall = injection.recall
    recall_candidates = injection.recall_candidates
    # vectors for semantic search (memdir/retrieval/vectors.py)
    warm_vectors = vectors.warm_vectors
    wait_for_vectors = vectors.wait_for_vectors
    missing_vectors = vectors.missing_vectors
    embed_memories = vectors.embed_memories
    # upkeep (memdir/upkeep/ops.py) and moving memories (memdir/upkeep/transfers.py)
    consolidate = upkeep_ops.consolidate
    dream = upkeep_ops.dream
    history = upkeep_ops.history
    undo = upkeep_ops.undo
    log = upkeep_ops.log
    stats = upkeep_ops.stats
    doctor = upkeep_ops.doctor
    reindex = upkeep_ops.reindex
    adopt_claude_code = transfers.adopt_claude_code
    export = transfers.export
    import_ = transfers.import_
    clean = transfers.clean
    # the team scope over the network (memdir/team/ops.py)
    pull_team = team_ops.pull_team
    team_status = team_ops.team_status
    conflicts = team_ops.conflicts

    def __init__(self, home: str | Path | None = None, project: str | Path | None = None, *,
                 clock: Callable[[], datetime] | None = None, sync_interval: float = 1.0,
                 semantic: bool | None = None, remote: bool = True) -> None:
        self.home = resolve_home(home)
        self._remote_on = remote  # False: a team server's own store (never a client)
        self.project_path = Path(project).resolve() if project else Path.cwd().resolve()
        self.roots = find_git_roots(self.project_path)
        self.config = load_config(self.home, self.roots.worktree)
        self.index = Index(self.home / "index.sqlite")
        self._clock = clock or now
        self._sync_interval = sync_interval
        self._semantic = semantic
        self._embedder: Any = None
        self._last_sync = -math.inf
        self._llm: LLM | None = None
        settings = self.config.projects.get(str(self.roots.canonical))
        project_dir = (settings.memory_dir if settings and settings.memory_dir
                       else self.home / "projects" / project_key(self.roots.canonical))
        self._paths: dict[Scope, Path] = {
            "user": self.home / "user",
            "project": project_dir,
            "team": team_ops.team_path(self),  # the team server's mirror when one is configured
        }

    @property
    def semantic(self) -> bool:
        """Whether searches here rank by meaning as well as words (the extra is needed)."""
        return vectors.semantic(self)

    @property
    def embedder(self) -> Embedder | None:
        """The embedding model (loaded once per process), or None when semantic search is off."""
        return vectors.embedder(self)

    @property
    def server(self) -> ServerSettings | None:
        """The team server in use (MEMDIR_SERVER / ``[server] url``), or None."""
        return team_ops.server(self)

    # -- directories -------------------------------------------------------------------------

    def directory(self, scope: Scope) -> st.MemoryDir:
        """The memory directory of a scope. The team directory is vetted: it must not be or
        pass a symlink, not even to a folder of the repository (PathTraversalError)."""
        if scope not in SCOPES:
            raise InvalidMemoryError(f"unknown scope {scope!r}", "use user, project or team")
        path = self._paths[scope]
        if scope == "team" and self.server is None:
            path = real_join(self.roots.worktree, ".memdir/team")
        tax = get_taxonomy(self.config.taxonomy_for(scope, self.roots.canonical))
        return st.MemoryDir(scope, path, tax)

    def _dirs(self, scopes: Iterable[Scope] | None = None) -> list[st.MemoryDir]:
        out = []
        for scope in scopes or SCOPES:
            if scope == "team" and not self._paths["team"].exists():
                continue
            try:
                out.append(self.directory(scope))
            except PathTraversalError:
                continue  # reported by doctor(); never read or written
        return out

    def _sync(self) -> None:
        if time.monotonic() - self._last_sync >= self._sync_interval:
            self.reconcile()

    def reconcile(self) -> bool:
        """Pick up files added, edited, renamed or deleted outside memdir. True if any."""
        team_ops.pull_if_due(self)  # the team server's mirror first (throttled; never raises)
        self.index.conn  # noqa: B018 -- opening it decides whether the home is read-only
        if self._watch is not None and self._watch.quiet():  # nothing on disk changed since
            self._last_sync = time.monotonic()
            return False
        if self.index.read_only:
            from memdir.core.readonly import sync

            changed = sync(self.index, self._dirs())
        else:
            changed = st.reconcile(self.index, self._dirs())
            if changed:  # files written elsewhere (an editor, git, the team mirror)
                vectors.after_write(self)
        self._last_sync = time.monotonic()
        return changed

    def close(self) -> None:
        self.index.close()

    def __enter__(self) -> Memdir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------------------

    def _draft(self, content: str, scope: Scope, **kw: Any) -> Memory:
        from memdir.core.dates import anchor_day  # write path only: keeps read commands light
        from memdir.core.draft import draft

        mdir = self.directory(scope)
        stamp = self._clock()
        return draft(content, scope=scope, taxonomy=mdir.taxonomy, now=stamp,
                     anchor=anchor_day(stamp), **kw)

    def store(self, content: str, *, type: str, scope: Scope = "project",
              name: str | None = None, description: str | None = None,
              tags: Iterable[str] = (), paths: Iterable[str] = (),
              relevance: float | str | None = None, meta: Mapping[str, Any] | None = None,
              source: str = "manual", context: str | None = None,
              date: date | datetime | str | None = None) -> Memory:
        """Store one memory. An exact duplicate reinforces the existing memory instead.
        ``context``: search context (searched, never shown); ``date``: the day it is about."""
        memory = self._draft(content, scope, type=type, name=name, description=description,
                             tags=tags, paths=paths, relevance=relevance, meta=meta,
                             source=source, context=context, date=date)
        self._sync()
        return team_ops.write_new(self, scope, [memory])[0]

    def store_many(self, items: Iterable[Mapping[str, Any]]) -> list[Memory]:
        """Store many memories in one transaction per scope; all are validated first."""
        drafts: dict[Scope, list[tuple[int, Memory]]] = {}
        count = 0
        for n, item in enumerate(items):
            fields = dict(item)
            if "content" not in fields or "type" not in fields:
                raise InvalidMemoryError(f"item {n} needs 'content' and 'type'",
                                         "give each item at least content and type")
            scope = fields.pop("scope", "project")
            content = fields.pop("content")
            try:
                memory = self._draft(content, scope, **fields)
            except TypeError as exc:
                raise InvalidMemoryError(f"item {n}: {exc}", "use store()'s arguments") from None
            drafts.setdefault(scope, []).append((n, memory))
            count += 1
        from memdir.core.placing import BULK  # write path only

        if count < BULK:
            self._sync()
        # A batch does not reconcile first: its names come from the directory's listing and a
        # duplicate's file is re-read before it is reinforced, and the scan (0.3-1 s at 100k)
        # would cost more than the batch. Only a file edited outside memdir to hold one of the
        # batch's bodies since the last command is missed as a duplicate (indexed next time).
        out: list[Memory | None] = [None] * count
        for scope, pairs in drafts.items():
            stored = team_ops.write_new(self, scope, [m for _, m in pairs])
            for (n, _), memory in zip(pairs, stored, strict=True):
                out[n] = memory
        return [m for m in out if m is not None]

    def _find(self, ref: str, scopes: Iterable[Scope] | None = None) -> Memory:
        if not isinstance(ref, str) or not ref.strip():
            raise MemoryNotFoundError("no memory id or file name given")
        self._sync()
        dirs = self._dirs(scopes)
        if ref.endswith(".md") or "/" in ref or "\\" in ref or "\x00" in ref:
            for mdir in dirs:
                path = safe_join(mdir.path, ref)
                found = self.index.select("m.dir = ? AND m.file = ?", (str(path.parent), path.name))
                if found:
                    return found[0]
        else:
            marks = ",".join("?" * len(dirs))
            ranked = sorted(dirs, key=lambda d: d.scope != "project")
            order = {d.key: n for n, d in enumerate(ranked)}
            found = self.index.select(f"m.id = ? AND m.dir IN ({marks})",
                                      (ref, *[d.key for d in dirs]))
            if found:
                return min(found, key=lambda m: order.get(str(m.path.parent) if m.path else "", 9))
        raise MemoryNotFoundError(f"no memory with id or file {ref!r}")

    def _modify(self, ref: str, change: Callable[[Memory], Memory], *,
                rename: bool = False) -> Memory:
        found = self._find(ref)
        changed = team_ops.apply_change(self, found, change, rename)  # the team server first
        vectors.after_write(self)  # an edited text needs its vector again
        upkeep_ops.sweep_temps(self, always=False)  # temp files of killed writers
        return changed

    def _set(self, ref: str, **fields: Any) -> Memory:
        """Set stored fields as they are (consolidation's merges): one write path still."""
        stamp = self._clock()
        values = {k: parse_time(v) if k == "created" else v for k, v in fields.items()}
        return self._modify(ref, lambda m: m.replace(updated=stamp, **values))

    def get(self, ref: str) -> Memory:
        """A memory by id or file name. Counts as an access."""
        memory = self._find(ref)
        if self.index.read_only:
            return memory  # nothing is counted in a home that cannot be written
        self.index.touch([memory])
        return memory.replace(access_count=memory.access_count + 1,
                              last_accessed=self._clock())

    def update(self, ref: str, *, content: str | None = None, name: str | None = None,
               description: str | None = None, tags: Iterable[str] | None = None,
               paths: Iterable[str] | None = None, relevance: float | str | None = None,
               meta: Mapping[str, Any] | None = None, reinforce: bool = False) -> Memory:
        """Change fields (id and file stay); ``reinforce``: one more reinforcement, new decay."""
        from memdir.core.draft import revise

        stamp = self._clock()

        def change(current: Memory) -> Memory:
            return revise(current, taxonomy=self.directory(current.scope).taxonomy, now=stamp,
                          content=content, name=name, description=description, tags=tags,
                          paths=paths, relevance=relevance, meta=meta, reinforce=reinforce)

        return self._modify(ref, change)

    def reclassify(self, ref: str, type: str) -> Memory:
        """Move a memory to another type: new ``<type>_<slug>.md`` file, same id."""
        from memdir.core.draft import relevance_of

        stamp = self._clock()

        def change(current: Memory) -> Memory:
            tax = self.directory(current.scope).taxonomy
            canonical = tax.resolve(type)
            return current.replace(type=canonical, updated=stamp,
                                   relevance=relevance_of(current.relevance, tax, canonical))

        return self._modify(ref, change, rename=True)

    def archive(self, ref: str) -> Memory:
        """Archive: still searchable with ``include_archived``, never injected."""
        return self._modify(ref, lambda m: m.replace(status="archived", updated=self._clock()))

    def restore(self, ref: str) -> Memory:
        return self._modify(ref, lambda m: m.replace(status="active", updated=self._clock()))

    def delete(self, ref: str) -> Memory:
        """Delete the memory's file and its index rows. Prefer archive: it can be undone."""
        memory = self._find(ref)
        team_ops.remove_memory(self, memory)
        vectors.after_write(self)  # its vector goes too
        return memory

    # -- reading -----------------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 10, types: Sequence[str] | None = None,
               scopes: Sequence[Scope] | None = None, tags: Sequence[str] | None = None,
               include_archived: bool = False, paths: Sequence[str] | None = None,
               touch: bool = True, sources: Sequence[str] = ("memories",),
               mode: str = "auto", dates: bool = True) -> list[Hit]:
        """Search ranked by score (:mod:`memdir.retrieval.scale`). ``mode``: "fts" (BM25),
        "hybrid" (BM25 and embeddings fused; FTS alone without the extra) or "auto" (hybrid
        when semantic search is on). With "sessions" in ``sources``, indexed session chunks
        too (``hit.session`` says where from). ``dates=False``: a memory's days as words are
        no evidence alone (recall: a prompt saying "Friday" is not about Friday's memories)."""
        limit = checked_limit(limit)
        query, tags = scrub(query), scrub_all(tags)
        unknown = set(sources) - {"memories", "sessions"}
        if unknown or not sources:
            raise InvalidMemoryError(f"unknown search sources {sorted(unknown)}",
                                     "use memories, sessions or both")
        self._sync()
        dirs = self._dirs(scopes)
        if mode not in ("auto", "fts", "hybrid"):
            raise InvalidMemoryError(f"unknown search mode {mode!r}", "use auto, fts or hybrid")
        # Never waits for the model in a process that loads it in the background: FTS alone
        # until it is ready (memdir.retrieval.vectors).
        embedder = vectors.search_embedder(self) if mode != "fts" else None
        kinds = lookup.types_of(self, types, dirs)
        if "memories" not in sources:
            hits: list[Hit] = []
        elif embedder is not None:
            from memdir.retrieval.semantic import hybrid_search
            from memdir.retrieval.vector_worker import searching

            with searching():  # the worker starts no batch meanwhile
                hits = hybrid_search(self.index, dirs, embedder, query, types=kinds, tags=tags,
                                     include_archived=include_archived, paths=paths,
                                     limit=limit, at=self._clock(), dates=dates)
            vectors.after_search(self)  # vectors missing or stale: the worker fills them
        else:
            hits = run_search(self.index.conn, query, dirs, types=kinds, tags=tags,
                              include_archived=include_archived, paths=paths, limit=limit,
                              at=self._clock(), dates=dates)
        if "sessions" in sources:
            from memdir.capture.sessions import search_sessions

            project = [d.key for d in dirs if d.scope == "project"]
            hits = sorted([*hits, *search_sessions(self.index.conn, query, project,
                                                   limit=limit, dates=dates)],
                          key=lambda h: -h.score)[:limit]
        if touch:
            self.index.touch(h.memory for h in hits)
        return hits

    @property
    def llm(self) -> LLM:
        """The configured LLM (``[llm]`` in config.toml, ``MEMDIR_LLM``...); never raises on use."""
        if self._llm is None:
            from memdir.core.errors import ConfigError, warn
            from memdir.llm.client import LLM, llm_settings
            from memdir.llm.ledger import Ledger

            try:
                self._llm = LLM.from_settings(llm_settings(self.home), Ledger(self.index))
            except ConfigError as exc:  # a bad setting costs the LLM, never the caller
                warn("memdir: LLM disabled: %s (hint: %s)", exc.message, exc.hint)
                self._llm = LLM(None)
        return self._llm

    # listing (memdir/retrieval/lookup.py); last, since ``list`` shadows the builtin in here
    list = lookup.list_
    recent = lookup.recent
