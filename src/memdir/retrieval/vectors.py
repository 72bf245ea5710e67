"""The embeddings part of the :class:`~memdir.memdir.Memdir` facade (a mixin, like
:mod:`memdir.capture.ops`): whether semantic search is on, the embedder, and keeping the
memories' vectors filled by the background worker (:mod:`memdir.retrieval.vector_worker`).

Semantic search is on when the ``embed`` extra is installed and neither ``Memdir(...,
semantic=False)`` nor ``MEMDIR_SEMANTIC=0`` turns it off. One-shot processes (the CLI and
hooks) pass ``semantic=False`` unless asked: loading the model costs about 0.4 s, too much
for a hook; they ask the warm daemon instead (:mod:`memdir.agents.daemon`).

When the model loads: a library user's first semantic search loads it (once per process,
about 0.4 s) and wakes the worker, which then embeds what is missing in the background. A
long-lived process calls :meth:`Vectors.warm_vectors` at start-up: the model loads in the
background, its searches answer with FTS alone until it is ready (they never wait), and the
worker starts filling as soon as it is. A write wakes the worker only in a process that has
the model (or is loading it): a CLI command or hook never loads it for a write.

A search never embeds a memory: the vectors that exist count, the memories without one rank
by BM25 alone until the worker reaches them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from memdir.memdir import Memdir
    from memdir.retrieval.embed import Embedder
    from memdir.retrieval.vector_worker import Target

__all__ = ["Vectors", "semantic_wanted"]


def semantic_wanted(setting: bool | None) -> bool:
    """Whether a store searches by meaning: not turned off (``setting`` False, or, when it is
    None, ``MEMDIR_SEMANTIC=0``) and the ``embed`` extra installed. Every store asks this."""
    off = setting is False or (setting is None and os.environ.get(
        "MEMDIR_SEMANTIC", "").strip().lower() in ("0", "off", "false", "no"))
    if off:
        return False
    from memdir.retrieval.embed import available  # finds packages and model files

    return available()


class Vectors:
    """Methods of :class:`Memdir`."""

    _semantic: bool | None
    _embedder: Any  # None: not loaded yet; False: the model could not be loaded
    _semantic_on: bool | None = None  # resolved once: every search asks
    _data_version: int | None = None  # the index's PRAGMA data_version at the last search

    def _vectors_md(self) -> Memdir:
        return cast("Memdir", self)

    @property
    def semantic(self) -> bool:
        """Whether searches here rank by meaning as well as words (the extra is needed)."""
        if self._semantic_on is None:
            self._semantic_on = semantic_wanted(self._semantic)
        return self._semantic_on

    @property
    def embedder(self) -> Embedder | None:
        """The embedding model (loaded on first use, once per process), or None when
        semantic search is off."""
        if not self.semantic:
            return None
        if self._embedder is None:
            from memdir.retrieval.vector_worker import model

            self._embedder = model(wait=True) or False
        return self._embedder or None

    def _search_embedder(self) -> Embedder | None:
        """The embedder a search may use now: without waiting for the model when it loads in
        the background (None meanwhile: FTS alone), else :attr:`embedder`."""
        if not self.semantic:
            return None
        if self._embedder is None:
            from memdir.retrieval.vector_worker import model

            ready = model(wait=False)
            if ready is None and self._loading():
                return None
            if ready is not None:
                self._embedder = ready
        return self.embedder

    @staticmethod
    def _loading() -> bool:
        from memdir.retrieval.vector_worker import model, model_started

        return model_started() and model(wait=False) is None

    def _vector_target(self) -> Target | None:
        """What the worker fills for this facade, or None when it cannot or need not: semantic
        search off, the model broken, or not loaded in this process (a one-shot command)."""
        from memdir.retrieval.vector_worker import Target, model, model_started

        if not self.semantic or self._embedder is False:
            return None
        injected = self._embedder if self._embedder is not None else None
        if injected is not None and injected is model(wait=False):
            injected = None  # the process's model: one target, however it was reached
        if injected is None and not model_started():
            return None
        md = self._vectors_md()
        return Target(md.index.path, tuple(md._dirs()), injected)

    def _vectors_after_write(self, count: int = 1) -> None:
        """After a write: the worker embeds the new or changed memories in the background
        (in a process with the model; others leave them to one that has it, to the daemon's
        idle time or to ``reindex --embeddings``)."""
        if count:
            self._wake_worker(search=False)

    def _vectors_after_search(self) -> None:
        """After a search: wake the worker when the index changed since the last search here
        (other processes' writes, the worker's own batches), or on the first one."""
        conn = self._vectors_md().index.conn
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        if version != self._data_version:
            self._data_version = version
            self._wake_worker(search=True)

    def _wake_worker(self, *, search: bool) -> None:
        if self._vectors_md().index.read_only:
            return
        target = self._vector_target()
        if target is not None:
            from memdir.retrieval.vector_worker import wake

            wake(target, search=search)

    def warm_vectors(self) -> None:
        """For long-lived processes, at start-up: load the model in the background (searches
        answer with FTS alone until it is ready) and have the worker fill the vectors that
        are missing. Does nothing when semantic search is off."""
        if not self.semantic:
            return
        from memdir.retrieval.vector_worker import start_loading

        if self._embedder is None:
            start_loading()
        self._wake_worker(search=False)

    def wait_for_vectors(self, timeout: float = 60.0) -> bool:
        """Wait until every memory in play has its vector (the worker filling them; loads the
        model if needed); False if ``timeout`` seconds were not enough, or when semantic
        search is off. Searches never need this: it is for scripts and tests."""
        if self.embedder is None:
            return False
        target = self._vector_target()
        if target is None:
            return False
        from memdir.retrieval.vector_worker import wait, wake

        wake(target)
        return wait(target, timeout) and self.missing_vectors() == 0

    def missing_vectors(self) -> int | None:
        """How many memories in play have no vector for their current text; None when
        semantic search is off here and by default (``MEMDIR_SEMANTIC``, the extra)."""
        if not (self.semantic or semantic_wanted(None)):
            return None
        from memdir.retrieval.embed import MODEL_NAME
        from memdir.retrieval.vector_index import missing_vectors

        md = self._vectors_md()
        name = self._embedder.name if self._embedder else MODEL_NAME
        return missing_vectors(md.index.conn, [d.key for d in md._dirs()], name)

    def embed_memories(self, progress: Any = None) -> int:
        """Compute the missing or stale vectors of every memory in play, now, on this
        thread (``memdir reindex --embeddings``); how many."""
        from memdir.retrieval.vector_index import fill_vectors

        embedder = self.embedder
        if embedder is None:
            from memdir.core.errors import ConfigError

            raise ConfigError("embeddings are not available",
                              'install the extra: python -m pip install "memdir[embed]" '
                              "(and unset MEMDIR_SEMANTIC=0)")
        md = self._vectors_md()
        return fill_vectors(md.index, md._dirs(), embedder, progress)
