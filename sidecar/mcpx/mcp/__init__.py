"""mcpx's own thin MCP wire layer: JSON-RPC framing and dispatch, protocol models, transports, the client side.

It knows nothing of the daemon, the broker or the surface mcpx serves (that is mcpx.surface).
"""
