"""FastMCP's OpenAPI server on stdio: the peer a user would put in front of a REST service instead of mcpx.

    python bench/fastmcp_openapi.py BASE_URL

`FastMCP.from_openapi(document, client=httpx2.AsyncClient(base_url=BASE_URL))`, the documented form, over the
document the service at BASE_URL serves at /openapi.json. bench/services.py starts it as a stdio server, the way a
host would start any MCP server.
"""

from __future__ import annotations

import sys

import httpx2
from fastmcp import FastMCP


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    base = argv[0]
    document = httpx2.get(f"{base}/openapi.json").json()
    server = FastMCP.from_openapi(document, client=httpx2.AsyncClient(base_url=base), name="bench-fastmcp-openapi")
    server.run(show_banner=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
