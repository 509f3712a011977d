"""mcpx in each MCP host: installing, importing a host's servers, its config files, and what
`mcpx doctor` checks of it."""
