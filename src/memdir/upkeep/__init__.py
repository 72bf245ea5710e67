"""memdir.upkeep: keeping the set small, fresh and free of duplicates.

Owns consolidation (:mod:`.consolidate`: merges, archives, promotions, date fixes) and the
conflict rules it and the team mirror use (:mod:`.conflicts`, reading each claim's stance in
:mod:`.claims` and its ordered pairs in :mod:`.order` with the word lists of
:mod:`.lexicon`; the model's verdicts in :mod:`.consolidate_llm`), the dream pass
(:mod:`.dream`), daily logs (:mod:`.logs`), the write-ahead history and undo
(:mod:`.history`), stats and doctor (:mod:`.report`), export and import
(:mod:`.transfer`, :mod:`.transfer_items`, :mod:`.transfers`) and the facade's upkeep
methods (:mod:`.ops`). Nothing here deletes: every change is an update or an archive
through the facade, recorded so it can be undone.

Import rule: upkeep imports core, llm, retrieval and capture; never agents, team or the CLI.
"""
