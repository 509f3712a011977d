"""What `mcpx config check` (and `mcpx doctor`) say of a service entry beyond its fields: whether its OpenAPI
document loads and is OpenAPI 3 (and how many operations are tools), whether each command's program would start."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from mcpx.config.environment import command_problem, server_environment
from mcpx.config.models import CommandsServer, OpenApiServer, ServiceConfig
from mcpx.services import document


def problems(entry: ServiceConfig, base: Path) -> list[tuple[str, str]]:
    """Each problem as the entry's key at fault (relative to the entry) and what is wrong; none when it would work.
    `base`: the directory a relative path in the entry is read from (the config file's)."""
    if isinstance(entry, OpenApiServer):
        try:
            doc = document.document(asyncio.run(document.read(entry.openapi, base)), entry.openapi)
        except document.DocumentError as exc:
            return [("openapi", str(exc))]
        tools = [op for op in doc.operations if op.method in entry.methods]
        if not tools:
            methods = ", ".join(entry.methods)
            return [("methods", f"the document has no operation with method {methods}: the server would list no "
                                "tool")]
        return []
    assert isinstance(entry, CommandsServer)
    out = []
    for name, command in entry.commands.items():
        cwd = str(base / Path(command.cwd).expanduser()) if command.cwd else str(base)
        why = command_problem(command.argv[0], server_environment(command.env, os.environ).env, cwd)
        if why:
            out.append((f"commands.{name}.{'argv' if why[0] == 'command' else why[0]}", why[1]))
    return out
