"""Services mcpx speaks to itself on its tools' behalf: a REST service described by an OpenAPI document, and
commands. Each is a kind of upstream whose tools the gateway serves like an MCP server's (docs/services.md).

- `document.py`: an OpenAPI document read and its `$ref`s resolved (jsonschema-path), as operations;
- `http.py`: the exact HTTP request a tool call makes, sent, and its response as a tool result;
- `commands.py`: a command's argv filled from a call, run without a shell, and its result;
- `outgoing.py`: what is about to be sent, as the person is shown it, and the hash an accept is bound to;
- `kinds.py`: the two kinds as the gateway uses them: list the tools, prepare a call, send it.
"""
