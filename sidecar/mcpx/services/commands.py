"""A command as a tool: its argv template filled from a call, run without a shell, and its result.

Each `{name}` slot of an argv word is a typed parameter; its value is put into that word as text, so a value is
always (part of) exactly one argument, whatever it holds: spaces, quotes, `;`, `$(…)` or `*` reach the program as
they are, since the program is started by exec, never by a shell. The process gets the small inherited environment
every stdio server gets (config/environment.py), the entry's `secrets` from the keychain, and the command's own
`env`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from mcpx.config.environment import references, server_environment
from mcpx.config.models import SLOT, CommandTool
from mcpx.services.http import BadArguments
from mcpx.services.outgoing import CommandExact, command_exact

OUTPUT_LIMIT = 1024 * 1024  # bytes of stdout and of stderr a result carries


class CommandRun(BaseModel):
    model_config = ConfigDict(frozen=True)

    argv: list[str]
    cwd: str
    env: dict[str, str]  # the whole environment of the process
    timeout: float
    exact: CommandExact  # what the person confirms: argv, directory, the entry's variables (credentials masked)


_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                       "boolean": (bool,)}


def input_schema(command: CommandTool) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for slot in command.slots:
        p = command.parameters.get(slot)
        schema: dict[str, Any] = {"type": p.type if p else "string"}
        if p is not None and p.description:
            schema["description"] = p.description
        if p is not None and p.enum is not None:
            schema["enum"] = p.enum
        properties[slot] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if command.slots:
        out["required"] = command.slots
    return out


def tool(name: str, command: CommandTool) -> dict[str, Any]:
    annotations: dict[str, Any] = {"readOnlyHint": True} if command.read_only else {"readOnlyHint": False}
    return {"name": name, "description": command.description or f"runs {' '.join(command.argv)}",
            "inputSchema": input_schema(command), "annotations": annotations}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def build(server: str, name: str, command: CommandTool, arguments: dict[str, Any], base: Path, default_timeout: float,
          secrets: dict[str, str], environ: dict[str, str] | os._Environ[str] = os.environ) -> CommandRun:
    """The run `arguments` make of `command`: each slot filled with its value's text, inside its one word.
    `secrets`: the entry's, from the keychain: each a variable of the process, and what a ${NAME} of its env uses
    first."""
    slots = command.slots
    unknown = sorted(set(arguments) - set(slots))
    if unknown:
        raise BadArguments(f"{name} takes no argument {', '.join(map(repr, unknown))} (it takes: "
                           f"{', '.join(slots) or 'none'})")
    missing = [s for s in slots if arguments.get(s) is None]
    if missing:
        raise BadArguments(f"{name} needs {', '.join(map(repr, missing))}")
    for slot in slots:
        p = command.parameters.get(slot)
        kind = p.type if p else "string"
        value = arguments[slot]
        if not isinstance(value, _TYPES[kind]) or (kind != "boolean" and isinstance(value, bool)):
            raise BadArguments(f"{name}: {slot!r} must be {'an' if kind == 'integer' else 'a'} {kind}, not "
                               f"{type(value).__name__}")
        if p is not None and p.enum is not None and value not in p.enum:
            raise BadArguments(f"{name}: {slot!r} must be one of {p.enum}")
    argv = [SLOT.sub(lambda m: _text(arguments[m.group(1)]), word) for word in command.argv]
    cwd = str((base / Path(command.cwd).expanduser()).resolve()) if command.cwd else str(base.resolve())
    made = server_environment(command.env, environ, secrets)
    if made.unset:
        raise BadArguments("; ".join(made.notes(server)))
    own = {k: made.env[k] for k in [*secrets, *command.env]}
    secret = {*secrets, *(k for k, v in command.env.items() if references(v))}
    return CommandRun(argv=argv, cwd=cwd, env=made.env, timeout=command.timeout or default_timeout,
                      exact=command_exact(argv, cwd, own, secret))


async def run(command: CommandRun) -> dict[str, Any]:
    """Run it once and make a tool result of how it ended: stdout, stderr and the exit code; a non-zero exit, a
    program that would not start and a run past its timeout are error results."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *command.argv, cwd=command.cwd, env=command.env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        return {"content": [{"type": "text", "text": f"{command.argv[0]} did not start: {exc.strerror or exc}"}],
                "isError": True}
    try:
        out, err = await asyncio.wait_for(proc.communicate(), command.timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        await proc.wait()
        return {"content": [{"type": "text", "text": f"{command.argv[0]} was stopped after {command.timeout:g}s"}],
                "isError": True}
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        await proc.wait()
        raise
    stdout = out[:OUTPUT_LIMIT].decode("utf-8", errors="replace")
    stderr = err[:OUTPUT_LIMIT].decode("utf-8", errors="replace")
    code = proc.returncode if proc.returncode is not None else -1
    text = stdout if code == 0 else f"exit code {code}\n{stderr or stdout}"
    return {"content": [{"type": "text", "text": text}],
            "structuredContent": {"exitCode": code, "stdout": stdout, "stderr": stderr}, "isError": code != 0}
