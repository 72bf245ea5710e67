"""The real PostgreSQL for tests: a fresh, uniquely named schema per test, dropped afterwards.

The server comes from ``MEMDIR_TEST_DATABASE`` (default: the local trust-auth PostgreSQL).
Nothing is mocked; tests that need PostgreSQL import these fixtures.

``pgvector_dsn`` (session): a second, real PostgreSQL with the pgvector extension, started
once per test session from the ``pgserver`` wheel (PostgreSQL and pgvector bundled,
nothing downloaded) in a temporary directory, and stopped and removed at the end.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
import warnings
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from memdir.team.postgres import PostgresStore

DSN = os.environ.get("MEMDIR_TEST_DATABASE", "postgresql://postgres@127.0.0.1:5432/test")


def drop_schema(name: str) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@contextlib.contextmanager
def fresh_schema() -> Iterator[str]:
    """A schema name no other test uses; the schema (if made) is dropped at the end."""
    name = f"memdir_test_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        drop_schema(name)


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """A database of its own (for code that uses the default schema, e.g. the CLI): its URL.
    Dropped at the end, whoever is still connected."""
    name = f"memdir_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield (f"{DSN.split('?')[0].rsplit('/', 1)[0]}/{name}" if "://" in DSN
               else make_conninfo(DSN, dbname=name))
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))


@pytest.fixture
def pg_dsn() -> str:
    return DSN


@pytest.fixture
def pg_database() -> Iterator[str]:
    with fresh_database() as dsn:
        yield dsn


@pytest.fixture
def pg_schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


@pytest.fixture
def pg_store(pg_schema: str) -> Iterator[PostgresStore]:
    with PostgresStore(DSN, schema=pg_schema) as store:
        yield store


@pytest.fixture(scope="session")
def pgvector_dsn() -> Iterator[str]:
    """The connection string of a PostgreSQL with pgvector, one for the whole session."""
    with warnings.catch_warnings():  # platformdirs: no XDG_RUNTIME_DIR here, /tmp is used
        warnings.simplefilter("ignore")
        import pgserver

        server = pgserver.get_server(tempfile.mkdtemp(prefix="memdir-pgvector-"),
                                     cleanup_mode="delete")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
