"""Running the daemon: one per state directory, on its unix socket and optionally loopback TCP.

SIGTERM drains and exits cleanly. A kill -9 loses nothing that was committed: the store is
SQLite in WAL mode and every answer is committed before anyone is told of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import json
import logging
import os
import secrets
import shutil
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path

from aiohttp import web

from mcpx import __version__
from mcpx.api.inbox_routes import NOTIFIER
from mcpx.api.state import DaemonInfo
from mcpx.broker.broker import Broker
from mcpx.broker.models import rfc3339
from mcpx.broker.refusals import BrokerError
from mcpx.broker.store import StoreRefused
from mcpx.broker.stores import make_store
from mcpx.call.request import CallRequest
from mcpx.config.finding import load_config
from mcpx.config.problems import ConfigError
from mcpx.config.source import ConfigSource
from mcpx.daemon import origin
from mcpx.daemon.app import make_app, stop_streams
from mcpx.daemon.handoff_socket import HandoffListener
from mcpx.daemon.homelock import HomeTaken, hold_home
from mcpx.inbox import listener
from mcpx.inbox.notify import Notifier
from mcpx.inbox.signing import InboxKeys
from mcpx.inbox.web_routes import Inbox
from mcpx.oauth.logins import CALLBACK_PATH
from mcpx.services.kinds import service_kinds
from mcpx.shared.errors import McpxError
from mcpx.shared.names import DEMO_KEY_FILE
from mcpx.surface.dispatch import Surface
from mcpx.surface.request_state import RequestStates
from mcpx.system.paths import StatePaths, load_key, write_private
from mcpx.system.sockets import socket_alive
from mcpx.upstream.children import Children
from mcpx.upstream.gateway import Gateway

log = logging.getLogger("mcpx.daemon")

SOCKET_PATH_MAX = 107  # bytes: what sockaddr_un holds on Linux, less its final NUL
DRAIN_S = 3.0  # s: what requests in flight get to finish when the daemon stops


class DaemonError(McpxError):
    pass


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise DaemonError(f"--listen takes HOST:PORT, e.g. 127.0.0.1:7878 (got {listen!r})")
    return host.strip("[]") or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_or_create_token(paths: StatePaths) -> str:
    if paths.token.exists():
        token = paths.token.read_text().strip()
        if token:
            paths.token.chmod(0o600)
            return token
    token = secrets.token_urlsafe(32)
    write_private(paths.token, token.encode())
    return token


def setup_logging(paths: StatePaths, verbose: bool = False) -> None:
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in list(root.handlers):
        root.removeHandler(handler)
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(fmt)
    root.addHandler(stderr)
    fd = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    filelog = logging.StreamHandler(os.fdopen(fd, "a", buffering=1))
    filelog.setFormatter(fmt)
    root.addHandler(filelog)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


async def demo_question(gateway: Gateway, settings: ConfigSource) -> None:
    """`mcpx daemon --demo`: put one real question from the bundled demo server in front of a new user."""
    try:
        task = await gateway.start_call(CallRequest(server="demo", tool="choose_repository", arguments={},
                                                    session="demo", session_source="argument", surface="cli"))
        await task.wait_for(lambda: task.done or bool(task.open), 20)
    except Exception as exc:
        log.warning("--demo: the demo call failed: %s", exc)
        return
    if not task.open:
        log.warning("--demo: the demo call did not ask (%s)", task.error or task.state)
        return
    eid = next(iter(task.open))
    mcpx = _mcpx()
    steps = [(f"{mcpx} elicit list", "what is waiting"),
             (f"{mcpx} elicit show {eid}", "the question, and how to answer it"),
             (f"{mcpx} elicit answer {eid} repo=octo/hello", "answer it"),
             (f"{mcpx} task result {task.id}", "the call's real result, once answered")]
    width = max(len(command) for command, _ in steps) + 3
    lines = "\n".join(f"    {command:<{width}}{what}" for command, what in steps)
    print(f"""
  The demo server is asking a question ({eid}). In another terminal:

{lines}

  More demo tools: {mcpx} tools demo, then e.g. {mcpx} call demo.deploy
