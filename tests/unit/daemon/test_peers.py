"""What the daemon keeps of a /v1 caller's connection (api/peers.py): once a connection, forgotten with it."""

from __future__ import annotations

import gc
import socket
from types import SimpleNamespace
from typing import Any, cast

from aiohttp import web

from mcpx.api import peers


class Transport:
    """A transport as peers reads it: the socket under it."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock

    def get_extra_info(self, name: str) -> Any:
        return self.sock if name == "socket" else None


def request_on(transport: Transport) -> web.Request:
    return cast(web.Request, SimpleNamespace(transport=transport))


def test_a_connection_is_looked_at_once_and_forgotten_with_its_transport() -> None:
    before = len(peers._connections)
    mine, theirs = socket.socketpair()
    try:
        on_unix, on_tcp = Transport(mine), Transport(None)
        conn = peers._connection(request_on(on_unix))
        assert peers._connection(request_on(on_unix)) is conn  # the same, not looked at again
        assert peers.is_unix(request_on(on_unix)) and not peers.is_unix(request_on(on_tcp))
        assert len(peers._connections) == before + 2
        del on_unix, on_tcp, conn
        gc.collect()
        assert len(peers._connections) == before
    finally:
        mine.close()
        theirs.close()
