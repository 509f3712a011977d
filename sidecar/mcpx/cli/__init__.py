"""The `mcpx` command line: every command talks to the daemon's /v1 API."""
