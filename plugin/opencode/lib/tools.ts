// The tools the plugin defines itself (they are not the mcpx MCP entry's tools). The daemon's texts name
// ASK_TOOL (sidecar/mcpx/rendering.py), so the two names are one.

export const ASK_TOOL = "mcpx_ask_person"
export const OWN_TOOLS = new Set([ASK_TOOL])
