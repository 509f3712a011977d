"""The suite's PostgreSQL is real: a server that answers SQL, survives a restart on its port, and gives each
test a database of its own."""

from __future__ import annotations

import itertools
from typing import Any

import asyncpg
import pytest

_names = itertools.count()


async def test_a_real_server_answers_and_comes_back_after_a_restart(postgres: Any) -> None:
    dsn = postgres.create_database(f"harness_{next(_names)}")
    conn = await asyncpg.connect(dsn)
    try:
        assert (await conn.fetchval("select version()")).startswith("PostgreSQL")
        await conn.execute("create table t (x int)")
        await conn.execute("insert into t values (1)")
    finally:
        await conn.close()
    postgres.stop()
    with pytest.raises((OSError, asyncpg.PostgresError)):
        await asyncpg.connect(dsn, timeout=5)
    postgres.restart()
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("select x from t") == 1
    finally:
        await conn.close()
