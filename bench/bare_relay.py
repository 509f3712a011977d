"""The floor of a process between an MCP client and a stdio server: bytes copied both ways, nothing else.

    python bench/bare_relay.py COMMAND [ARGS...]

It starts COMMAND with pipes and copies the client's stdin to it and its stdout back, on one asyncio loop
(the stock one, as mcpx's daemon runs). It reads no message and keeps no state, so what it costs is what a
process in the middle costs here: two more pipe hops and wake-ups. bench/speed.py times it beside mcpx as the
floor of figures 1-3; it is no proxy a user would pick (it speaks no MCP: no tools of its own, no
questions), so it is not one of the peers mcpx must be ahead of.
"""

from __future__ import annotations

import asyncio
import os
import sys


class _ToServer(asyncio.Protocol):
    """The client's bytes, written to the server as they come; its EOF closes the server's stdin."""

    def __init__(self, server_stdin: asyncio.StreamWriter, done: asyncio.Future[None]) -> None:
        self.server_stdin = server_stdin
        self.done = done

    def data_received(self, data: bytes) -> None:
        self.server_stdin.write(data)

    def eof_received(self) -> bool:
        self.server_stdin.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def relay(argv: list[str]) -> int:
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    loop = asyncio.get_running_loop()
    client_gone: asyncio.Future[None] = loop.create_future()
    await loop.connect_read_pipe(lambda: _ToServer(proc.stdin, client_gone),  # type: ignore[arg-type]
                                 os.fdopen(sys.stdin.fileno(), "rb", 0))
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(sys.stdout.fileno(), "wb", 0))
    while chunk := await proc.stdout.read(65536):
        out.write(chunk)
    return await proc.wait()


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    return asyncio.run(relay(sys.argv[1:]))


if __name__ == "__main__":
    raise SystemExit(main())
