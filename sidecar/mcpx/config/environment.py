"""What a stdio server's process is given: a small safe set of the daemon's variables, plus its own `env`.

The daemon's environment holds what its user exported — LLM API keys among them — and an upstream
server is someone else's code. As in the official MCP SDKs (`get_default_environment`, which passes
HOME, LOGNAME, PATH, SHELL, TERM and USER on POSIX), a server inherits only variables that say where
things are and how text is read, never what the user holds:

- the SDK's six: who the user is, where their home and programs are, which shell and terminal;
- the locale (LANG, LANGUAGE, LC_*) and TZ: how the server reads and writes text and times;
- TMPDIR and the XDG base directories: where it may keep temporary files, caches and config (npx,
  uvx and pip find their caches there; moving them would download everything again).

Everything else a server needs is named in its `env`: a literal value, or `${NAME}` to pass the
daemon's own variable NAME through (`"GITHUB_TOKEN": "${GITHUB_TOKEN}"`); `$${` writes a literal
`${`. A variable whose reference is not set in the daemon's environment is left out, and said so.
Its `secrets` come from the OS keychain (mcpx/system/keychain.py): each is a variable of its own, and a `${NAME}` in
its `env` may name one too (the keychain's value before the daemon's variable).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

INHERITED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER",  # the MCP SDK's own
             "LANG", "LANGUAGE", "TZ", "TMPDIR",
             "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")
INHERITED_PREFIXES = ("LC_",)

_REFERENCE = re.compile(r"\$(\$\{)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def inherited(environ: Mapping[str, str]) -> dict[str, str]:
    """The daemon's variables every server gets (a value that is a shell function is never passed)."""
    return {name: value for name, value in environ.items()
            if (name in INHERITED or name.startswith(INHERITED_PREFIXES)) and not value.startswith("()")}


def references(value: str) -> list[str]:
    """The variables a value passes through by name: `${NAME}`, not `$${NAME}`."""
    return [m.group(2) for m in _REFERENCE.finditer(value) if m.group(2)]


def filled(value: str, known: Mapping[str, str]) -> str:
    """`value` with each `${NAME}` replaced by known[NAME] (every one must be there) and `$${` by `${`."""
    return _REFERENCE.sub(lambda m: m.group(1) or known[m.group(2)], value)


@dataclass
class ServerEnvironment:
    env: dict[str, str]
    unset: dict[str, list[str]] = field(default_factory=dict)  # variable left out → the references not set

    def notes(self, server: str) -> list[str]:
        return [f"server {server!r}: its env {var} was left out: "
                + ", ".join(f"${{{ref}}}" for ref in refs)
                + f" {'is' if len(refs) == 1 else 'are'} not set in the daemon's environment (set "
                + ("it" if len(refs) == 1 else "them") + " where the daemon starts, or give a value)"
                for var, refs in self.unset.items()]


def server_environment(env: Mapping[str, str], environ: Mapping[str, str],
                       secrets: Mapping[str, str] | None = None) -> ServerEnvironment:
    """The whole environment of one server process: the inherited set, its secrets, then its `env` with references
    filled (from its secrets first, then the daemon's variables)."""
    out = inherited(environ)
    known = {**environ, **secrets} if secrets else environ
    out.update(secrets or {})
    unset: dict[str, list[str]] = {}
    for var, value in env.items():
        missing = [ref for ref in references(value) if ref not in known]
        if missing:
            unset[var] = missing  # never half-filled ("Bearer "): the server's own default is better
            continue
        out[var] = filled(value, known)
    return ServerEnvironment(out, unset)


def command_problem(command: str, env: Mapping[str, str], cwd: str | None) -> tuple[str, str] | None:
    """Why `command` would not start as a server's process is started — `env` its whole environment, `cwd` its
    directory — as the entry's key at fault and what is wrong with it; None when it would start. As exec finds
    it: a command with a '/' is that file, from `cwd` when relative; a bare name is looked for in `env`'s PATH
    (each relative entry from `cwd`)."""
    here = Path(cwd or ".")
    if cwd and not here.is_dir():
        return "cwd", f"{cwd!r} is not a directory"
    if "/" in command:
        target = here / command
        if not target.exists():
            return "command", f"{command!r} does not exist" + (
                "" if Path(command).is_absolute() else f" (in {here.resolve()})")
        if not (target.is_file() and os.access(target, os.X_OK)):
            return "command", f"{command!r} is not an executable file"
        return None
    for directory in os.get_exec_path(env):
        target = here / directory / command
        if target.is_file() and os.access(target, os.X_OK):
            return None
    return "command", (f"command {command!r} not found on its PATH (install it, write its full path, "
                       "or set PATH in its env)")
