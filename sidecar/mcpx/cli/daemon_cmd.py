"""`mcpx daemon [start|stop|restart|install]` and `mcpx status`.

`mcpx daemon` runs the daemon in the foreground. `start` runs one in the background, detached, as
`mcpx serve` does; `stop` ends whichever one serves this state directory (SIGTERM: it drains first),
however it was started; `restart` is both, keeping its --listen. `install` writes a user service
(daemon/service.py).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from mcpx.cli.common import add_json_flag, emit_json, guarded
from mcpx.cli.lines import upstream_lines
from mcpx.client.transport import EX_UNAVAILABLE, ApiError, DaemonApi, NoDaemon
from mcpx.config.finding import config_sources, unread_configs
from mcpx.daemon.origin import Origin
from mcpx.presentation.text import plain
from mcpx.system import processes
from mcpx.system.paths import StatePaths

if TYPE_CHECKING:
    from mcpx.client.replies import HealthDoc, StoreDoc, TaskView

LISTEN_HELP = "also serve /v1 and /mcp on loopback TCP, behind a bearer token"


def _action(actions: argparse._SubParsersAction[argparse.ArgumentParser], name: str, func: Any, help: str,
            timeout: float, listen: bool = False, force: bool = False) -> None:
    a = actions.add_parser(name, help=help, description=help)
    if listen:
        a.add_argument("--listen", metavar="HOST:PORT", help=LISTEN_HELP)
    if force:
        a.add_argument("--force", action="store_true", help="stop even though calls in flight end with it (their "
                                                            "open questions are abandoned)")
    a.add_argument("--timeout", type=float, default=timeout, help=f"how long it may take (default {timeout:.0f} s)")
    add_json_flag(a)
    a.set_defaults(func=func)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("daemon", help="run the daemon in the foreground (one per state directory); or start, stop "
                                      "or restart it in the background")
    p.add_argument("--listen", metavar="HOST:PORT", help=LISTEN_HELP)
    p.add_argument("--verbose", action="store_true", help="debug logging")
    p.add_argument("--demo", action="store_true", help="once serving, raise one real question from the demo server")
    # how `mcpx serve` and `mcpx daemon start` run it: detached from whoever started it (daemon/launch.py)
    p.add_argument("--detach", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=daemon)
    actions = p.add_subparsers(dest="daemon_cmd", metavar="ACTION")

    _action(actions, "start", start_cmd, "start a daemon in the background, detached (as mcpx serve does), unless one "
            "runs; returns once it serves", 15.0, listen=True)
    _action(actions, "stop", stop_cmd, "stop the daemon of this state directory, however it was started; it drains "
            "first, and refuses while calls in flight would end (--force)", 20.0, force=True)
    _action(actions, "restart", restart_cmd, "stop the daemon and start one in the background (with the same --listen "
            "unless given); refuses while calls in flight would end (--force)", 20.0, listen=True, force=True)
    a = actions.add_parser("install", help="write a user service that keeps the daemon running (a systemd user unit; "
                                           "a launchd agent on macOS), and print how to enable it")
    a.add_argument("--uninstall", action="store_true", help="remove the file install writes")
    a.add_argument("--manager", choices=("systemd", "launchd"), default=None,
                   help="which service manager's file (default: this system's)")
    a.add_argument("--listen", metavar="HOST:PORT", help=LISTEN_HELP)
    add_json_flag(a)
    a.set_defaults(func=install_cmd)

    p = sub.add_parser("status", help="is the daemon running, what config, how many questions wait, which "
                                      "upstream instances run and the memory they hold",
                       description="The daemon of this state directory: whether it runs and how it was started, "
                                   "its config, its store, how many questions wait, the web inbox's address, and "
                                   "the upstream server instances running with their sessions and memory. Exit 69 "
                                   "when none runs.")
    add_json_flag(p)
    p.set_defaults(func=guarded(status))


# the launcher (daemon/launch.py) and the service files (daemon/service.py) are imported by the actions that use
# them: `mcpx status`, the commonest of these commands, uses neither


def daemon(args: argparse.Namespace) -> int:
    from mcpx.daemon.launch import detach

    if args.detach:
        detach(StatePaths.current())  # returns in the detached daemon only
    # start-up builds ~60,000 objects that live as long as the daemon, and little garbage: the cycle collector
    # walked them ~40 times as they were made (~15% of the start's CPU). run() turns it back on as it serves.
    gc.disable()
    import uvloop  # here, not at the top: only the daemon runs on it, the other commands need not load it

    from mcpx.daemon.server import DaemonError
    from mcpx.daemon.server import run as run_daemon

    try:
        # uvloop: the same asyncio, its loop and transports in C (docs/choices.md, "The daemon's event loop")
        return uvloop.run(run_daemon(args.listen, args.verbose, args.demo))
    except DaemonError as exc:
        print(f"mcpx daemon: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


def recorded_origin(paths: StatePaths, pid: int) -> Origin | None:
    """How the daemon with this pid was started, from its daemon.json (none for a daemon elsewhere, or older)."""
    try:
        info = json.loads(paths.daemon_json.read_text())
        return Origin.model_validate(info["origin"]) if info.get("pid") == pid else None
    except (OSError, ValueError, KeyError, TypeError, ValidationError):
        return None


def status(args: argparse.Namespace) -> int:
    api = DaemonApi()
    health: HealthDoc = api.get("/v1/health")
    try:
        upstreams = api.get("/v1/upstreams")
    except ApiError as exc:
        if exc.status not in (404, 503):
            raise
        upstreams = None  # a daemon older than this command, or one whose gateway is not running
    paths = api.endpoint.paths
    origin = recorded_origin(paths, health["pid"])
    if args.json:
        emit_json({**health, "upstreams": upstreams,
                   "origin": origin.model_dump(exclude_none=True) if origin else None})
        return 0
    print(f"mcpx daemon {health['version']} · pid {health['pid']} · since {health['startedAt']}")
    if origin is not None:
        print(f"  started   {origin.describe()}")
    print(f"  socket    {health['socket']}")
    if health.get("listen"):
        print(f"  listen    http://{health['listen']} (token: {paths.token})")
    if health.get("inbox"):
        print(f"  inbox     {health['inbox']}  → mcpx inbox opens it signed in")
    for stat in health.get("notify") or []:
        print(f"  notify    {stat['target']}: {stat['sent']} sent, {stat['failed']} failed"
              + (f" (last: {stat['lastError']})" if stat.get("lastError") else ""))
    print(f"  config    {health['config']} (in force)")
    for unread in unread_configs(config_sources(Path.cwd().resolve()), paths.root):
        print(f"  ! config  {unread}")
    for line in store_lines(health.get("store")):
        print(line)
    if health.get("configError"):
        print(f"  ! config  {health['configError']} (the previous config stays in force)")
    servers = health.get("servers") or []
    commands = health.get("serverCommands") or {}
    width = max((len(name) for name in servers), default=0)
    print("  servers   " + ("\n            ".join(f"{name:<{width}}  {commands.get(name, '')}".rstrip()
                                                  for name in servers) or "(none)"))
    for name, why in (health.get("needsLogin") or {}).items():
        print(f"  ! login   {name}: {why}")
    print(f"  pending   {health['pending']} question(s)"
          + ("  → mcpx tui (or mcpx elicit list)" if health["pending"] else ""))
    for line in upstream_lines(upstreams) if upstreams is not None else []:
        print(line)
    return 0


def store_lines(store: StoreDoc | None) -> list[str]:
    """The store, and for one a team shares, the other daemons on it and whether each is alive."""
    if not store:
        return []
    lines = [f"  store     {store['kind']} {store['where']}"]
    others = [d for d in store.get("daemons") or [] if d["id"] != store.get("daemon")]
    for d in others:
        state = "alive" if d["alive"] else f"gone (no heartbeat since {d['heartbeat']})"
        lines.append(f"            daemon {d['id']} {d['user']}@{d['host']} pid {d['pid']} · {state}")
    if store.get("daemon") and not others:
        lines.append("            no other daemon on it")
    return lines


# ---- start, stop, restart


@dataclass
class Running:
    """The daemon serving this state directory, as `stop` finds it."""

    pid: int
    listen: str | None
    origin: Origin | None
    answering: bool  # False: daemon.json names a live mcpx process that does not answer (stuck, or starting)


def _health(paths: StatePaths) -> HealthDoc | None:
    try:
        health: HealthDoc = DaemonApi(paths).get("/v1/health", timeout=5)
        return health
    except (NoDaemon, ApiError):
        return None


def find_running(paths: StatePaths) -> Running | None:
    from mcpx.daemon.launch import running_pid

    health = _health(paths)
    if health is not None:
        return Running(health["pid"], health.get("listen"), recorded_origin(paths, health["pid"]), True)
    pid = running_pid(paths)
    if pid is not None and processes.alive(pid) and "mcpx" in (processes.command_line(pid) or ""):
        return Running(pid, None, recorded_origin(paths, pid), False)
    return None  # none, or a stale daemon.json from one killed with -9


def _say(args: argparse.Namespace, text: str, doc: dict[str, Any], err: bool = False) -> None:
    if args.json:
        emit_json(doc)
    else:
        print(text, file=sys.stderr if err else sys.stdout)


def _fail(args: argparse.Namespace, action: str, message: str, code: int = 1) -> int:
    _say(args, f"mcpx daemon {action}: {message}", {"action": action, "error": message}, err=True)
    return code


def _start(args: argparse.Namespace, paths: StatePaths, action: str, listen: str | None) -> int:
    from mcpx.daemon.launch import LaunchError, running_pid, start_detached, wait_serving

    try:
        pid = start_detached(paths, "command", f"mcpx daemon {action}", ["--listen", listen] if listen else [],
                             timeout=args.timeout)
        mine = wait_serving(paths, pid, args.timeout)
    except LaunchError as exc:
        return _fail(args, action, str(exc))
    if not mine:
        other = running_pid(paths)
        _say(args, f"mcpx: another daemon started first (pid {other}); it serves {paths.socket}",
             {"action": action, "pid": other, "started": False})
        return 0
    _say(args, f"mcpx: daemon started in the background (pid {pid}), detached; it serves {paths.socket}"
               + (f" and http://{listen}" if listen else "")
               + f"\n  log: {paths.log}\n  stop it with: mcpx daemon stop",
         {"action": action, "pid": pid, "started": True, "socket": str(paths.socket), "listen": listen})
    return 0


def start_cmd(args: argparse.Namespace) -> int:
    paths = StatePaths.current()
    found = find_running(paths)
    if found is not None:
        _say(args, f"mcpx: a daemon already runs for {paths.root} (pid {found.pid})"
                   + ("" if found.answering else ", but does not answer: mcpx daemon restart"),
             {"action": "start", "pid": found.pid, "started": False})
        return 0 if found.answering else 1
    return _start(args, paths, "start", args.listen)


def _stop(args: argparse.Namespace, found: Running, action: str) -> str | None:
    """Stop `found`; an error message if it did not stop."""
    from mcpx.daemon.launch import LaunchError, stop

    try:
        took = stop(found.pid, args.timeout)
    except LaunchError as exc:
        return str(exc)
    service = found.origin is not None and found.origin.kind == "service"
    if action == "stop":
        _say(args, f"mcpx: daemon stopped (pid {found.pid}, in {took:.1f}s)"
                   + (f"; it runs as a user service ({found.origin.service}), which starts it again at the next "
                      "login unless disabled" if service and found.origin else ""),
             {"action": "stop", "pid": found.pid, "stopped": True, "seconds": round(took, 3)})
    return None


def _in_flight() -> list[TaskView] | None:
    """The calls a stop would end (a legacy call lives in its server process; a modern one mid-round is re-driven
    after a restart); None when the daemon does not say. A question asked over REST or by `mcpx elicit ask` is no
    call's: it waits in the store across a restart, and is not counted."""
    try:
        body = DaemonApi().get("/v1/tasks", params={"state": "running,input-required"}, timeout=10)
    except (NoDaemon, ApiError, OSError, TimeoutError):
        return None
    tasks: list[TaskView] = body.get("tasks") or []
    return [t for t in tasks if not t.get("survivesRestart")]


