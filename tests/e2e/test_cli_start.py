"""The CLI starts on what the command needs (issue 39): `mcpx --help` imports no command's module, and `mcpx elicit
list` talks to the daemon without aiohttp, asyncio or pydantic (docs/choices.md, "The CLI's start"). So do the
daemon and `mcpx serve` (issue 36): a daemon loads a heavy library only once something uses it, and a serve that
hands its pipes over loads none of the daemon. What a process imported is read from its own sys.modules, not from a
timing."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import aiohttp

from conftest import ask
from harness import PATIENCE, Daemon, make_daemon
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
# a plain daemon, started by harness.Daemon as `python -c DAEMON -m mcpx daemon` (that `-m mcpx daemon` only argv
# here): its modules when it has stopped, and how often it built its openapi.json, counted by the real method
DAEMON = """import gc, sys
from mcpx.api.table import Api
built = []
openapi = Api.openapi
def counted(api):
    built.append(api)
    return openapi(api)
Api.openapi = counted
steps, collected = [], []  # the daemon's gc.disable and gc.freeze, in order; the collections run meanwhile
gc.callbacks.append(lambda phase, info: phase == "start" and steps[-1:] == ["disable"] and collected.append(1))
disable, freeze = gc.disable, gc.freeze
gc.disable = lambda: steps.append("disable") or disable()
gc.freeze = lambda: steps.append("freeze") or freeze()
from mcpx.cli.main import main
try:
    code = main(["daemon"])
finally:
    print(f"COLLECTOR {','.join(steps)} {len(collected)} {gc.isenabled()} OPENAPI {len(built)} MODULES "
          + " ".join(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""
# what only a passkey (py_webauthn, and cryptography under it), an `openapi` entry (jsonschema-path, requests,
# PyYAML), a login (authlib), a launchd agent (plistlib, an XML parser under it) or a misspelt key or tool (difflib)
# needs: docs/choices.md, "The daemon's start"
UNUSED = ("webauthn", "cryptography", "OpenSSL", "jsonschema_path", "requests", "yaml", "authlib", "plistlib", "xml",
          "difflib")


def run_counting(d: Daemon, *args: str, stdin: str = "") -> tuple[subprocess.CompletedProcess[str], set[str]]:
    out = subprocess.run([sys.executable, "-c", WRAPPER, *args], env=d.env, cwd=d.home, capture_output=True,
                         text=True, timeout=PATIENCE, input=stdin)
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


def test_a_plain_daemon_and_serve_load_only_what_they_use(home: Path) -> None:
    """A daemon with no passkey, no service and no login, asked for its health, its questions and, through a
    `mcpx serve` that handed its pipes over, an MCP client's initialize and tools/list: it never loaded what only
    those need, nor built its openapi.json nobody asked for. That serve loaded neither aiohttp nor asyncio, nor any
    part of the daemon. The request/response commands (issue 39 item 4) ask it through the light client, and load
    no aiohttp: `mcpx status`, `task`, `tools`, `call` (refused, in the daemon's words, as before), Claude Code's
    hook and `mcpx doctor`; those with no question to show or ask load no pydantic either."""
    d = make_daemon(home, python_args=["-c", DAEMON])
    with d:
        assert d.api().json("GET", "/v1/health")["pid"] == d.pid and d.api().pending() == []
        serve = subprocess.Popen([sys.executable, "-c", WRAPPER, "serve"], env=d.env, cwd=d.home,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                     "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
                 {"jsonrpc": "2.0", "method": "notifications/initialized"},
                 {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
        try:
            out, err = serve.communicate("".join(json.dumps(m) + "\n" for m in lines), timeout=PATIENCE)
        finally:
            if serve.poll() is None:
                serve.kill()
                serve.wait()
        replies = {m["id"]: m for m in map(json.loads, out.splitlines())}
        assert replies[1]["result"]["serverInfo"]["name"] == "mcpx", err
        assert "mcpx_elicit_list" in {t["name"] for t in replies[2]["result"]["tools"]}, replies[2]
        last = err.strip().splitlines()[-1]
        assert last.startswith("MODULES "), err
        modules = set(last.split()[1:])
        assert "mcpx.cli.serve_handoff" in modules and "mcpx.cli.serve_pump" not in modules  # handed over
        loaded = sorted(m for m in modules if m.startswith(("aiohttp", "asyncio", "mcpx.daemon.server", "mcpx.api",
                                                             "mcpx.broker", "mcpx.surface", "mcpx.upstream")))
        assert not loaded, f"`mcpx serve` imported {loaded[:8]}"

        for args, code, said, light in (
                (("status",), 0, "servers   (none)", False),  # how it was started: daemon.json's origin, a model
                (("task", "list", "--state", "all"), 0, "no calls", True),
                (("tools", "--json"), 0, '"servers": {}', True),
                (("call", "nosuch.tool", "x=1"), 1, "mcpx: no server 'nosuch' behind mcpx", True),
                (("call", "nosuch.tool", "--elicit", "decline"), 1, "no server 'nosuch'", True),
                (("doctor", "--no-ask"), None, "daemon", False)):
            out, modules = run_counting(d, *args)
            assert (code is None or out.returncode == code) and said in out.stdout + out.stderr, (args, out.stderr)
            heavy = sorted(m for m in modules if m.split(".")[0] in (HEAVY if light else ("aiohttp",)))
            assert not heavy, f"`mcpx {' '.join(args)}` imported {heavy[:8]}"
        # the hook finds no question of mcpx's by what Claude Code passed it: it prints nothing, Claude Code goes on
        out, modules = run_counting(d, "claude", "hook", stdin=json.dumps({
            "session_id": "s-1", "hook_event_name": "Elicitation", "mcp_server_name": "mcpx", "message": "Which?"}))
        assert out.returncode == 0 and out.stdout == "" and "Traceback" not in out.stderr, out.stderr
        assert not {m for m in modules if m.startswith(("aiohttp", "mcpx.cli.hosts.claude_install"))}
    said = [line for line in d.log.read_text().splitlines() if line.startswith("COLLECTOR ")]
    assert said, d.tail()
    collector, _, rest = said[-1].removeprefix("COLLECTOR ").partition(" OPENAPI ")
    # the cycle collector: off from the daemon command's start until its start-up's objects (~60,000) are
    # frozen, so it never walked them as they were made, and on from there, as the daemon serves
    assert collector.split() == ["disable,freeze", "0", "True"], collector
    built, _, listed = rest.partition(" MODULES ")
    modules = set(listed.split())
    assert "mcpx.daemon.server" in modules and "mcpx.broker.passkeys" in modules  # the daemon's whole code is there
    loaded = sorted(m for m in modules if m.split(".")[0] in UNUSED)
    assert not loaded, f"a plain daemon imported {loaded[:8]}"
    assert built == "0", "the daemon built its openapi.json though nobody asked for it"
