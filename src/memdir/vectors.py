"""The embeddings part of the :class:`~memdir.memdir.Memdir` facade (a mixin, like
:mod:`memdir.capture`): whether semantic search is on, the embedder, and filling vectors.

Semantic search is on when the ``embed`` extra is installed and neither ``Memdir(...,
semantic=False)`` nor ``MEMDIR_SEMANTIC=0`` turns it off. One-shot processes (the CLI and
hooks) pass ``semantic=False`` unless asked: loading the model costs about 0.4 s, too much
for a hook; they ask the warm daemon instead (:mod:`memdir.daemon`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from memdir.embed import Embedder
    from memdir.memdir import Memdir

__all__ = ["Vectors", "semantic_wanted"]


def semantic_wanted(setting: bool | None) -> bool:
    """Whether a store searches by meaning: not turned off (``setting`` False, or, when it is
    None, ``MEMDIR_SEMANTIC=0``) and the ``embed`` extra installed. Every store asks this."""
    off = setting is False or (setting is None and os.environ.get(
        "MEMDIR_SEMANTIC", "").strip().lower() in ("0", "off", "false", "no"))
    if off:
        return False
    from memdir.embed import available  # finds packages and model files

    return available()


class Vectors:
    """Methods of :class:`Memdir`."""

    _semantic: bool | None
    _embedder: Any
    _semantic_on: bool | None = None  # resolved once: every search asks

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
        """The embedding model (loaded on first use), or None when semantic search is off."""
        if not self.semantic:
            return None
        if self._embedder is None:
            from memdir.embed import load_embedder

            self._embedder = load_embedder() or False
        return self._embedder or None

    def _vectors_after_write(self, count: int) -> None:
        """With the model already loaded (a long-lived library user, the MCP server, the
        daemon), new memories get their vectors now, in one batch; a process that has not
        loaded it (the CLI, a hook, a bulk import) leaves them to searches, the daemon's idle
        time or ``reindex --embeddings``: loading it costs ~0.4 s, embedding 10k ~100 s."""
        if count and self._embedder:
            from memdir.semantic import fill_vectors

            md = self._vectors_md()
            fill_vectors(md.index, md._dirs(), self._embedder, most=count)

    def embed_memories(self, progress: Any = None) -> int:
        """Compute the missing or stale vectors of every memory in play; how many."""
        from memdir.semantic import fill_vectors

        embedder = self.embedder
        if embedder is None:
            from memdir.errors import ConfigError

            raise ConfigError("embeddings are not available",
                              'install the extra: python -m pip install "memdir[embed]" '
                              "(and unset MEMDIR_SEMANTIC=0)")
        md = self._vectors_md()
        return fill_vectors(md.index, md._dirs(), embedder, progress)
