"""FastMCP's proxy in front of a stdio server, on stdio: the peer a user would put there instead of mcpx.

    python bench/fastmcp_proxy.py [--stateful] -- COMMAND [ARGS...]

Default: `fastmcp.server.create_proxy(StdioTransport(...))`, the documented one-liner. Its backend client
is fresh per request over one kept-alive subprocess (`StdioTransport(keep_alive=True)`, FastMCP's default),
and mirrors the front connection's era.
`--stateful`: `FastMCPProxy(client_factory=StatefulProxyClient(...).new_stateful)`, one backend client per
front connection, the form FastMCP's docs give for stateful servers and the one that forwards a server's
`elicitation/create` to the front client within the call that asked.

bench/speed.py starts this as a stdio server, the way a host would start any MCP server.
"""

from __future__ import annotations

import sys

from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy
from fastmcp.server.providers.proxy import FastMCPProxy, StatefulProxyClient


def main(argv: list[str]) -> int:
    stateful = "--stateful" in argv[: argv.index("--")] if "--" in argv else False
    if "--" not in argv or len(argv) <= argv.index("--") + 1:
        print(__doc__, file=sys.stderr)
        return 2
    command, *args = argv[argv.index("--") + 1:]
    transport = StdioTransport(command, args)
    if stateful:
        proxy = FastMCPProxy(client_factory=StatefulProxyClient(transport).new_stateful, name="bench-fastmcp-stateful")
    else:
        proxy = create_proxy(transport, name="bench-fastmcp")
    proxy.run(show_banner=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
