"""A question as each party is shown it, rendered once: for an agent, a dialog, a page, a
terminal; and as it is passed to an MCP client and known again."""
