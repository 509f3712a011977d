"""Channels over newline-delimited JSON: a server subprocess, a pair of pipes handed over, or any asyncio stream
pair."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
import socket
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Protocol

from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import FrameError, Message
from mcpx.shared.errors import McpxError
from mcpx.shared.masking import mask_text, shown_command

log = logging.getLogger("mcpx.mcp")


class StartError(McpxError):
    """An upstream that could not start: says which command and what it printed."""


class Spawned(Protocol):
    """Who is told of each server process as it starts and once it is gone (upstream/children.py: the record a dead
    daemon's servers are ended by), and what each runs before its command (the kernel's parent-death signal)."""

    preexec: Callable[[], None] | None

    def started(self, pid: int, server: str) -> None: ...

    def ended(self, pid: int) -> None: ...


class _Sending:
    """The writing half of a channel of newline-delimited JSON-RPC, and what its reading half shares with it.

    A line that is not JSON-RPC is skipped and logged, as a server's stray output is; with
    `answer_bad_frames` (we serve the other side) it is answered with the JSON-RPC error, as a
    server must, and the next line is read as if nothing happened.
    """

    def __init__(self, writer: asyncio.StreamWriter | Any, name: str, answer_bad_frames: bool) -> None:
        self.writer = writer
        # its transport, written to directly: every message in and out of the daemon is sent here, and the writer's
        # own write and transport are a Python call each on the way
        self._transport: asyncio.WriteTransport = writer.transport
        self.name = name
        self.answer_bad_frames = answer_bad_frames
        self._write_lock = asyncio.Lock()
        # writers holding the lock or waiting for it: send_now reads this, not the lock's locked(), a Python call on
        # every message out of the daemon (and stricter: a waiter counts while the lock passes to it)
        self._writing = 0
        self._sending: set[asyncio.Future[None]] = set()  # lines sent from callbacks, still on their way (send_now)
        self.bad_frames = 0

    async def send(self, msg: Message) -> None:
        data = jsonrpc.encode(msg)
        if self._transport.is_closing():
            # the other side went (a server that exited at once): a write would raise the transport's own
            # RuntimeError ("the handler is closed"), which no caller expects of a closed pipe
            raise ConnectionResetError(f"{self.name}: the stream is closed")
        if not self._writing:
            # nobody's line is under way: written at once, and when the pipe took it all (it nearly always does)
            # there is nothing to drain, nor a lock to hold; every message in and out of the daemon is sent here
            self._transport.write(data)
            if self._transport.get_write_buffer_size():
                await self._drain()
            return
        async with self._in_line():
            self._transport.write(data)
            await self.writer.drain()

    @contextlib.asynccontextmanager
    async def _in_line(self) -> AsyncIterator[None]:
        """The write lock held, counted in `_writing` from before it is waited for."""
        self._writing += 1
        try:
            async with self._write_lock:
                yield
        finally:
            self._writing -= 1

    def send_now(self, msg: Message) -> asyncio.Future[None] | None:
        """As send, from a callback (no coroutine): written now, after every line whose send began before it; None
        once the pipe took it all. A pipe that did not is drained by a task (as send waits for it: whoever sends
        next waits behind it), and one that cannot take it now (a line under way) is sent by a task, in turn: that
        task is returned. ConnectionResetError: the other side went."""
        if self._transport.is_closing():
            raise ConnectionResetError(f"{self.name}: the stream is closed")
        if self._writing:
            return self._in_turn(self.send(msg))
        self._transport.write(jsonrpc.encode(msg))
        if self._transport.get_write_buffer_size():
            return self._in_turn(self._drain())
        return None

    async def _drain(self) -> None:
        async with self._in_line():
            await self.writer.drain()

    def _in_turn(self, sending: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
        task = asyncio.ensure_future(sending)
        self._sending.add(task)
        task.add_done_callback(self._sent)
        return task

    def _sent(self, task: asyncio.Future[None]) -> None:
        self._sending.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.debug("%s: a line sent from a callback did not go: %s", self.name, exc)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()

    async def wait_exited(self) -> None:
        return None

    def describe_exit(self) -> str:
        return f"{self.name} closed the stream"


class StreamChannel(_Sending):
    """JSON-RPC over an asyncio reader/writer pair, one message per line."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter | Any, name: str = "stream",
                 answer_bad_frames: bool = False) -> None:
        super().__init__(writer, name, answer_bad_frames)
        self.reader = reader

    async def receive(self) -> Message | None:
        while True:
            try:
                line = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if exc.partial.strip():
                    line = exc.partial
                else:
                    return None
            except asyncio.LimitOverrunError:
                await self._skip_long_line()
                if self.answer_bad_frames:
                    await self.send(jsonrpc.error(None, jsonrpc.PARSE_ERROR,
                                                  f"message larger than {jsonrpc.MAX_LINE} bytes; skipped"))
                continue
            except (ConnectionError, OSError):
                return None
            if not line.strip():
                continue
            try:
                return jsonrpc.decode(line)
            except FrameError as exc:
                if self.answer_bad_frames:
                    await self.send(exc.reply)
                    continue
                # a server printing to stdout what is not MCP: skip it, and say so once in a while
                self.bad_frames += 1
                if self.bad_frames <= 5:
                    log.warning("%s: ignoring a line that is not JSON-RPC (%s): %.200r", self.name, exc, line)

    async def _skip_long_line(self) -> None:
        self.bad_frames += 1
        log.warning("%s: skipping a line longer than %d bytes", self.name, jsonrpc.MAX_LINE)
        while True:
            try:
                await self.reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await self.reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return


