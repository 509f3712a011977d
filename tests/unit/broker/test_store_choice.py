"""Which store a daemon opens (broker/stores.py): SQLite by default, PostgreSQL when named, and clear refusals."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcpx.broker.sqlite import SqliteStore
from mcpx.broker.store import StoreRefused
from mcpx.broker.stores import daemon_id, make_store
from mcpx.config.finding import validate
from mcpx.config.models import Config
from mcpx.config.problems import ConfigError
from mcpx.system.paths import StatePaths


def test_the_default_is_the_sqlite_file_in_the_state_directory(tmp_path: Path) -> None:
    store = make_store(Config(), StatePaths(tmp_path), environ={})
    assert isinstance(store, SqliteStore) and store.path == tmp_path / "mcpx.db"


def test_mcpx_store_wins_over_the_config(tmp_path: Path) -> None:
    config = Config.model_validate({"store": "postgresql://team@db.example:5432/mcpx", "storeLease": "5s"})
    store = make_store(config, StatePaths(tmp_path), environ={"MCPX_STORE": "postgresql://ci@other:5432/ci"})
    assert store.info.kind == "postgresql" and store.info.where == "postgresql://ci@other:5432/ci"
    assert store.info.lease == 5.0 and store.info.daemon is not None
    assert store.info.daemon.id == daemon_id(StatePaths(tmp_path))  # kept: the same daemon after a restart


def test_a_store_that_is_not_a_postgresql_url_is_refused_without_its_password(tmp_path: Path) -> None:
    with pytest.raises(StoreRefused, match="postgresql://USER@HOST:PORT/DB") as refused:
        make_store(Config(), StatePaths(tmp_path), environ={"MCPX_STORE": "mysql://u:hunter2@db/x"})
    assert "hunter2" not in str(refused.value)
    with pytest.raises(ConfigError) as invalid:  # as a config file's problem is told
        validate({"store": "sqlite://u:hunter2@x"}, "config.json")
    told = str(invalid.value)
    assert "store" in told and "must be a postgresql://" in told and "hunter2" not in told, told


def test_without_psycopg_the_error_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if it were not installed: importing it fails
    with pytest.raises(StoreRefused) as refused:
        make_store(Config(), StatePaths(tmp_path), environ={"MCPX_STORE": "postgresql://u:pw@db:5432/x"})
    assert "pip install 'mcpx[postgresql]'" in str(refused.value) and "pw@" not in str(refused.value)
