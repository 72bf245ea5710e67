"""memdir.retrieval: bringing memories back.

Owns search (:mod:`.search`: FTS5 queries, filters, strength), the one score scale
(:mod:`.scale`), ranking active memories by strength in SQL (:mod:`.ranking`), semantic search
(:mod:`.embed` the offline model, :mod:`.semantic`, :mod:`.hybrid` fusion, :mod:`.vector_index`,
:mod:`.vector_worker`, :mod:`.vectors` the facade's vector methods), word-overlap similarity
(:mod:`.similarity`), listing (:mod:`.lookup`), session-start context (:mod:`.context`,
:mod:`.context_format`, :mod:`.context_index` for the ``MEMORY.md`` lines it adds),
per-prompt recall (:mod:`.recall`, :mod:`.freshness`) and the facade's methods for both
(:mod:`.injection`).

Import rule: retrieval imports :mod:`memdir.core` and :mod:`memdir.llm` only; numpy and the
model runtime only inside :mod:`.embed` and lazily, so a search without the ``embed`` extra
never loads them.
"""
