"""What every layer may use: mcpx's errors, ids, header names, JSON at the edge, SSE, sessions,
secrets masked, what the host says of itself, and the words of the hand-off between `mcpx serve`
and its daemon. It imports no layer but the broker's models (sessions) and the wire's framing
(the hand-off)."""
