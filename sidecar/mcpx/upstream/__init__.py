"""Upstream MCP servers behind mcpx: connections in both eras, the pool, calls and tasks."""
