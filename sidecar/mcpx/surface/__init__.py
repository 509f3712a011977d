"""What mcpx serves over MCP, for both eras: the door opencode and every other MCP host comes in by.

    dispatch.py         Surface: a request to its handler; the handshake, listing and notifications
    naming.py           the tools behind mcpx under the names a client sees (SERVER_TOOL)
    driver.py           a tools/call carried to its end for either era: questions, retries, early results
    answers.py          a modern client's answers (a retry's, a tasks/update's) given where they belong
    tasks_extension.py  the Tasks extension for mcpx's own clients: a call as a task, tasks/*, notifications/tasks
    own_tools.py        mcpx's own tools (mcpx_elicit_*, mcpx_task_result)
    results.py          the CallToolResults those two answer with
    client.py           what mcpx knows of one client, and a question shaped for it
    request_state.py    the signed requestState a modern client echoes on its retry
    connection.py       one client on a channel that carries MCP both ways
    pipe_endpoint.py    the host's own stdin and stdout, handed over by `mcpx serve`
    stream_endpoint.py  the websocket `mcpx serve` pumps stdio through (a daemon over TCP)
    http_endpoint.py    /mcp, Streamable HTTP

It is built on the gateway and the broker, and knows nothing of SQL or of the /v1 routes.
"""