class _Output(asyncio.streams.FlowControlMixin):
    """A write pipe's protocol that also says when the pipe went away (its reader closed its end)."""

    def __init__(self) -> None:
        super().__init__()
        self.gone = asyncio.Event()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.gone.set()


Heard = Callable[[Message | None], None]


class PipeChannel(_Sending, asyncio.Protocol):
    """JSON-RPC on two file descriptors of pipes or sockets: a process's stdin and stdout, handed over to us.

    A reader that asks to be delivered to is handed each message in the loop turn its line is read, with no task
    of its own to wake first (a Peer does: every message in and out of the daemon passes here);
    otherwise receive() returns them in turn. A send returns once its bytes are in the pipe, so
    whoever takes the pipe over after close() starts at a line's beginning; pause() and
    take_unread() let a reader stop and hand on what it had read of a line it had not finished.

    It is its read pipe's protocol itself: what arrives is cut into lines in `data_received`, with no protocol
    object in between to pass it on (a Python call on every message in).
    """

    def __init__(self, writer: asyncio.StreamWriter, output_gone: asyncio.Event, name: str,
                 answer_bad_frames: bool) -> None:
        super().__init__(writer, name, answer_bad_frames)
        self.read_transport: asyncio.ReadTransport | None = None
        self.output_gone = output_gone  # set once nobody reads what we write (the host is gone), or we closed
        self._partial = bytearray()  # the start of a line not yet ended
        self._skipping = False  # within a line longer than MAX_LINE: dropped up to its end
        self._heard: Heard | None = None
        self._kept: collections.deque[Message | None] = collections.deque()  # for receive(), or until deliver_to()
        self._arrived: asyncio.Future[None] | None = None
        self._over = False

    @classmethod
    async def open(cls, read_fd: int, write_fd: int, name: str, answer_bad_frames: bool = False,
                   unread: bytes = b"") -> PipeChannel:
        """The channel owns both descriptors from here, whether it opens or not (ValueError: not a pipe or a
        socket). `unread`: what an earlier reader had read of the stream and not taken, read first."""
        writer, gone, rfile = await _pipes(read_fd, write_fd)
        channel = cls(writer, gone, name, answer_bad_frames)
        writer.transport.set_write_buffer_limits(0)  # drain() waits until the pipe has taken every byte
        await channel._read_from(rfile, unread)
        return channel

    async def _read_from(self, rfile: Any, unread: bytes = b"") -> None:
        if unread:
            self.data_received(unread)
        try:
            self.read_transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: self, rfile)
        except BaseException:
            rfile.close()
            self.writer.close()
            raise

    def deliver_to(self, heard: Heard) -> None:
        """Hand every message to `heard` as it is read, those read so far first; None once the stream has ended."""
        self._heard = heard
        while self._kept:
            heard(self._kept.popleft())

    async def receive(self) -> Message | None:
        while not self._kept:
            if self._over:
                return None
            self._arrived = asyncio.get_running_loop().create_future()
            await self._arrived
        return self._kept.popleft()

    def _put(self, msg: Message | None) -> None:
        if self._heard is not None:
            self._heard(msg)
            return
        self._kept.append(msg)
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(None)

    # ---- the read pipe's protocol

    def data_received(self, data: bytes) -> None:
        if self._skipping:
            end = data.find(b"\n")
            if end < 0:
                return
            self._skipping = False
            data = data[end + 1:]
        end = data.find(b"\n")
        if end < 0:  # a line's middle: kept, and not copied again until it ends
            self._partial += data
            if len(self._partial) > jsonrpc.MAX_LINE:
                self._too_long()
            return
        if self._partial:
            self._partial += data[:end]
            line = bytes(self._partial)
            self._partial.clear()
            self._line(line)
            data = data[end + 1:]
        lines = data.split(b"\n")
        self._partial += lines.pop()
        for line in lines:
            self._line(line)
        if len(self._partial) > jsonrpc.MAX_LINE:  # tested here: a call only for a line too long (never, as a rule)
            self._too_long()

    def _too_long(self) -> None:
        """The line being read passed MAX_LINE: it is skipped to its end, and said so."""
        self._partial.clear()
        self._skipping = True
        self.bad_frames += 1
        log.warning("%s: skipping a line longer than %d bytes", self.name, jsonrpc.MAX_LINE)
        if self.answer_bad_frames:
            self._answer(jsonrpc.error(None, jsonrpc.PARSE_ERROR,
                                       f"message larger than {jsonrpc.MAX_LINE} bytes; skipped"))

    def _line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            msg = jsonrpc.decode(line)
        except FrameError as exc:
            if self.answer_bad_frames:
                self._answer(exc.reply)
                return
            # a server printing to stdout what is not MCP: skip it, and say so once in a while
            self.bad_frames += 1
            if self.bad_frames <= 5:
                log.warning("%s: ignoring a line that is not JSON-RPC (%s): %.200r", self.name, exc, line)
            return
        self._put(msg)

    def eof_received(self) -> bool:
        self._ended()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended()

    def _answer(self, reply: Message) -> None:
        # sent as any reply is (so close() waits for it), and the next line read as if nothing happened
        self._in_turn(self.send(reply))

    def _ended(self) -> None:
        if self._over:
            return
        self._over = True
        if self._partial.strip() and not self._skipping:
            self._line(bytes(self._partial))  # the stream's last line, unended
        self._partial.clear()
        self._put(None)

    def pause(self) -> None:
        """Read no more from the pipe; what was read and not yet received still is."""
        if self.read_transport is not None:
            self.read_transport.pause_reading()

    def take_unread(self) -> bytes:
        """What was read from the pipe and not received: the start of a line not finished when reading stopped."""
        data = b"" if self._skipping else bytes(self._partial)
        self._partial.clear()
        return data

    async def close(self) -> None:
        # a send under way finishes its line first; a host that stopped reading is not waited for long
        if self._sending:
            await asyncio.wait(set(self._sending), timeout=2.0)
        self._writing += 1
        try:
            await asyncio.wait_for(self._write_lock.acquire(), 2.0)
        except TimeoutError:
            log.warning("%s: closing with a line half written: its reader stopped reading", self.name)
        else:
            self._write_lock.release()
        finally:
            self._writing -= 1
        if self.read_transport is not None:
            self.read_transport.close()
        self.writer.close()


