"""What every layer may use: mcpx's errors, ids, header names, JSON at the edge, SSE, sessions, and the
words of the hand-off between `mcpx serve` and its daemon. Depends on no layer."""
