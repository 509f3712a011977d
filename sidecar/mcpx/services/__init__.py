"""Services mcpx speaks to itself on its tools' behalf: a REST service described by an OpenAPI document, and
commands. Each is a kind of upstream whose tools the gateway serves like an MCP server's (docs/services.md).

- `document.py`: an OpenAPI document read and its `$ref`s resolved (jsonschema-path), as operations;
- `http.py`: the exact HTTP request a tool call makes, sent, and its response as a tool result;
- `styles.py`: a parameter's value as its OpenAPI style serializes it;
- `commands.py`: a command's argv filled from a call, run without a shell, and its result;
- `outgoing.py`: what is about to be sent, as the exact document the person confirms (credentials masked);
- `kinds.py`: the two kinds of upstream (upstream/kind.py): list the tools, run a call, confirmed where it writes;
- `check.py`: what `mcpx config check` says of an entry beyond its fields.
"""
