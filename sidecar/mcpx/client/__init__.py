"""The client library: `mcpx.Client` for scripts (docs/scripts.md), and what it shares with the CLI:
the way to the daemon, a question asked at a terminal, SERVER.TOOL. Only `import mcpx` loads the
script client: the daemon and `mcpx serve` never do."""
