"""The background vector worker: embeds missing and stale memory vectors off the caller's
thread, so that no search and no write waits for the model (DESIGN §4). And the process's
model, loaded once, in the background for long-lived processes.

One worker per process, shared by every :class:`~memdir.Memdir` of it. A :class:`Target`
(an index file, a set of memory directories, an embedder) is handed to :func:`wake` after
writes (store, store_many, changes, deletions, files picked up by a reconcile, the team
server's mirror) and when a search sees that the index changed since its last look. The
worker thread embeds what its targets lack with :func:`memdir.retrieval.vector_index.fill_vectors`,
``BATCH`` memories per model call, each batch written in one short transaction on the
worker's own SQLite connection (a connection is never shared between threads); it ends when
no target is left, and :func:`wake` starts it again.

The model (:func:`model`): a library user loads it on its first semantic search, once per
process (:func:`memdir.retrieval.embed.load_embedder`). A long-lived process (``memdir mcp``,
``memdir serve``, the daemon) calls :func:`start_loading` at start-up: the model loads in a thread,
and until it is ready its searches answer with FTS alone instead of waiting.

Invariants:
- Nothing here blocks a search or a write: a search only registers itself (:func:`searching`,
  a counter under a lock) and wakes the worker; the worker holds the write lock only to
  insert one batch.
- Searches go first: the worker starts a batch only after ``QUIET`` seconds without a search
  (waiting ``MAX_YIELD`` at most, so a busy process still gets its vectors), and a batch is
  small (``BATCH`` texts, a few tens of milliseconds), so a query that arrives during one
  shares the cores with it for that long at most.
- The threads are daemons: they never keep the interpreter alive. At exit the worker is told
  to stop and waited for (``EXIT_WAIT`` at most) so that it is not inside the model while the
  interpreter tears down; a process killed mid-batch loses that batch only (vectors are
  derived data, found missing again next time).
- A failing target (an embedder that raises, an index that stays locked) is logged once per
  wake and dropped; the worker goes on with the others, and the next wake tries again.
- Fork-safe: a fork waits until the worker is between two batches (or done loading the
  model), so the child inherits no SQLite or model lock held; the child starts with no
  worker and a fresh state (its own worker starts at its first wake).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdir.core.errors import warn

if TYPE_CHECKING:
    from memdir.core.index import Index
    from memdir.core.store import MemoryDir
    from memdir.retrieval.embed import Embedder

__all__ = ["BATCH", "Target", "embed_aside", "model", "model_started", "searching",
           "start_loading", "wait", "wake"]

# Texts per model call. Measured on 2 cores: a query embedded while a batch of 4-32 runs takes
# ~9 ms instead of ~3 whatever the size, and the batch holds the cores for ~25 ms per 8 texts
# (the longest a query can meet it); batches of 16 or 32 embed no faster.
BATCH = 8
QUIET = 0.05  # seconds without a search before the worker starts a batch
# The longest a batch waits for such a quiet moment: under back-to-back searches the worker
# still embeds BATCH per second, and at most one search a second meets a batch.
MAX_YIELD = 1.0
RECHECK = 1.0  # a search-time wake looks at a target found complete at most this often
EXIT_WAIT = 2.0  # seconds the interpreter's exit waits for a batch (or the model load)


@dataclass(frozen=True)
class Target:
    """What to fill: the memories of ``dirs`` in the index at ``index``, with ``embedder``
    (None: the process's model, loaded by the worker when needed)."""

    index: Path
    dirs: tuple[MemoryDir, ...]
    embedder: Embedder | None = None

    @property
    def key(self) -> tuple[str, tuple[str, ...], int]:
        return (str(self.index), tuple(d.key for d in self.dirs), id(self.embedder))


class _State:
    """The process's worker and model state, under one condition variable."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.pending: dict[tuple[Any, ...], Target] = {}
        self.current: tuple[Any, ...] | None = None
        self.checked: dict[tuple[Any, ...], float] = {}  # target -> when last found done
        self.thread: threading.Thread | None = None
        self.stopping = False
        self.searches = 0  # searches running now
        self.last_search = -1e9  # when the last one ended (time.monotonic)
        self.loader: threading.Thread | None = None  # start_loading's thread
        self.model: Embedder | None = None
        self.model_known = False  # model holds the result of loading it


_state = _State()
# Held by the worker while it is inside SQLite or the model (a batch, opening the index,
# loading the model); a fork waits for it, so no child inherits one of their locks held
# (a forked child hung for good in sqlite3.connect). Between batches the worker lets a
# waiting fork through (_FORKING).
_GATE = threading.RLock()
_FORKING = threading.Event()


def _before_fork() -> None:
    _FORKING.set()
    _GATE.acquire()


def _after_fork_in_parent() -> None:
    _GATE.release()
    _FORKING.clear()


def _after_fork_in_child() -> None:
    # The child has none of the parent's threads: a fresh state, gate and event.
    globals().update(_state=_State(), _GATE=threading.RLock(), _FORKING=threading.Event())


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)


# -- the model ---------------------------------------------------------------------------------


def model(*, wait: bool) -> Embedder | None:
    """The process's model: loaded now if needed and ``wait`` (None when the extra is
    missing or broken); without ``wait``, None until it is loaded."""
    state = _state
    if state.model_known or not wait:
        return state.model
    from memdir.retrieval.embed import load_embedder

    with _GATE:  # no fork while the model loads (its runtime's locks)
        loaded = load_embedder()  # once per process; callers meanwhile wait for this load
    with state.cond:
        state.model, state.model_known = loaded, True
    return loaded


def model_started() -> bool:
    """Whether this process has its model, or is loading it in the background."""
    return _state.model_known or _state.loader is not None


def start_loading() -> None:
    """Load the model in a background thread (once): long-lived processes call this at
    start-up, and answer searches with FTS alone until it is ready."""
    state = _state
    with state.cond:
        if state.loader is not None or state.model_known:
            return
        state.loader = threading.Thread(target=model, kwargs={"wait": True}, daemon=True,
                                        name="memdir-model")
        _exit_hook()
        state.loader.start()


# -- the worker --------------------------------------------------------------------------------


@contextlib.contextmanager
def searching() -> Iterator[None]:
    """Around a search: the worker starts no batch while it runs, nor right after it."""
    state = _state
    with state.cond:
        state.searches += 1
    try:
        yield
    finally:
        with state.cond:
            state.searches -= 1
            state.last_search = time.monotonic()


def embed_aside(embedder: Embedder, text: str) -> Callable[[], Any]:
    """Embed ``text`` in a thread of its own while the caller goes on (a search runs its SQL
    meanwhile: SQLite and the model both release the GIL); the returned function waits for
    the vector (and raises what the model raised). No fork meanwhile
    (:mod:`memdir.core.fork_gate`; not the worker's gate, which a batch holds: a query never
    waits for a batch)."""
    from memdir.core.fork_gate import working

    box: list[Any] = []

    def run() -> None:
        try:
            with working():
                box.append(embedder.embed([text])[0])
        except BaseException as exc:  # handed to the caller
            box.append(exc)

    thread = threading.Thread(target=run, name="memdir-query", daemon=True)
    thread.start()

    def result() -> Any:
        thread.join()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    return result


def wake(target: Target, *, search: bool = False) -> None:
    """Have the worker fill ``target`` (starting it if it is not running). ``search``: a
    search saw the index change; then a target found complete under ``RECHECK`` seconds ago
    is left alone."""
    state = _state
    with state.cond:
        key = target.key
        if state.stopping:
            return
        if search and key not in state.pending and key != state.current and (
                time.monotonic() - state.checked.get(key, -1e9) < RECHECK):
            return
        state.pending[key] = target
        state.cond.notify_all()
        if state.thread is None:
            _exit_hook()
            state.thread = threading.Thread(target=_work, args=(state,), daemon=True,
                                            name="memdir-vectors")
            state.thread.start()


def wait(target: Target, timeout: float) -> bool:
    """Wait until the worker has nothing left to do for ``target``; False on timeout."""
    state = _state
    deadline = time.monotonic() + timeout
    with state.cond:
        while target.key in state.pending or state.current == target.key:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            state.cond.wait(left)
    return True


def _work(state: _State) -> None:
    indexes: dict[str, Index] = {}  # this thread's own connections, closed when it ends
    try:
        while True:
            with state.cond:
                if state.stopping or not state.pending:
                    state.thread = None
                    state.cond.notify_all()
                    return
                key, target = next(iter(state.pending.items()))
                del state.pending[key]
                state.current = key
            finished = True
            try:
                with _GATE:
                    finished = _fill(state, target, indexes)
            except Exception as exc:  # never the thread: log, drop the target, go on
                warn("memdir: memory vectors not computed for %s: %s (search ranks those "
                     "memories by words; hint: `memdir reindex --embeddings` shows the error)",
                     target.index, exc)
            with state.cond:
                state.current = None
                if finished:
                    state.checked[key] = time.monotonic()
                elif not state.stopping:
                    state.pending.setdefault(key, target)
                state.cond.notify_all()
    finally:
        for index in indexes.values():
            with contextlib.suppress(Exception):
                index.close()


def _fill(state: _State, target: Target, indexes: dict[str, Index]) -> bool:
    """Fill one target; False if stopped before its end."""
    from memdir.core.index import Index
    from memdir.retrieval.vector_index import fill_vectors

    embedder = target.embedder if target.embedder is not None else model(wait=True)
    if embedder is None or state.stopping:
        return True
    index = indexes.get(str(target.index))
    if index is None:
        index = indexes[str(target.index)] = Index(target.index)
    index.conn  # noqa: B018 -- opening it decides whether the home can be written
    if index.read_only:  # nothing can be stored there (memdir.core.readonly)
        return True
    stopped = False

    def proceed() -> bool:
        nonlocal stopped
        if _FORKING.is_set():  # between two batches: let the fork through
            _GATE.release()
            while _FORKING.is_set():
                time.sleep(0.001)
            _GATE.acquire()
        stopped = not _quiet(state)
        return not stopped

    fill_vectors(index, target.dirs, embedder, batch=BATCH, proceed=proceed)
    return not stopped


def _quiet(state: _State) -> bool:
    """Wait for a moment without searches (``MAX_YIELD`` at most); False when stopping."""
    give_up = time.monotonic() + MAX_YIELD
    with state.cond:
        while not state.stopping:
            now = time.monotonic()
            busy = state.searches > 0 or now - state.last_search < QUIET
            if not busy or now >= give_up:
                return True
            state.cond.wait(min(give_up - now, QUIET))
        return False


_hooked: list[bool] = []


def _exit_hook() -> None:
    """Once per process: at exit, stop the threads and wait for them briefly."""
    if not _hooked:
        _hooked.append(True)
        atexit.register(_stop)


def _stop() -> None:
    state = _state
    with state.cond:
        state.stopping = True
        state.cond.notify_all()
        threads: Sequence[threading.Thread | None] = (state.thread, state.loader)
    deadline = time.monotonic() + EXIT_WAIT
    for thread in threads:
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
