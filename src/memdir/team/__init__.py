"""memdir.team: sharing memories beyond one machine.

Owns the team scope's remote side: the HTTP client of a team server (:mod:`.remote`), the
local mirror of the team's memories (:mod:`.mirror`), the facade's team methods (:mod:`.ops`),
the PostgreSQL store (:mod:`.postgres` and its ``postgres_*`` parts: connection, schema and
migrations, search, evidence, vectors with or without pgvector, recall, stats, the vector
worker)
and the HTTP API with its web page (:mod:`.server`).

Import rule: the team package may import every package below the facade; the server and
the PostgreSQL store are adapters (FastAPI, psycopg) and may call the facade; :mod:`.ops`,
:mod:`.remote` and :mod:`.mirror` are part of the facade and import no framework.
"""
