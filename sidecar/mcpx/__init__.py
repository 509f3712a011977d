"""mcpx: an MCP gateway whose questions are durable state with a deadline."""

__version__ = "0.1.0"