""", file=sys.stderr, flush=True)


def _mcpx() -> str:
    """How to run this mcpx in another terminal: `mcpx` when that name finds this very program (./dev run links
    it into ~/.local/bin), else its path."""
    me = os.path.realpath(sys.argv[0])
    found = shutil.which("mcpx")
    if not sys.argv[0].endswith("mcpx") or (found is not None and os.path.realpath(found) == me):
        return "mcpx"
    return sys.argv[0]


async def run(listen: str | None = None, verbose: bool = False, demo: bool = False) -> int:
    """Build the daemon from its parts, each from the ones before it, then serve until SIGTERM.

    The order: the home's lock; the config in force; the store; the broker on the store; the
    gateway to the upstream servers on the broker; the MCP surface on the gateway; last, the app
    that serves them all. Each part is closed in reverse as it was opened, whether the daemon
    stops or fails on the way up (a port in use, a socket path too long): a daemon that cannot
    serve exits, it does not hang on what it had opened.
    """
    started_by = origin.take()
    paths = StatePaths.current()
    paths.ensure()
    tcp = parse_listen(listen) if listen else None
    async with contextlib.AsyncExitStack() as parts:
        try:
            parts.enter_context(hold_home(paths))  # before the database: two daemons never share one
        except HomeTaken as exc:
            raise DaemonError(str(exc)) from None
        if socket_alive(paths.socket):  # one from an mcpx that took no lock
            pid = _running_pid(paths)
            raise DaemonError(f"a daemon is already running for {paths.root}" + (f" (pid {pid})" if pid else "")
                              + f" on {paths.socket}")
        setup_logging(paths, verbose)
        if tcp and not is_loopback(tcp[0]):
            log.warning("listening on %s, beyond loopback: whoever reaches it may try the /v1 API, /mcp and the "
                        "web inbox (each behind its token) over plain HTTP; see docs/inbox.md", listen)
        try:
            settings = ConfigSource(load_config(), keep_demo=demo)
        except ConfigError as exc:
            raise DaemonError(f"config: {exc}") from None
        parts.callback(log.info, "mcpx daemon stopped")
        parts.callback(_remove, paths.socket, paths.handoff, paths.daemon_json)
        # From here a SIGTERM drains, even one that comes while the daemon is still starting: whoever reads
        # daemon.json or finds the socket may stop it at once (`mcpx daemon stop`, a test), and a signal's default
        # would kill it with its socket, daemon.json and store left as they were. The stop is seen once it serves.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        try:
            store = make_store(settings.config, paths)  # the SQLite file, or the team's PostgreSQL
            parts.push_async_callback(store.close)  # closes whatever open() got as far as opening
            await store.open()
        except (StoreRefused, BrokerError) as exc:
            raise DaemonError(f"store: {exc}") from None
        broker = Broker(store, settings)
        parts.push_async_callback(broker.stop)
        await broker.start()
        # the demo's requestState key, kept here across restarts: its entry passes this variable through (${…})
        os.environ[DEMO_KEY_FILE] = str(paths.demo_key)
        await asyncio.to_thread(load_key, paths.demo_key)
        children = Children(paths)  # what daemons before this one left running ends here; this one's own, if it dies
        await children.start()
        parts.push_async_callback(children.close)
        # beside the MCP servers: REST services and commands, mcpx speaking to them itself (docs/services.md)
        gateway = Gateway(broker, settings, kinds=service_kinds(lambda: settings.loaded.directory), spawned=children)
        parts.push_async_callback(gateway.close)
        await gateway.start()
        surface = Surface(gateway, broker, settings, RequestStates(load_key(paths.request_state_key)))
        info = DaemonInfo(paths=paths, started_at=datetime.now(UTC), listen=f"{tcp[0]}:{tcp[1]}" if tcp else None,
                          token=load_or_create_token(paths) if tcp else None)
        inbox = Inbox(broker, InboxKeys.load(paths))
        notifier = Notifier(broker, lambda: settings.config.elicit.notify, inbox.link_url,
                            people=lambda: settings.config.people, approver=inbox.approver_url)
        parts.push_async_callback(notifier.close)
        parts.push_async_callback(broker.stop_reminders)  # before the notifier: no reminder written and left unsent
        app = make_app(info, settings, broker, gateway, surface, inbox)
        app[NOTIFIER] = notifier

        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=DRAIN_S, access_log=None)
        parts.push_async_callback(runner.cleanup)
        await runner.setup()
        parts.callback(stop_streams, app)
        await _serve_on(runner, paths)
        handoff = HandoffListener(paths.handoff, surface, grace=DRAIN_S)
        try:
            handoff.start()  # before daemon.json: a `mcpx serve` that sees this daemon ready finds it open
        except OSError as exc:
            raise DaemonError(f"cannot serve on {paths.handoff}: {exc}") from None
        parts.push_async_callback(handoff.close)  # first as the daemon stops: its clients go back to their serve
        # the web inbox is always on TCP: on --listen's address, else on loopback at the port it had last time
        try:
            inbox.base = await listener.start(runner, paths, tcp)
        except OSError as exc:
            where = f"{tcp[0]}:{tcp[1]}" if tcp else "loopback"
            raise DaemonError(f"cannot listen on {where}: {exc.strerror or exc}") from None
        gateway.logins.callback_url = inbox.base + CALLBACK_PATH  # where a login's browser comes back
        write_private(paths.daemon_json, json.dumps({
            "pid": os.getpid(), "socket": str(paths.socket), "listen": info.listen, "version": __version__,
            "inbox": inbox.base + "/inbox",
            "startedAt": rfc3339(info.started_at), "origin": started_by.model_dump(exclude_none=True),
        }).encode())
        await notifier.start()
        broker.start_reminders()  # only now: a reminder due at start is written once its notifier listens
        log.info("mcpx daemon %s serving on %s%s, the web inbox on %s/inbox (config: %s)", __version__, paths.socket,
                 f" and http://{info.listen}" if tcp else "", inbox.base, settings.origin)

        background = [asyncio.create_task(settings.watch(on_change=gateway.reconfigure), name="mcpx-config-watch")]
        if demo:
            background.append(asyncio.create_task(demo_question(gateway, settings), name="mcpx-demo"))
        parts.push_async_callback(_cancel, background)
        # What start-up made (modules, pydantic's validators, the app: ~57,000 objects) lives as long as the
        # daemon. Frozen out of the collector's sight, a full collection walks only what serving made since, so its
        # pauses stay short with many questions pending (docs/bench.md, "Figures that were in comments"). `mcpx
        # daemon` started without the collector (its start made almost no garbage to find): it runs from here.
        gc.freeze()
        gc.enable()
        await stop.wait()
        log.info("draining: no new requests; in-flight ones get %.0fs", DRAIN_S)
    return 0


async def _serve_on(runner: web.AppRunner, paths: StatePaths) -> None:
    """Listen on the unix socket (0600); a DaemonError that says why not."""
    with contextlib.suppress(FileNotFoundError):
        paths.socket.unlink()  # stale: nothing answered on it, and we hold the home
    old_umask = os.umask(0o177)  # the socket is born 0600, never briefly open to others
    try:
        await web.UnixSite(runner, str(paths.socket)).start()
    except (OSError, ValueError) as exc:
        size = len(os.fsencode(paths.socket))
        hint = (f" (its path is {size} bytes; a unix socket's may be {SOCKET_PATH_MAX} at most: set MCPX_HOME to a "
                "shorter directory)") if size > SOCKET_PATH_MAX else ""
        raise DaemonError(f"cannot serve on {paths.socket}{hint}: {exc}") from None
    finally:
        os.umask(old_umask)
    paths.socket.chmod(0o600)


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    for task, outcome in zip(tasks, await asyncio.gather(*tasks, return_exceptions=True), strict=True):
        if isinstance(outcome, Exception):
            log.error("%s had failed: %r", task.get_name(), outcome)


def _remove(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _running_pid(paths: StatePaths) -> int | None:
    try:
        return int(json.loads(paths.daemon_json.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
