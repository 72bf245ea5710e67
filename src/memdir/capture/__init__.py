"""memdir.capture: how memories come in besides ``store``.

Owns reading transcripts (:mod:`.transcript`, :mod:`.transcript_file`,
:mod:`.transcript_formats`), rule extraction (:mod:`.rules`, :mod:`.prose`), LLM extraction
and its duplicate checks (:mod:`.extract`, the model's prompt and checks in
:mod:`.extract_llm`), which injected memories the agent then used (:mod:`.uses`), episodes
and procedures (:mod:`.episodes`), onboarding and the CLAUDE.md profile (:mod:`.onboarding`),
the searchable session index
(:mod:`.sessions`) and the facade's capture methods (:mod:`.ops`). Every write goes through
the facade's write path, so the write-time rules of :mod:`memdir.core` hold.

Import rule: capture imports :mod:`memdir.core`, :mod:`memdir.llm` and
:mod:`memdir.retrieval`; never upkeep, agents, team or the CLI.
"""