def _refused(args: argparse.Namespace, action: str) -> int | None:
    """Unless --force: refuse to stop a daemon with calls in flight that would end, saying which."""
    if args.force:
        return None
    ending = _in_flight()
    if not ending:
        return None
    waiting = sorted({eid for t in ending for eid in t.get("open") or []})
    lines = "\n".join(f"  {t['id']} · {plain(t['server'])}.{plain(t['tool'])} · session {plain(t['session'])}"
                      + (f" · waits for {', '.join(t['open'])}" if t.get("open") else "") for t in ending)
    message = (f"{len(ending)} call{'s' if len(ending) != 1 else ''} in flight would end with the daemon"
               + (f", and {len(waiting)} question{'s' if len(waiting) != 1 else ''} they wait on would be abandoned"
                  if waiting else "") + f":\n{lines}\n"
               f"Answer or cancel them first (mcpx task list; mcpx task cancel ID), or {action} anyway with --force. "
               "(Questions asked over REST or by `mcpx elicit ask` survive a restart: they are not counted.)")
    if args.json:
        emit_json({"action": action, "error": "calls in flight", "calls": ending, "questions": waiting})
        return 1
    print(f"mcpx daemon {action}: {message}", file=sys.stderr)
    return 1


def stop_cmd(args: argparse.Namespace) -> int:
    paths = StatePaths.current()
    found = find_running(paths)
    if found is None:
        return _fail(args, "stop", f"no mcpx daemon runs for {paths.root} (nothing answers on {paths.socket})",
                     EX_UNAVAILABLE)
    if (refused := _refused(args, "stop")) is not None:
        return refused
    problem = _stop(args, found, "stop")
    return _fail(args, "stop", problem) if problem else 0