async def _pipes(read_fd: int, write_fd: int) -> tuple[asyncio.StreamWriter, asyncio.Event, Any]:
    """A writer on `write_fd`, the event set once its reader is gone, and `read_fd` as the file to read; the
    descriptors are closed if this fails."""
    loop = asyncio.get_running_loop()
    rfile, wfile = os.fdopen(read_fd, "rb", buffering=0), os.fdopen(write_fd, "wb", buffering=0)
    try:
        transport, protocol = await loop.connect_write_pipe(_Output, wfile)
    except BaseException:
        rfile.close()
        wfile.close()
        raise
    return asyncio.StreamWriter(transport, protocol, None, loop), protocol.gone, rfile


class ProcessChannel(PipeChannel):
    """An upstream server started as a subprocess, talking MCP on its stdin and stdout.

    Its stdin and stdout are ours, not the subprocess transport's: that one hands on what it reads a
    loop turn later (asyncio's and uvloop's alike), on every message from a server.
    """

    def __init__(self, proc: asyncio.subprocess.Process, writer: asyncio.StreamWriter, output_gone: asyncio.Event,
                 command: list[str], name: str, spawned: Spawned | None = None) -> None:
        super().__init__(writer, output_gone, name, answer_bad_frames=False)
        self.proc = proc
        self.spawned = spawned
        self.command = command
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self._stderr_task = asyncio.create_task(self._drain_stderr())

    @classmethod
    async def start(cls, name: str, command: str, args: list[str], env: dict[str, str],
                    cwd: str | None = None, spawned: Spawned | None = None) -> ProcessChannel:
        """Start the server with exactly `env` as its environment: nothing of the daemon's is added here. `spawned`
        hears of its process, and gives what it runs before its command."""
        argv = [command, *args]
        # socket pairs, as uvloop's subprocess transport gave a server (it sees what it saw), not inheritable: only
        # the child's ends reach the child, as its 0 and 1
        stdin_r, stdin_w = (end.detach() for end in socket.socketpair())
        stdout_r, stdout_w = (end.detach() for end in socket.socketpair())
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=stdin_r, stdout=stdout_w, stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd,
                limit=jsonrpc.MAX_LINE,
                # its own process group: stopping it stops what it started too (npx runs node under npm)
                start_new_session=True, preexec_fn=spawned.preexec if spawned is not None else None)
        except (OSError, ValueError) as exc:
            os.close(stdin_w)
            os.close(stdout_r)
            raise StartError(f"server {name!r} could not start `{shown_command(argv)}`: "
                             f"{mask_text(str(exc))}") from None
        except BaseException:
            os.close(stdin_w)
            os.close(stdout_r)
            raise
        finally:
            os.close(stdin_r)
            os.close(stdout_w)
        if spawned is not None:
            spawned.started(proc.pid, name)
        try:
            writer, gone, rfile = await _pipes(stdout_r, stdin_w)
            channel = cls(proc, writer, gone, argv, name, spawned)
            await channel._read_from(rfile)
        except BaseException:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            if spawned is not None:
                spawned.ended(proc.pid)
            raise
        return channel

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        try:
            async for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    self.stderr_tail.append(line)
        except (ConnectionError, OSError, ValueError):
            pass

    def tail(self, lines: int = 12) -> str:
        """The end of what the server printed on stderr, secret-looking parts masked (it may echo its flags)."""
        return mask_text("\n".join(list(self.stderr_tail)[-lines:]))

    def describe_exit(self) -> str:
        code = self.proc.returncode
        state = f"exited with code {code}" if code is not None else "closed its stdout"
        tail = self.tail()
        return (f"server {self.name!r} (`{shown_command(self.command)}`) {state}"
                + (f"; its stderr ends:\n{tail}" if tail else ""))

    async def wait_exited(self) -> None:
        await self.wait_exit(1.0)

    async def wait_exit(self, timeout: float) -> int | None:
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            return None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._stderr_task), 0.5)
        return self.proc.returncode

    async def close(self) -> None:
        """Close stdin, then escalate SIGTERM → SIGKILL, each step bounded (the spec's shutdown order).

        The signals go to the server's process group, so what it started (a `sh -c` still
        sleeping, npm's node) stops with it; so does whatever outlived a server that ended itself.
        """
        if self.proc.returncode is None:
            with contextlib.suppress(Exception):
                self.writer.close()
            if await self.wait_exit(2.0) is None:
                self._signal_group(signal.SIGTERM)
                if await self.wait_exit(2.0) is None:
                    self._signal_group(signal.SIGKILL)
                    await self.wait_exit(2.0)
        self._signal_group(signal.SIGTERM)
        if self.spawned is not None:
            self.spawned.ended(self.proc.pid)
        self._stderr_task.cancel()
        self.writer.close()
        if self.read_transport is not None:
            self.read_transport.close()

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)  # its group id is its pid (start_new_session)
