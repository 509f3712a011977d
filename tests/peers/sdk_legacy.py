"""sdk_server.py's tools, served by the official SDK as a legacy (handshake-era) server, in one of two ways.

- default: the SDK's handshake-only loop (`serve_loop`, what servers built before 2026-07-28 speak):
  `server/discover` gets an error, and `initialize` is taken afterwards on the same connection.
- `--discover-says-legacy`: the SDK's dual-era loop with a `server/discover` that offers only
  handshake-era versions (go-sdk's stateful default does this). The discover request settles the
  connection's era, so the `initialize` that follows on it is refused (-32022): only a fresh
  process, hearing `initialize` first, serves the legacy era.
"""

import sys

import anyio
import mcp_types as types
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from sdk_server import app

low = app._lowlevel_server


async def discover_legacy(ctx, params) -> types.DiscoverResult:
    return types.DiscoverResult(supported_versions=["2025-11-25"], capabilities=low.get_capabilities())


async def handshake_only() -> None:
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        await serve_loop(low, read, write, lifespan_state=state, init_options=low.create_initialization_options())


if __name__ == "__main__":
    if "--discover-says-legacy" in sys.argv[1:]:
        low.add_request_handler("server/discover", types.RequestParams, discover_legacy)
        app.run()
    else:
        anyio.run(handshake_only)
