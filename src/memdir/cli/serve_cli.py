"""``memdir serve``: run the HTTP API and the web page (uvicorn, one process).

Invariants:
- Importing this module imports no framework: FastAPI, uvicorn and the PostgreSQL driver are
  imported inside :func:`run`, only when a server actually starts (``--show-token`` needs
  none of them). Without the ``server`` extra (or ``postgres``, for ``--database``) it
  stops before creating a token or opening a store, with an error naming the extra.
- The store is the Markdown + SQLite store of ``$MEMDIR_HOME`` seen from ``--project``, or,
  with ``--database`` (or ``$MEMDIR_DATABASE``), a PostgreSQL store. It is opened once before
  serving, so a bad project or database fails at start, not at the first request.
- Authentication is on unless ``--no-token``. Binding to a non-loopback address prints a
  warning; doing so without a token prints a louder one (the server still starts: the user
  asked for it, e.g. inside a private network or behind an authenticating proxy).
- Connections are handled by :mod:`memdir.team.server.protocol`: uvicorn's own error answers in
  the API's JSON shape, and a request must arrive whole within ``--request-timeout``.
- The URL of the web page, with the token in its ``#token=`` fragment (never sent to the
  server), goes to stderr at start.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run"]

DEFAULT_PORT = 8765
DEFAULT_MAX_BODY = 1 << 20
DEFAULT_REQUEST_TIMEOUT = 30.0  # memdir.team.server.protocol's (not imported: it imports uvicorn)


def add_parser(sub: argparse._SubParsersAction[Any], common: argparse.ArgumentParser) -> None:
    """Add ``serve`` to the ``memdir`` sub-commands."""
    text = "run the HTTP API and the web page (token auth; binds to 127.0.0.1 by default)"
    p = sub.add_parser("serve", parents=[common], help=text, description=text)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; anything else is reachable "
                        "from other machines)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--database", default=os.environ.get("MEMDIR_DATABASE") or None,
                   metavar="URL", help="serve a PostgreSQL store (postgresql://...) instead of "
                                       "the memory files (default: $MEMDIR_DATABASE)")
    p.add_argument("--show-token", action="store_true",
                   help="print the API token (creating it if needed) and exit")
    p.add_argument("--no-token", action="store_true",
                   help="serve without authentication (anyone who can reach the port can read "
                        "and change every memory)")
    p.add_argument("--max-body", type=int, default=DEFAULT_MAX_BODY, metavar="BYTES",
                   help=f"largest request body accepted (default {DEFAULT_MAX_BODY})")
    p.add_argument("--threads", type=int, default=8,
                   help="requests handled at once by this process (default 8)")
    p.add_argument("--request-timeout", type=float, default=DEFAULT_REQUEST_TIMEOUT,
                   metavar="SECONDS",
                   help="a request's headers and body must arrive within this time of its "
                        f"first byte, or the connection is closed (default "
                        f"{DEFAULT_REQUEST_TIMEOUT:g})")


def _warn(text: str) -> None:
    print(f"memdir serve: {text}", file=sys.stderr)


def _factory(args: argparse.Namespace, home: Path) -> tuple[Any, str]:
    """The store factory and the store's kind; one store is opened now to fail fast."""
    if args.database:
        from memdir.team.postgres import PostgresStore

        dsn: str = args.database

        def factory() -> Any:
            return PostgresStore(dsn)
    else:
        from memdir.memdir import Memdir

        project = args.project

        def factory() -> Any:
            return Memdir(home=home, project=project, remote=False)  # never its own client

    first = factory()
    try:
        kind = str(getattr(first, "kind", "postgresql" if args.database else "sqlite"))
        first.stats()  # reaches the database / the index: a bad one fails here
    finally:
        first.close()
    return factory, kind


def _browser_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def run(args: argparse.Namespace) -> int:
    from memdir.core.config import resolve_home
    from memdir.core.errors import ConfigError
    from memdir.core.extras import require
    from memdir.team.server.auth import is_loopback, load_or_create_token

    home = resolve_home(args.home)
    if args.show_token:
        print(load_or_create_token(home))
        return 0
    if args.max_body < 1:
        raise ConfigError(f"--max-body must be at least 1, not {args.max_body}",
                          "give a size in bytes, e.g. --max-body 1048576")
    if args.threads < 1:
        raise ConfigError(f"--threads must be at least 1, not {args.threads}",
                          "e.g. --threads 8")
    if not args.request_timeout > 0:
        raise ConfigError(f"--request-timeout must be more than 0, not {args.request_timeout}",
                          "give seconds, e.g. --request-timeout 30")
    # Before anything is created or opened: without the extras there is nothing to serve.
    require("server", "memdir serve")
    if args.database:
        require("postgres", "memdir serve --database")
    token = "" if args.no_token else load_or_create_token(home)
    factory, kind = _factory(args, home)

    import uvicorn

    from memdir.team.server.app import create_app
    from memdir.team.server.protocol import protocol_class

    app = create_app(factory, token=token, max_body=args.max_body, kind=kind,
                     log_dir=home / "logs", threads=args.threads)
    if not is_loopback(args.host):
        _warn(f"warning: bound to {args.host}, not loopback: other machines can reach this "
              "server; the token travels in clear text unless a TLS proxy is in front")
    if not token:
        loud = "" if is_loopback(args.host) else "WARNING: "
        _warn(f"{loud}authentication is OFF (--no-token): anyone who can reach "
              f"{args.host}:{args.port} can read, change and delete every memory")
    url = f"http://{_browser_host(args.host)}:{args.port}/"
    _warn(f"{kind} store, web page at {url}" + (f"#token={token}" if token else ""))
    uvicorn.run(app, host=args.host, port=args.port, workers=1, log_level="info",
                server_header=False, timeout_graceful_shutdown=5,
                http=protocol_class(args.request_timeout),
                ws="none")  # no WebSocket routes: an Upgrade request is answered as HTTP
    return 0
