"""The CLI starts on what the command needs (issue 39): `mcpx --help` imports no command's module, and `mcpx elicit
list` talks to the daemon without aiohttp, asyncio or pydantic (docs/choices.md, "The CLI's start"). What a process
imported is read from its own sys.modules, not from a timing."""

from __future__ import annotations

import argparse
import subprocess
import sys

import aiohttp

from conftest import ask
from harness import PATIENCE, Daemon
from mcpx.cli.main import COMMANDS, parser

# `python -c WRAPPER ARGS…`: mcpx's entry point, then the modules the process holds, on stderr's last line
WRAPPER = """import sys
from mcpx.cli.main import main
try:
    code = main(sys.argv[1:])
finally:
    print("MODULES " + " ".join(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""
HEAVY = ("aiohttp", "asyncio", "pydantic", "pydantic_core")


def run_counting(d: Daemon, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    out = subprocess.run([sys.executable, "-c", WRAPPER, *args], env=d.env, cwd=d.home, capture_output=True,
                         text=True, timeout=PATIENCE)
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("MODULES "), out.stderr
    return out, set(last.split()[1:])


def commands(top: argparse.ArgumentParser) -> list[tuple[str, str | None]]:
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return [(choice.dest, choice.help) for choice in sub._choices_actions]


def test_the_command_table_is_what_the_modules_register() -> None:
    """main.COMMANDS gives `mcpx --help` each command's line without importing its module: it must say what the
    module registers, in the same order, or the help would lie. A command that runs gets its module's own
    registration, of exactly the commands the table names for that module, and no line of the others; asked for
    the top level's help before it (`mcpx -h elicit`), every line is there again."""
    full = commands(parser(every=True))
    assert commands(parser()) == full
    assert [name for name, _ in full] == [name for _, cmds in COMMANDS for name, _ in cmds] + ["demo-server"]
    for _module, cmds in COMMANDS:
        names = [name for name, _ in cmds]
        assert commands(parser([names[-1], "--json"])) == [c for c in full if c[0] in (*names, "demo-server")]
        assert commands(parser(["-h", names[0]])) == full


async def test_help_and_elicit_list_start_without_aiohttp(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    out, modules = run_counting(daemon, "--help")
    assert out.returncode == 0 and "elicit     questions waiting for an answer" in out.stdout, out.stderr
    assert not {m for m in modules if m.startswith("mcpx.cli.") and m != "mcpx.cli.main"}, sorted(modules)
    assert not {m.split(".")[0] for m in modules} & set(HEAVY)

    q = await ask(http, message="Which repository?", requestedSchema={"type": "object", "properties": {
        "repo": {"type": "string"}}})
    out, modules = run_counting(daemon, "elicit", "list")
    assert out.returncode == 0, out.stderr
    assert q["id"] in out.stdout and "Which repository?" in out.stdout and "(1; `mcpx elicit show ID`" in out.stdout
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert not heavy, f"`mcpx elicit list` imported {heavy[:8]}"
    # a refusal of the daemon's reaches the person as before, through the same light client
    out, modules = run_counting(daemon, "elicit", "list", "--state", "pending", "--limit", "0")
    assert out.returncode == 2 and "limit" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert "aiohttp" not in modules
