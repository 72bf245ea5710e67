"""The HTTP API and web page of memdir (``memdir serve``): FastAPI over any MemoryStore.

Modules: :mod:`~memdir.team.server.app` (routes, :func:`create_app`),
:mod:`~memdir.team.server.auth` (the token file and its check), :mod:`~memdir.team.server.guard`
(the ASGI middleware: token, body limit, security headers, faults),
:mod:`~memdir.team.server.errors` (the one error shape),
:mod:`~memdir.team.server.schemas` (OpenAPI models), :mod:`~memdir.team.server.pool` (one store per
thread), :mod:`~memdir.team.server.views` (context groups, stats by age).

Importing this package imports no framework: ``create_app`` loads FastAPI when first used,
so ``memdir serve --show-token`` and the CLI's start path stay light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memdir.team.server.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from memdir.team.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
