// The names of the tools the plugin defines itself (they are not the mcpx MCP entry's tools).

export const OWN_TOOLS = new Set(["mcpx_ask_person"])
