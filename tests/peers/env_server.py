"""An upstream written with the official mcp SDK that reports the environment it was started with.

Run: `python env_server.py [--api-key KEY]` (stdio). With `--fail` it prints its arguments to stderr
and exits before speaking MCP, as a server given a bad key would.
"""

import hashlib
import json
import os
import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("env-peer")


@app.tool()
async def environment() -> str:
    """Every variable this process has, as JSON."""
    return json.dumps(dict(os.environ))


@app.tool()
async def variable_digest(name: str) -> str:
    """The sha256 of one variable's value ("unset" when it has none): a test sees what the server was given
    without the value itself entering a result mcpx stores."""
    value = os.environ.get(name)
    return json.dumps("unset" if value is None else hashlib.sha256(value.encode()).hexdigest())


if __name__ == "__main__":
    if "--fail" in sys.argv:
        print(f"env-peer: refusing to start with {' '.join(sys.argv[1:])}", file=sys.stderr)
        sys.exit(3)
    app.run()
