"""The terminal inbox, `mcpx tui`: a Textual client of the daemon's /v1 API and event stream."""
