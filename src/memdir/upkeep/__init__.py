"""memdir.upkeep: keeping the set small, fresh and free of duplicates.

Owns consolidation (:mod:`.consolidate`: merges by the rule of :mod:`.merge_rule`, archives,
promotions, date fixes) and the conflict rules it, doctor and the store-time warning use
(:mod:`.conflicts`: two claims laid side by side in :mod:`.alignment` from the slots of
:mod:`.slots` and the value words of :mod:`.values`, each claim's stance in :mod:`.claims`
and its ordered pairs in :mod:`.order` with the word lists of :mod:`.lexicon`; the pairs a
whole store compares from :mod:`.candidates`, the last scan remembered by
:mod:`.conflict_scan`, which of two is older in :mod:`.conflict_order`; the model's verdicts
in :mod:`.consolidate_llm`), the dream pass
(:mod:`.dream`), daily logs (:mod:`.logs`), the write-ahead history and undo
(:mod:`.history`), stats and doctor (:mod:`.report`), export and import
(:mod:`.transfer`, :mod:`.transfer_items`, :mod:`.transfers`) and the facade's upkeep
methods (:mod:`.ops`). Nothing here deletes: every change is an update or an archive
through the facade, recorded so it can be undone.

Import rule: upkeep imports core, llm, retrieval and capture; never agents, team or the CLI.
"""
