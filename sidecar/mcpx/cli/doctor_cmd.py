"""`mcpx doctor`: the config (every file, every field), the daemon, the store, every server (it starts within its
timeout and lists its tools; its secrets are in the keychain), and the hosts mcpx is installed in.

One line per finding; exit 0 when all is well, 1 when anything is not, each problem naming what to do. The config
is checked as `mcpx config check` checks it (cli/policy_cmd.py's `checked_config`, the one place of that rule). The
servers are started by the daemon, as a call would start them, so what doctor sees is what a call meets: their
environment, their secrets from the keychain, their start's bound. No daemon running: doctor starts one, as
`mcpx serve` would.

On a terminal, a problem a question fixes is asked about: a server's missing secret is asked for by the daemon,
through the broker like any question (server `mcpx`, the password fields hidden here), and the answer goes into the
keychain; the server is then started with it. `--no-ask` (or no terminal) only reports it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

from mcpx import __version__
from mcpx.cli.common import add_json_flag, emit_json
from mcpx.cli.doctor_findings import Finding
from mcpx.cli.policy_cmd import CheckedConfig, checked_config
from mcpx.client.transport import ApiError, DaemonApi, NoDaemon
from mcpx.config.models import ServerConfig, secret_names
from mcpx.system import keychain

if TYPE_CHECKING:
    from mcpx.client.replies import HealthDoc, StoreDoc

ASK_PATIENCE = 30.0  # s: how long doctor waits for the daemon to keep a secret it was just given


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("doctor", help="check the config, the daemon, the store, every server and the hosts; "
                       "name each problem and what to do (exit 1)",
                       description="Checks the config (every file, every field), the daemon (starting one if none "
                       "runs), the store, every server (it starts within its timeout and lists its tools; its "
                       "secrets are in the keychain), and the opencode, Claude Code, Codex and Gemini CLI installs. On "
                       "a terminal a missing secret is asked for, as a question of mcpx's own.")
    p.add_argument("--no-ask", action="store_true", help="report a missing secret, never ask for it")
    add_json_flag(p)
    p.set_defaults(func=doctor)


def doctor(args: argparse.Namespace) -> int:
    ask = not args.no_ask and not args.json and sys.stdin.isatty() and sys.stderr.isatty()
    found: list[Finding] = []
    for finding in _findings(ask):
        found.append(finding)
        if not args.json:
            print(finding.line(), flush=True)
    problems = [f for f in found if not f.ok]
    if args.json:
        emit_json({"ok": not problems, "findings": [f.doc() for f in found]})
    elif problems:
        print(f"mcpx doctor: {len(problems)} problem{'s' if len(problems) != 1 else ''} "
              f"({', '.join(sorted({f'{f.area} {f.subject}' for f in problems}))})")
    else:
        print("mcpx doctor: all is well")
    return 1 if problems else 0


def _findings(ask: bool) -> Iterator[Finding]:
    checked = yield from _config()
    config = checked.config
    health = yield from _daemon()
    if health is None:
        yield Finding("server", "(all)", False, "not checked: no daemon to start them",
                      "see the daemon's problem above")
    else:
        if config is not None and checked.origin != health.get("config"):
            yield Finding.warning("daemon", "config", f"it runs the config of {health.get('config')}, not the one "
                                  f"here ({checked.origin}): the servers below are its",
                                  "run `mcpx doctor` where the daemon was started, or `mcpx daemon restart` here")
        yield from _store(health)
        if config is None:
            yield Finding("server", "(all)", False, "not checked: the config does not load, so their secrets are not "
                          "known here", "fix the config (above), then run `mcpx doctor` again")
        else:
            for server in health.get("servers") or []:
                yield from _server(server, config.servers.get(server), ask)
    from mcpx.cli.hosts import doctor_hosts

    yield from doctor_hosts.opencode()
    yield from doctor_hosts.claude()
    yield from doctor_hosts.codex()
    yield from doctor_hosts.gemini()


# ---- the config


def _config() -> Generator[Finding, None, CheckedConfig]:
    checked = checked_config()
    for warned in checked.warnings:
        yield Finding.warning("config", warned.path + (f" {warned.field}" if warned.field else ""), warned.message)
    if checked.error is not None:
        for problem in checked.error.problems:
            yield Finding("config", problem.path + (f" {problem.field}" if problem.field else ""), False,
                          problem.message, "fix it in that file (`mcpx config check` says the same)")
        return checked
    config = checked.config
    assert config is not None
    yield Finding("config", checked.origin, True, f"in force; every file and field holds; servers: "
                  f"{', '.join(sorted(config.servers)) or '(none)'}")
    return checked


# ---- the daemon and its store


def _daemon() -> Generator[Finding, None, HealthDoc | None]:
    from mcpx.daemon.launch import LaunchError, ensure_daemon
    from mcpx.system.paths import StatePaths

    paths = StatePaths.current()
    try:
        started = ensure_daemon(paths, what="mcpx doctor")
    except LaunchError as exc:
        yield Finding("daemon", str(paths.socket), False, f"none runs, and one would not start: {exc}",
                      f"read {paths.root / 'daemon.out'} and the config's problems above")
        return None
    try:
        health: HealthDoc = _get("/v1/health")
    except (NoDaemon, ApiError) as exc:
        yield Finding("daemon", str(paths.socket), False, f"it does not answer: {exc}",
                      "`mcpx daemon restart` (its log: daemon.log in the state directory)")
        return None
    said = f"pid {health['pid']}, mcpx {health['version']}" + (" (started now: none was running)" if started else "")
    if health["version"] != __version__:
        yield Finding("daemon", str(paths.socket), False, f"{said}, but this mcpx is {__version__}",
                      "`mcpx daemon restart` runs this one")
    else:
        yield Finding("daemon", str(paths.socket), True, said)
    if health.get("configError"):
        yield Finding("daemon", "config", False, f"its last reload failed, so it keeps the config before it: "
                      f"{health['configError']}", "fix the config (above); the daemon reloads it by itself")
    return health


def _get(path: str, timeout: float = 30.0, **params: Any) -> Any:
    """One request to the daemon, blocking (DaemonApi: doctor starts without aiohttp or asyncio)."""
    return DaemonApi().get(path, timeout=timeout, params=params or None)


def _store(health: HealthDoc) -> list[Finding]:
    store: StoreDoc = health.get("store") or {}
    where = f"{store.get('kind', '?')} {store.get('where', '')}".strip()
    try:
        _get("/v1/tasks", state="all", limit=1)  # a read of the store itself, not of memory
    except ApiError as exc:
        return [Finding("store", where, False, f"a read failed: {exc}", "see the daemon's log; `mcpx status` says "
                        "which store is in use")]
    alive = [d for d in store.get("daemons") or [] if d.get("alive")]
    return [Finding("store", where, True, "reads" + (f"; {len(alive)} daemon(s) share it" if alive else ""))]


# ---- the servers


def _server(server: str, entry: ServerConfig | None, ask: bool) -> Iterator[Finding]:
    names = secret_names(entry)
    if names:
        settled = yield from _secrets(server, names, ask)
        if not settled:
            yield Finding("server", server, False, "not started: its secrets are missing",
                          "give them (above), then run `mcpx doctor` again")
            return
    timeout = max(entry.timeout if entry is not None else 60.0, 10.0) + 15.0
    was_running = _running(server)
    began = time.monotonic()
    try:
        tools = _get(f"/v1/tools/{server}", timeout=timeout)["servers"][server]
    except ApiError as exc:
        login = (_get("/v1/health").get("needsLogin") or {}).get(server)
        if login is not None:  # an HTTP server that wants the person to log in (docs/auth.md)
            yield Finding("server", server, False, login, f"run `mcpx auth login {server}`: it prints the link and "
                          "waits until the login is done")
            return
        yield Finding("server", server, False, _said(exc), "check its command, args, env and url in the config; "
                      "the daemon's log (daemon.log in the state directory) has its stderr")
        return
    except TimeoutError:
        yield Finding("server", server, False, f"no answer within {timeout:.0f}s",
                      "raise its `timeout` if its start is slow, or check its command")
        return
    took = time.monotonic() - began
    shown = ", ".join(t.get("name", "?") for t in tools[:6]) + (", …" if len(tools) > 6 else "")
    count = f"{len(tools)} tool{'s' if len(tools) != 1 else ''}"
    listed = f": {shown}" if tools else ""
    # what was seen, not more: an instance already running was not started now, and a listing the daemon kept
    # from before started nothing
    if was_running:
        yield Finding("server", server, True, f"running already{_pids(was_running)}; lists {count}{listed}")
    elif now_running := _running(server):
        yield Finding("server", server, True, f"started{_pids(now_running)} and listed {count} in {took:.1f}s{listed}")
    else:
        yield Finding("server", server, True, f"lists {count}{listed} (as the daemon listed them before; no instance "
                      "runs now, so its start was not tried)")


def _running(server: str) -> list[int | None]:
    """The server's instances running now, by their pids (None: an HTTP server's, which has none here)."""
    instances = _get("/v1/upstreams")["instances"]
    return [i.get("pid") for i in instances if i.get("server") == server]


def _pids(instances: list[int | None]) -> str:
    pids = [str(pid) for pid in instances if pid]
    return f" (pid {', '.join(pids)})" if pids else ""


def _said(exc: ApiError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    return str(error.get("message") if isinstance(error, dict) else error or exc)


def _secrets(server: str, names: list[str], ask: bool) -> Generator[Finding, None, bool]:
    """Whether the server's secrets are all in the keychain once this is done (asking for them on a terminal)."""
    try:
        lacking = keychain.missing(server, names)
    except keychain.NoKeychain as exc:
        yield Finding("secrets", server, False, str(exc), keychain.instead(server, names))
        return False
    except keychain.KeychainError as exc:
        yield Finding("secrets", server, False, str(exc), "unlock the keychain, then run `mcpx doctor` again")
        return False
    if not lacking:
        yield Finding("secrets", server, True, f"{', '.join(names)} in the keychain")
        return True
    fix = f"`mcpx secrets set {server} {lacking[0]}`" + (" (and the others)" if len(lacking) > 1 else "") + \
        ", or call one of its tools and answer mcpx's question"
    if not ask:
        yield Finding("secrets", server, False, f"{', '.join(lacking)} not in the keychain", fix)
        return False
    answered = _ask(server)
    if answered is not None and not keychain.missing(server, names):
        yield Finding("secrets", server, True, f"{', '.join(lacking)} given in {answered}, kept in the keychain")
        return True
    yield Finding("secrets", server, False, f"{', '.join(lacking)} not in the keychain (asked, not given)", fix)
    return False


