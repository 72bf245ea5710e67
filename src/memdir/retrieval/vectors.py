"""The embeddings part of the :class:`~memdir.memdir.Memdir` facade: whether semantic search
is on, the embedder, and keeping the memories' vectors filled by the background worker
(:mod:`memdir.retrieval.vector_worker`). Each function takes the facade first; the facade's
class body binds the public ones as its methods (``warm_vectors = vectors.warm_vectors``),
and its own methods call the rest (:func:`search_embedder`, :func:`after_write`,
:func:`after_search`). The facade keeps the state: ``_semantic`` (the setting),
``_semantic_on`` (resolved once), ``_embedder`` (None: not loaded yet; False: the model could
not be loaded) and ``_data_version`` (the index's at the last search).

Semantic search is on when the ``embed`` extra is installed and neither ``Memdir(...,
semantic=False)`` nor ``MEMDIR_SEMANTIC=0`` turns it off. One-shot processes (the CLI and
hooks) pass ``semantic=False`` unless asked: loading the model costs about 0.4 s, too much
for a hook; they ask the warm daemon instead (:mod:`memdir.agents.daemon`).

When the model loads: a library user's first semantic search loads it (once per process,
about 0.4 s) and wakes the worker, which then embeds what is missing in the background. A
long-lived process calls :func:`warm_vectors` at start-up: the model loads in the
background, its searches answer with FTS alone until it is ready (they never wait), and the
worker starts filling as soon as it is. A write wakes the worker only in a process that has
the model (or is loading it): a CLI command or hook never loads it for a write.

A search never embeds a memory: the vectors that exist count, the memories without one rank
by BM25 alone until the worker reaches them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memdir.memdir import Memdir
    from memdir.retrieval.embed import Embedder
    from memdir.retrieval.vector_worker import Target

__all__ = ["after_search", "after_write", "embed_memories", "embedder", "missing_vectors",
           "search_embedder", "semantic", "semantic_wanted", "wait_for_vectors", "warm_vectors"]


def semantic_wanted(setting: bool | None) -> bool:
    """Whether a store searches by meaning: not turned off (``setting`` False, or, when it is
    None, ``MEMDIR_SEMANTIC=0``) and the ``embed`` extra installed. Every store asks this."""
    off = setting is False or (setting is None and os.environ.get(
        "MEMDIR_SEMANTIC", "").strip().lower() in ("0", "off", "false", "no"))
    if off:
        return False
    from memdir.retrieval.embed import available  # finds packages and model files

    return available()


def semantic(md: Memdir) -> bool:
    """Whether searches here rank by meaning as well as words (the extra is needed)."""
    if md._semantic_on is None:
        md._semantic_on = semantic_wanted(md._semantic)
    return md._semantic_on


def embedder(md: Memdir) -> Embedder | None:
    """The embedding model (loaded on first use, once per process), or None when semantic
    search is off."""
    if not md.semantic:
        return None
    if md._embedder is None:
        from memdir.retrieval.vector_worker import model

        md._embedder = model(wait=True) or False
    return md._embedder or None


def _loading() -> bool:
    from memdir.retrieval.vector_worker import model, model_started

    return model_started() and model(wait=False) is None


def search_embedder(md: Memdir) -> Embedder | None:
    """The embedder a search may use now: without waiting for the model when it loads in
    the background (None meanwhile: FTS alone), else :attr:`embedder`."""
    if not md.semantic:
        return None
    if md._embedder is None:
        from memdir.retrieval.vector_worker import model

        ready = model(wait=False)
        if ready is None and _loading():
            return None
        if ready is not None:
            md._embedder = ready
    return md.embedder


def _vector_target(md: Memdir) -> Target | None:
    """What the worker fills for this facade, or None when it cannot or need not: semantic
    search off, the model broken, or not loaded in this process (a one-shot command)."""
    from memdir.retrieval.vector_worker import Target, model, model_started

    if not md.semantic or md._embedder is False:
        return None
    injected = md._embedder if md._embedder is not None else None
    if injected is not None and injected is model(wait=False):
        injected = None  # the process's model: one target, however it was reached
    if injected is None and not model_started():
        return None
    return Target(md.index.path, tuple(md._dirs()), injected)


def after_write(md: Memdir, count: int = 1) -> None:
    """After a write: the worker embeds the new or changed memories in the background
    (in a process with the model; others leave them to one that has it, to the daemon's
    idle time or to ``reindex --embeddings``)."""
    if count:
        _wake_worker(md, search=False)


def after_search(md: Memdir) -> None:
    """After a search: wake the worker when the index changed since the last search here
    (other processes' writes, the worker's own batches), or on the first one."""
    conn = md.index.conn
    version = int(conn.execute("PRAGMA data_version").fetchone()[0])
    if version != md._data_version:
        md._data_version = version
        _wake_worker(md, search=True)


def _wake_worker(md: Memdir, *, search: bool) -> None:
    if md.index.read_only:
        return
    target = _vector_target(md)
    if target is not None:
        from memdir.retrieval.vector_worker import wake

        wake(target, search=search)


def warm_vectors(md: Memdir) -> None:
    """For long-lived processes, at start-up: load the model in the background (searches
    answer with FTS alone until it is ready) and have the worker fill the vectors that
    are missing. Does nothing when semantic search is off."""
    if not md.semantic:
        return
    from memdir.retrieval.vector_worker import start_loading

    if md._embedder is None:
        start_loading()
    _wake_worker(md, search=False)


def wait_for_vectors(md: Memdir, timeout: float = 60.0) -> bool:
    """Wait until every memory in play has its vector (the worker filling them; loads the
    model if needed); False if ``timeout`` seconds were not enough, or when semantic
    search is off. Searches never need this: it is for scripts and tests."""
    if md.embedder is None:
        return False
    target = _vector_target(md)
    if target is None:
        return False
    from memdir.retrieval.vector_worker import wait, wake

    wake(target)
    return wait(target, timeout) and md.missing_vectors() == 0


def missing_vectors(md: Memdir) -> int | None:
    """How many memories in play have no vector for their current text; None when
    semantic search is off here and by default (``MEMDIR_SEMANTIC``, the extra)."""
    if not (md.semantic or semantic_wanted(None)):
        return None
    from memdir.retrieval.embed import MODEL_NAME
    from memdir.retrieval.vector_index import missing_vectors

    name = md._embedder.name if md._embedder else MODEL_NAME
    return missing_vectors(md.index.conn, [d.key for d in md._dirs()], name)


def embed_memories(md: Memdir, progress: Any = None) -> int:
    """Compute the missing or stale vectors of every memory in play, now, on this
    thread (``memdir reindex --embeddings``); how many."""
    from memdir.retrieval.vector_index import fill_vectors

    embedder = md.embedder
    if embedder is None:
        from memdir.core.errors import ConfigError

        raise ConfigError("embeddings are not available",
                          'install the extra: python -m pip install "memdir[embed]" '
                          "(and unset MEMDIR_SEMANTIC=0)")
    return fill_vectors(md.index, md._dirs(), embedder, progress)
