"""The daemon's hand-off socket: where `mcpx serve` hands over its stdin and stdout (mcpx/shared/handoff.py).

aiohttp cannot receive descriptors, so this is a listener of its own, beside daemon.sock and
guarded as it is: born 0600 in the 0700 state directory, and a peer the kernel does not name as
this user (SO_PEERCRED) is turned away. The agent-shell guard of api/peers.py concerns answers
given as a person over /v1; it has nothing to judge here, as on the websocket `mcpx serve` used.
The listener is opened with the daemon and closed before the rest of it: each client it serves
is handed back to its `mcpx serve` with `grace` seconds for what runs to be answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mcpx.mcp.stdio import PipeChannel
from mcpx.shared.handoff import MAX_HELLO, VERSION, HandoffError, HandoffMessage, Hello
from mcpx.shared.upstream_errors import UnknownServer
from mcpx.surface.dispatch import Surface
from mcpx.surface.pipe_endpoint import PipeSession, SendToServe

log = logging.getLogger("mcpx.daemon")

HELLO_WITHIN = 10.0  # s: a connection that has not said hello by then is closed


class HandoffListener:
    def __init__(self, path: Path, surface: Surface, grace: float) -> None:
        self.path = path
        self.surface = surface
        self.grace = grace
        self.sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._sessions: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()

    def start(self) -> None:
        """Listen (0600); OSError if it cannot."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # stale: the caller holds the home
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # born 0600, never briefly open to others
        try:
            sock.bind(str(self.path))
        except OSError:
            sock.close()
            raise
        finally:
            os.umask(old_umask)
        self.path.chmod(0o600)
        sock.listen(64)
        sock.setblocking(False)
        self.sock = sock
        self._accepting = asyncio.create_task(self._accept(sock), name="mcpx-handoff-accept")

    async def close(self) -> None:
        """Take no more hand-offs; hand every client back to its `mcpx serve`, as the rest of the daemon stops."""
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.wait({self._accepting})
        if self.sock is not None:
            self.sock.close()
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        self._stopping.set()
        if self._sessions:
            await asyncio.wait(self._sessions)

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(listening)
            except OSError as exc:  # out of descriptors, say: the next one may do
                log.warning("the hand-off socket could not accept a connection: %s", exc)
                await asyncio.sleep(0.5)
                continue
            task = asyncio.create_task(self._session(conn), name="mcpx-handoff")
            self._sessions.add(task)
            task.add_done_callback(self._sessions.discard)

    async def _session(self, conn: socket.socket) -> None:
        try:
            pid = _peer(conn)
            hello, fds = await asyncio.wait_for(receive_hello(conn), HELLO_WITHIN)
        except (HandoffError, TimeoutError, OSError) as exc:
            log.warning("a hand-off was turned away: %s", exc)
            conn.close()
            return
        try:
            reader, writer = await asyncio.open_unix_connection(sock=conn)
        except BaseException:
            for fd in fds:
                os.close(fd)
            conn.close()
            raise

        def say(word: HandoffMessage) -> None:
            if not writer.is_closing():
                writer.write(word.line())

        try:
            session = await self._open(hello, fds, say)
            if session is not None:
                log.debug("mcpx serve (pid %s) handed over its stdin and stdout", pid)
                await self._run(session, reader, say)
        except Exception:
            log.exception("a handed-over client failed")
        finally:
            writer.close()

    async def _open(self, hello: Hello, fds: list[int], say: SendToServe) -> PipeSession | None:
        """The session, once told `accepted`; None once told why not (the descriptors are closed then)."""
        if hello.version != VERSION:
            for fd in fds:
                os.close(fd)
            say(HandoffMessage(refused=f"this daemon speaks hand-off {VERSION}, not {hello.version}", fallback=True))
            return None
        try:
            pipe = await PipeChannel.open(fds[0], fds[1], "mcp-client", answer_bad_frames=True,
                                          unread=hello.unread_bytes())
        except (ValueError, OSError) as exc:  # not a pipe or a socket (a file, a terminal): serve pumps them itself
            say(HandoffMessage(refused=f"cannot serve on these descriptors: {exc}", fallback=True))
            return None
        try:
            session = PipeSession(self.surface, hello, pipe, say)
        except UnknownServer as exc:
            await pipe.close()
            say(HandoffMessage(refused=str(exc)))
            return None
        say(HandoffMessage(accepted=True))
        return session

    async def _run(self, session: PipeSession, reader: asyncio.StreamReader, say: SendToServe) -> None:
        """Until the client's input ends (serve is told `ended`), serve goes away (the client's requests still
        running are ended, not cancelled: their calls go on), or the daemon stops (the client is handed back)."""
        serving = asyncio.create_task(session.serve(), name="mcpx-handoff-client")
        # serve says nothing after its hello: the end of the connection (or anything on it) is serve gone
        serve_gone = asyncio.create_task(reader.read(1), name="mcpx-handoff-watch")
        stopping = asyncio.create_task(self._stopping.wait())
        try:
            done, _ = await asyncio.wait({serving, serve_gone, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if serving in done:
                say(HandoffMessage(ended=0))
            elif stopping in done:
                await session.hand_back(serving, self.grace)
        finally:
            for task in (serving, serve_gone, stopping):
                task.cancel()
            await asyncio.wait({serving, serve_gone, stopping})


def _peer(conn: socket.socket) -> int | None:
    """The peer's pid; OSError for a peer that is not this user (the socket's 0600 should have kept it out)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    if uid != os.getuid():
        raise OSError(f"its peer (pid {pid}) runs as uid {uid}, not as this daemon's {os.getuid()}")
    return pid or None


async def receive_hello(sock: socket.socket) -> tuple[Hello, list[int]]:
    """The Hello line and the descriptors that came with it, from a non-blocking socket. On an error the
    descriptors received are closed, and HandoffError says what was wrong."""
    loop = asyncio.get_running_loop()
    data = bytearray()
    fds: list[int] = []
    try:
        while b"\n" not in data:
            chunk, got, _flags, _addr = await _recv_fds(loop, sock, 1 << 16, 2)
            fds.extend(got)
            for fd in got:
                # what SCM_RIGHTS brings is inheritable; the daemon's upstream servers must not hold the host's
                # pipes open after it is done with them (its event loop, uvloop, spawns without closing fds)
                os.set_inheritable(fd, False)
            if not chunk:
                raise HandoffError("the connection closed before its hello was complete")
            data += chunk
            if len(data) > MAX_HELLO:
                raise HandoffError(f"a hello longer than {MAX_HELLO} bytes")
        line, _, rest = bytes(data).partition(b"\n")
        if rest:
            raise HandoffError("something was sent after the hello")
        if len(fds) != 2:
            raise HandoffError(f"a hello needs two descriptors (stdin, stdout); it came with {len(fds)}")
        try:
            hello = Hello.model_validate_json(line)
        except ValidationError as exc:
            error = exc.errors()[0]
            raise HandoffError(f"a hello that is not one: {error['msg']} at {'.'.join(map(str, error['loc']))}"
                               ) from None
        return hello, fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


async def _recv_fds(loop: asyncio.AbstractEventLoop, sock: socket.socket, size: int,
                    maxfds: int) -> tuple[bytes, list[int], int, Any]:
    """socket.recv_fds for a non-blocking socket under asyncio (the loop has no sock_recvmsg)."""
    while True:
        try:
            return socket.recv_fds(sock, size, maxfds)
        except BlockingIOError:
            pass
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(sock.fileno(), _settle, readable)
        try:
            await readable
        finally:
            loop.remove_reader(sock.fileno())


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
