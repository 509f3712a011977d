"""Names the daemon's layers agree on: its request headers, its body limit, its tools' result keys.

Kept in one small module (as Starlette keeps its `types.py`) so that the /v1 routes and the MCP
surface, which must not import each other, still read the same header by the same name. The
CLI is a client of these names (so this module is the standard library's alone: the daemon's shutdown signal, an
aiohttp AppKey, is in shared/shutdown.py); the opencode plugin gets them generated (mcpx.daemon.typescript).
"""

from __future__ import annotations

SESSION_HEADER = "X-Mcpx-Session"
SESSION_SOURCE_HEADER = "X-Mcpx-Session-Source"  # "env": the session came from MCPX_SESSION_ID
ANSWERER_HEADER = "X-Mcpx-Answerer"
CWD_HEADER = "X-Mcpx-Cwd"
TOOL_PREFIX_HEADER = "X-Mcpx-Tool-Prefix"  # how the host names mcpx's tools (opencode: "mcpx_")
UNATTENDED_HEADER = "X-Mcpx-Unattended"  # "1": nobody is at the host to be asked (Claude Code's print mode)
TOOLS_HEADER = "X-Mcpx-Tools"  # "mcpx": list only mcpx's own tools, the host offers the servers' (opencode's plugin)

# the `_meta` keys of the tool results mcpx composes itself (surface/results.py, surface/own_tools.py); the opencode
# plugin reads them by these names (plugin/opencode/lib/shared/generated.ts)
INPUT_REQUIRED_META = "io.mcpx/inputRequired"  # a call that waits: its task, trace and the questions it waits on
WITHHELD_META = "io.mcpx/withheld"  # the same result with each of the person's questions stood in for
RESULT_META = {"inputRequired": INPUT_REQUIRED_META, "withheld": WITHHELD_META}

# the daemon's variable that names the file of the demo server's requestState key: the daemon sets it and makes
# the key (demo-request-state.key in the state directory), the demo's entry passes it through as ${…}, the demo reads it
DEMO_KEY_FILE = "MCPX_DEMO_KEY_FILE"
MAX_BODY = 1024 * 1024  # the largest request body the daemon reads, on /v1 and /mcp alike
