"""Real MCP servers for the tests, written with the official `mcp` SDK and FastMCP."""
