"""The client library: `mcpx.Client` for scripts (docs/scripts.md), and the one way to the daemon it and
the CLI share. Nothing the daemon or `mcpx serve` runs imports it."""
