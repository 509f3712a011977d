"""mcpx's own thin MCP wire layer: JSON-RPC framing and dispatch, protocol models, transports, the surface."""
