"""memdir.cli: the ``memdir`` command.

Owns argument parsing (:mod:`.parser`), the commands (:mod:`.commands`, :mod:`.hooks_cli`,
:mod:`.serve_cli`, :mod:`.team_cli`), rendering for people and for ``--json``
(:mod:`.render`, :mod:`.terminal`) and the exit codes (:mod:`.main`). Commands translate
arguments into facade calls and results into text; no memory logic lives here.

Import rule: the CLI may import every package; nothing imports the CLI. Its start path stays
light: mcp, fastapi, numpy, onnxruntime and httpx are imported only by the commands that
need them.
"""
