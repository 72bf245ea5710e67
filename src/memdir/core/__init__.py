"""memdir.core: what a memory is and where it lives.

Owns the memory model (:mod:`.model`, :mod:`.taxonomy`), the Markdown file format
(:mod:`.markdown`, :mod:`.draft` turning input into a valid memory, :mod:`.dates` reading a
clause's tense with :mod:`.tense`), the memory directories and their atomic writes
(:mod:`.files`, :mod:`.store`, :mod:`.placing`, :mod:`.listing` for MEMORY.md,
:mod:`.journal`, :mod:`.new_files`, :mod:`.temp_files`, :mod:`.fingerprint`,
:mod:`.readonly`), paths and the traversal defence (:mod:`.paths`, :mod:`.safe_open`),
settings (:mod:`.config`, :mod:`.arguments`), the derived SQLite index (:mod:`.index`,
:mod:`.index_schema`, its migrations in :mod:`.index_schema_early` and
:mod:`.index_migrations`, :mod:`.index_fts`, :mod:`.usage_queue`, :mod:`.meta_json`), the
strength formula the index keys its ranking on (:mod:`.strength`) and the usage counts behind
it (:mod:`.usefulness`), the protocol every store implements (:mod:`.memory_store`), the rules
that hold on every write and every output (:mod:`.safety`, :mod:`.secrets` with
:mod:`.secret_rules` and :mod:`.secret_assignments`, :mod:`.private`, :mod:`.neutralise`
reading text as escapes decode it with :mod:`.decoded_text`, :mod:`.shorten` cutting text
only at a word), which optional extra brings which module (:mod:`.extras`) and the one error
hierarchy (:mod:`.errors`).

Import rule: core imports no other memdir package (only the optional C scan,
``memdir._scan``) and no framework; every other package may import it.
"""
