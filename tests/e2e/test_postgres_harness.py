"""The suite's PostgreSQL is real: a server that answers SQL, survives a restart on its port, and gives each
test a database of its own."""

from __future__ import annotations

import itertools
from typing import Any

import psycopg
import pytest

_names = itertools.count()


async def test_a_real_server_answers_and_comes_back_after_a_restart(postgres: Any) -> None:
    dsn = postgres.create_database(f"harness_{next(_names)}")
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        version = await (await conn.execute("select version()")).fetchone()
        assert version and str(version[0]).startswith("PostgreSQL")
        await conn.execute("create table t (x int)")
        await conn.execute("insert into t values (1)")
    postgres.stop()
    with pytest.raises(psycopg.OperationalError):
        await psycopg.AsyncConnection.connect(dsn, connect_timeout=5)
    postgres.restart()
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        row = await (await conn.execute("select x from t")).fetchone()
        assert row == (1,)
