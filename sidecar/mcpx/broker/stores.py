"""Which store a daemon opens: the SQLite file in its state directory, or the team's PostgreSQL.

Chosen once, at start-up: MCPX_STORE, else the config's "store", else SQLite. psycopg is imported
only when a PostgreSQL store is configured, so the default install needs none of it.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Mapping

from mcpx import __version__
from mcpx.broker.sqlite import SqliteStore
from mcpx.broker.store import Identity, Store, StoreRefused
from mcpx.config.models import Config
from mcpx.shared.ids import is_id, new_id
from mcpx.shared.masking import shown_url
from mcpx.system.paths import StatePaths, write_private

INSTALL = "pip install 'mcpx[postgresql]'"


def store_url(config: Config, environ: Mapping[str, str] = os.environ) -> str | None:
    """The PostgreSQL URL in force (MCPX_STORE wins over the config), or None for the SQLite file."""
    url = environ.get("MCPX_STORE") or config.store
    if url and not url.startswith(("postgresql://", "postgres://")):
        raise StoreRefused(f"MCPX_STORE must be a postgresql://USER@HOST:PORT/DB url, not {shown_url(url)!r} "
                               "(unset it for the SQLite file in the state directory)")
    return url or None


def daemon_id(paths: StatePaths) -> str:
    """This state directory's daemon id (dmn-…), made once and kept, so a restarted daemon is the same one."""
    try:
        kept = paths.daemon_id.read_text().strip()
        if is_id(kept, "dmn"):
            return kept
    except OSError:
        pass
    made = new_id("dmn")
    write_private(paths.daemon_id, made.encode())
    return made


def make_store(config: Config, paths: StatePaths, environ: Mapping[str, str] = os.environ) -> Store:
    url = store_url(config, environ)
    if url is None:
        return SqliteStore(paths.db)
    try:
        import psycopg  # noqa: F401 - only to say clearly that it is missing
    except ImportError:
        raise StoreRefused(f"the store is {shown_url(url)}, and PostgreSQL needs psycopg, which is not "
                               f"installed: {INSTALL}") from None
    from mcpx.broker.postgres import PgStore

    me = Identity(id=daemon_id(paths), user=getpass.getuser(), host=socket.gethostname(), pid=os.getpid(),
                  version=__version__)
    return PgStore(url, me, lease=config.store_lease)
