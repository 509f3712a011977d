"""The long-lived daemon: owns the broker and the upstream servers, serves /v1 and /mcp."""