def restart_cmd(args: argparse.Namespace) -> int:
    paths = StatePaths.current()
    found = find_running(paths)
    listen = args.listen or (found.listen if found else None)
    if found is not None:
        if found.origin is not None and found.origin.kind == "service":
            manager, _, name = (found.origin.service or "").partition(":")
            how = f"systemctl --user restart {name}" if manager == "systemd" else \
                f"launchctl kickstart -k gui/{os.getuid()}/{name}"
            return _fail(args, "restart", f"the daemon (pid {found.pid}) runs as a user service "
                                          f"({found.origin.service}); restart it as one, so it stays one: {how}")
        if (refused := _refused(args, "restart")) is not None:
            return refused
        if (problem := _stop(args, found, "restart")) is not None:
            return _fail(args, "restart", problem)
    return _start(args, paths, "restart", listen)


# ---- install


def install_cmd(args: argparse.Namespace) -> int:
    from mcpx.daemon.service import ServiceError, install, plan, platform_manager, uninstall

    service = plan(args.manager or platform_manager(), ["--listen", args.listen] if args.listen else [])
    try:
        if args.uninstall:
            gone = uninstall(service)
        else:
            changed = install(service)
    except (ServiceError, OSError) as exc:
        return _fail(args, "install", str(exc))
    if args.uninstall:
        _say(args, (f"mcpx: removed {', '.join(map(str, gone))}\n  if it runs, stop it and let {service.manager} "
                    "forget it:\n" + "".join(f"    {c}\n" for c in service.disable)).rstrip()
             if gone else f"mcpx: no mcpx service at {service.path}; nothing changed",
             {"action": "uninstall", "manager": service.manager, "removed": [str(p) for p in gone],
              "then": service.disable if gone else []})
        return 0
    found = shutil.which("systemctl" if service.manager == "systemd" else "launchctl")
    text = [f"mcpx: {'wrote' if changed else 'already installed, nothing changed:'} {service.path}",
            "  to enable it (stop the daemon running now first: mcpx daemon stop):",
            *(f"    {c}" for c in service.enable)]
    if service.manager == "systemd":
        text.append("  to keep it running while you are logged out: loginctl enable-linger")
    if found is None:
        text.append(f"  ({service.enable[-1].split()[0]} is not on this machine's PATH: the file is for one that "
                    f"runs {service.manager})")
    _say(args, "\n".join(text), {"action": "install", "manager": service.manager, "path": str(service.path),
                                  "changed": changed, "then": service.enable})
    return 0
