"""The daemon's TCP listener, on which the web inbox lives (the unix socket alone cannot reach a browser).

With `--listen HOST:PORT` it is there. Otherwise it is on loopback at the port it had the last time (kept in the
state directory as `inbox.port`), so an open inbox tab and the links sent out survive a daemon restart; when that
port is taken, or on a first start, the system picks a free one. A fixed default port would collide between
the daemons of several users or state directories on one machine, and fail outright where it is taken.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
from collections.abc import Sequence

from aiohttp import web

from mcpx.system.paths import StatePaths, write_private

log = logging.getLogger("mcpx.daemon")
LOOPBACK = "127.0.0.1"


def _remembered(paths: StatePaths) -> int:
    with contextlib.suppress(OSError, ValueError):
        port = int((paths.root / "inbox.port").read_text().strip())
        if 0 < port < 65536:
            return port
    return 0


def _shown_host(host: str) -> str:
    """The host in the inbox's addresses: the listener's own, or for a wildcard one, this machine's address
    on its network (what a phone on the same LAN reaches)."""
    if host not in ("0.0.0.0", "::", ""):
        return f"[{host}]" if ":" in host else host
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet leaves: this only asks the routing table for our address
        return str(probe.getsockname()[0])
    return socket.gethostname()


async def start(runner: web.AppRunner, paths: StatePaths, listen: tuple[str, int] | None) -> str:
    """Start the TCP site; returns the inbox's base address, http://host:port."""
    if listen is not None:
        host, port = listen
        site = web.TCPSite(runner, host, port)
        await site.start()
    else:
        host, port = LOOPBACK, _remembered(paths)
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
        except OSError as exc:
            await site.stop()
            if port == 0 or exc.errno != errno.EADDRINUSE:
                raise
            log.info("the inbox's former port %d is taken; taking a free one", port)
            site = web.TCPSite(runner, host, 0)
            await site.start()
    # aiohttp keeps the bound server here; only it knows an ephemeral port. asyncio's Server or uvloop's (the
    # daemon runs on uvloop): both have `sockets`, which their common base does not declare
    sockets: Sequence[socket.socket] = getattr(site._server, "sockets", None) or ()
    assert sockets
    bound = sockets[0].getsockname()[1]
    if listen is None:
        write_private(paths.root / "inbox.port", str(bound).encode())
    return f"http://{_shown_host(host)}:{bound}"