def _ask(server: str) -> str | None:
    """Have the daemon ask for the server's missing secrets (its listing opens mcpx's question), put that question
    to the person here, and wait until the daemon has kept the answer: the question's id, or None."""
    from mcpx.cli.elicit_cmd import answer_cmd

    eid = _question_for(server)
    if eid is None:
        return None
    print(f"mcpx doctor: server {server} needs secrets; mcpx asks for them ({eid}):", file=sys.stderr, flush=True)
    code = answer_cmd(argparse.Namespace(id=eid, action="accept", content=[], json=False))
    if code != 0:
        return None
    deadline = time.monotonic() + ASK_PATIENCE
    while _listed(server) is False and time.monotonic() < deadline:
        time.sleep(0.1)  # the daemon keeps the value just after the answer commits, then lists the server
    return eid


def _question_for(server: str) -> str | None:
    api = DaemonApi()
    api.request("GET", f"/v1/tools/{server}", timeout=60, ok=(502,))  # opens it, if it is not open
    listed = api.get("/v1/elicit", params={"server": "mcpx"})
    return next((q["id"] for q in listed["elicitations"] if q.get("tool") == server), None)


def _listed(server: str) -> bool:
    return DaemonApi().request("GET", f"/v1/tools/{server}", timeout=60, ok=(502,)).status == 200
