"""Channels over newline-delimited JSON: a server subprocess, a pair of pipes handed over, or any asyncio stream
pair."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
from typing import Any

from mcpx.errors import McpxError
from mcpx.masking import mask_text, shown_command
from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import FrameError, Message

log = logging.getLogger("mcpx.mcp")


class StartError(McpxError):
    """An upstream that could not start: says which command and what it printed."""


class StreamChannel:
    """JSON-RPC over a reader/writer pair, one message per line.

    A line that is not JSON-RPC is skipped and logged, as a server's stray output is; with
    `answer_bad_frames` (we serve the other side) it is answered with the JSON-RPC error, as a
    server must, and the next line is read as if nothing happened.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter | Any, name: str = "stream",
                 answer_bad_frames: bool = False) -> None:
        self.reader = reader
        self.writer = writer
        self.name = name
        self.answer_bad_frames = answer_bad_frames
        self._write_lock = asyncio.Lock()
        self.bad_frames = 0

    async def send(self, msg: Message) -> None:
        data = jsonrpc.encode(msg)
        if self.writer.transport.is_closing():
            # the other side went (a server that exited at once): a write would raise the transport's own
            # RuntimeError ("the handler is closed"), which no caller expects of a closed pipe
            raise ConnectionResetError(f"{self.name}: the stream is closed")
        if not self._write_lock.locked():
            # nobody's line is under way: written at once, and when the pipe took it all (it nearly always does)
            # there is nothing to drain, nor a lock to hold; every message in and out of the daemon is sent here
            self.writer.write(data)
            if not self.writer.transport.get_write_buffer_size():
                return
            async with self._write_lock:
                await self.writer.drain()
            return
        async with self._write_lock:
            self.writer.write(data)
            await self.writer.drain()

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

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()

    async def wait_exited(self) -> None:
        return None

    def describe_exit(self) -> str:
        return f"{self.name} closed the stream"


class _Output(asyncio.streams.FlowControlMixin):
    """A write pipe's protocol that also says when the pipe went away (its reader closed its end)."""

    def __init__(self) -> None:
        super().__init__()
        self.gone = asyncio.Event()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.gone.set()


class PipeChannel(StreamChannel):
    """JSON-RPC on two file descriptors of pipes or sockets: a process's stdin and stdout, handed over to us.

    A send returns once its bytes are in the pipe, so whoever takes the pipe over after close()
    starts at a line's beginning; pause() and take_unread() let a reader stop and hand on what it
    had read of a line it had not finished.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 read_transport: asyncio.ReadTransport, output_gone: asyncio.Event, name: str,
                 answer_bad_frames: bool) -> None:
        super().__init__(reader, writer, name, answer_bad_frames)
        self.read_transport = read_transport
        self.output_gone = output_gone  # set once nobody reads what we write (the host is gone), or we closed

    @classmethod
    async def open(cls, read_fd: int, write_fd: int, name: str, answer_bad_frames: bool = False,
                   unread: bytes = b"") -> PipeChannel:
        """The channel owns both descriptors from here, whether it opens or not (ValueError: not a pipe or a
        socket). `unread`: what an earlier reader had read of the stream and not taken, read first."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=jsonrpc.MAX_LINE)
        if unread:
            reader.feed_data(unread)
        rfile, wfile = os.fdopen(read_fd, "rb", buffering=0), os.fdopen(write_fd, "wb", buffering=0)
        read_transport: asyncio.ReadTransport | None = None
        try:
            read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), rfile)
            transport, protocol = await loop.connect_write_pipe(_Output, wfile)
        except BaseException:
            if read_transport is not None:
                read_transport.close()
            rfile.close()
            wfile.close()
            raise
        transport.set_write_buffer_limits(0)  # drain() waits until the pipe has taken every byte
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        return cls(reader, writer, read_transport, protocol.gone, name, answer_bad_frames)

    def pause(self) -> None:
        """Read no more from the pipe; lines already read are still received."""
        self.read_transport.pause_reading()

    def take_unread(self) -> bytes:
        """What was read from the pipe and not received: the start of a line not finished when reading stopped.

        StreamReader has no public way to give back its buffer; without the attribute nothing is handed back,
        and that line's start is lost (the next reader sees its tail as a line that is not JSON)."""
        buffered = getattr(self.reader, "_buffer", None)
        if not isinstance(buffered, bytearray):
            return b""
        data = bytes(buffered)
        buffered.clear()
        return data

    async def close(self) -> None:
        # a send under way finishes its line first; a host that stopped reading is not waited for long
        try:
            await asyncio.wait_for(self._write_lock.acquire(), 2.0)
        except TimeoutError:
            log.warning("%s: closing with a line half written: its reader stopped reading", self.name)
        else:
            self._write_lock.release()
        self.read_transport.close()
        self.writer.close()


class ProcessChannel(StreamChannel):
    """An upstream server started as a subprocess, talking MCP on its stdin and stdout."""

    def __init__(self, proc: asyncio.subprocess.Process, command: list[str], name: str) -> None:
        assert proc.stdout is not None and proc.stdin is not None
        super().__init__(proc.stdout, proc.stdin, name)
        self.proc = proc
        self.command = command
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self._stderr_task = asyncio.create_task(self._drain_stderr())

    @classmethod
    async def start(cls, name: str, command: str, args: list[str], env: dict[str, str],
                    cwd: str | None = None) -> ProcessChannel:
        """Start the server with exactly `env` as its environment: nothing of the daemon's is added here."""
        argv = [command, *args]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd, limit=jsonrpc.MAX_LINE,
                # its own process group: stopping it stops what it started too (npx runs node under npm)
                start_new_session=True)
        except (OSError, ValueError) as exc:
            raise StartError(f"server {name!r} could not start `{shown_command(argv)}`: "
                             f"{mask_text(str(exc))}") from None
        return cls(proc, argv, name)

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
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            if await self.wait_exit(2.0) is None:
                self._signal_group(signal.SIGTERM)
                if await self.wait_exit(2.0) is None:
                    self._signal_group(signal.SIGKILL)
                    await self.wait_exit(2.0)
        self._signal_group(signal.SIGTERM)
        self._stderr_task.cancel()

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)  # its group id is its pid (start_new_session)
