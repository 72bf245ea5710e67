"""memdir.llm: the optional language model.

Owns the client and its settings (:mod:`.client`: budgets, timeouts, the guarded prompt),
the providers it can talk to (:mod:`.providers`: OpenAI-compatible HTTP, Anthropic, a
command) and the ledger of calls and spend kept in the index (:mod:`.ledger`). Everything that
uses a model works without one.

Import rule: llm imports only :mod:`memdir.core`; retrieval, capture, upkeep and the adapters
may import it.
"""
