"""Running the daemon: one per state directory, on its unix socket and optionally loopback TCP.

SIGTERM drains and exits cleanly. A kill -9 loses nothing that was committed: the store is
SQLite in WAL mode and every answer is committed before anyone is told of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import secrets
import signal
import sys
from datetime import UTC, datetime

from aiohttp import web

from mcpx import __version__
from mcpx.broker.broker import Broker
from mcpx.broker.store import Store
from mcpx.config import ConfigError, load_config, watch_config
from mcpx.daemon import origin
from mcpx.daemon.app import make_app, stop_streams
from mcpx.daemon.runtime import Runtime
from mcpx.inbox import listener
from mcpx.inbox.api_routes import NOTIFIER
from mcpx.inbox.keys import InboxKeys
from mcpx.inbox.notify import Notifier
from mcpx.inbox.routes import Inbox
from mcpx.paths import StatePaths, write_private
from mcpx.sockets import socket_alive

log = logging.getLogger("mcpx.daemon")


class DaemonError(Exception):
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


async def demo_question(runtime: Runtime) -> None:
    """`mcpx daemon --demo`: put one real question from the bundled demo server in front of a new user."""
    from mcpx.upstream.calls import CallRequest

    assert runtime.gateway is not None
    if "demo" not in runtime.config.servers:
        log.info("--demo: no server named 'demo' in the config, so no demo question")
        return
    try:
        task = await runtime.gateway.start_call(CallRequest(server="demo", tool="choose_repository", arguments={},
                                                            session="demo", session_source="argument", surface="cli"))
        await task.wait_for(lambda: task.done or bool(task.open), 20)
    except Exception as exc:
        log.warning("--demo: the demo call failed: %s", exc)
        return
    if not task.open:
        log.warning("--demo: the demo call did not ask (%s)", task.error or task.state)
        return
    eid = next(iter(task.open))
    mcpx = os.path.join(os.path.dirname(sys.argv[0]), "mcpx") if sys.argv[0].endswith("mcpx") else "mcpx"
    print(f"""
  The demo server is asking a question ({eid}). In another terminal:

    {mcpx} elicit list                                  what is waiting
    {mcpx} elicit show {eid}        the question, and how to answer it
    {mcpx} elicit answer {eid} repo=octo/hello
    {mcpx} task result {task.id}           the call's real result, once answered

  More demo tools: {mcpx} tools demo, then e.g. {mcpx} call demo.deploy
""", file=sys.stderr, flush=True)


async def run(listen: str | None = None, verbose: bool = False, demo: bool = False) -> int:
    started_by = origin.take()
    paths = StatePaths.current()
    paths.ensure()
    if socket_alive(paths.socket):
        pid = _running_pid(paths)
        raise DaemonError(f"a daemon is already running for {paths.root}" + (f" (pid {pid})" if pid else "")
                          + f" on {paths.socket}")
    tcp = parse_listen(listen) if listen else None
    setup_logging(paths, verbose)
    if tcp and not is_loopback(tcp[0]):
        log.warning("listening on %s, beyond loopback: whoever reaches it may try the /v1 API, /mcp and the web "
                    "inbox (each behind its token) over plain HTTP; see docs/inbox.md", listen)
    try:
        loaded = load_config()
    except ConfigError as exc:
        raise DaemonError(f"config: {exc}") from None

    store = Store(paths.db)
    await store.open()
    holder: dict[str, Runtime] = {}
    broker = Broker(store, lambda: holder["rt"].config)
    runtime = Runtime(paths=paths, loaded=loaded, broker=broker, started_at=datetime.now(UTC),
                      listen=f"{tcp[0]}:{tcp[1]}" if tcp else None, token=load_or_create_token(paths) if tcp else None)
    holder["rt"] = runtime
    await broker.start()
    from mcpx.upstream.gateway import Gateway

    runtime.gateway = Gateway(runtime)
    await runtime.gateway.start()

    inbox = Inbox(broker, InboxKeys.load(paths))
    notifier = Notifier(broker, lambda: runtime.config.elicit.notify, inbox.link_url)
    app = make_app(runtime, inbox)
    app[NOTIFIER] = notifier
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=3.0, access_log=None)
    await runner.setup()
    with contextlib.suppress(FileNotFoundError):
        paths.socket.unlink()  # stale: nothing answered on it
    old_umask = os.umask(0o177)  # the socket is born 0600, never briefly open to others
    try:
        await web.UnixSite(runner, str(paths.socket)).start()
    finally:
        os.umask(old_umask)
    paths.socket.chmod(0o600)
    # the web inbox is always on TCP: on --listen's address, else on loopback at the port it had last time
    inbox.base = await listener.start(runner, paths, tcp)
    write_private(paths.daemon_json, json.dumps({
        "pid": os.getpid(), "socket": str(paths.socket), "listen": runtime.listen, "version": __version__,
        "inbox": inbox.base + "/inbox",
        "startedAt": runtime.started_at.isoformat(), "origin": started_by.model_dump(exclude_none=True),
    }).encode())
    await notifier.start()
    log.info("mcpx daemon %s serving on %s%s, the web inbox on %s/inbox (config: %s)", __version__, paths.socket,
             f" and http://{runtime.listen}" if tcp else "", inbox.base, loaded.origin)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watcher = asyncio.create_task(_watch(runtime), name="mcpx-config-watch")
    if demo:
        asyncio.create_task(demo_question(runtime), name="mcpx-demo")
    try:
        await stop.wait()
        log.info("draining: no new requests; in-flight ones get %.0fs", 3.0)
    finally:
        stop_streams(app)
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        await runner.cleanup()
        await notifier.close()
        await runtime.gateway.close()
        await broker.stop()
        await store.close()
        for path in (paths.socket, paths.daemon_json):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        log.info("mcpx daemon stopped")
    return 0


async def _watch(runtime: Runtime) -> None:
    while True:
        try:
            async for update in watch_config(runtime.loaded):
                if runtime.apply(update) and runtime.gateway is not None:
                    await runtime.gateway.reconfigure()
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("watching the config failed; retrying in 2s")
            await asyncio.sleep(2)


def _running_pid(paths: StatePaths) -> int | None:
    try:
        return int(json.loads(paths.daemon_json.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
