"""A floor that reads every message: a relay in Python that parses each JSON-RPC line both ways and writes it again.

    python bench/parsing_relay.py COMMAND [ARGS...]

bench/bare_relay.py copies bytes and reads no message; this one does what any MCP proxy must at the least:
splits the stream into lines, parses each message (json.loads), gives a request its own id on the way in
and the client's back on the way out (a proxy multiplexes), and encodes it again (json.dumps), on the loop
mcpx's daemon runs (uvloop when installed). What mcpx costs beyond this is its own bookkeeping, not JSON
and not the hops. bench/speed.py times it beside mcpx as the second floor of figures 1-3; like the bare
relay, it is no peer (it speaks MCP only as far as a line of JSON goes).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from typing import Any


class _Relay:
    """The two directions' state: the ids this relay gave the client's requests, and the client's own."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.client_ids: dict[int, Any] = {}

    def inward(self, line: bytes) -> bytes:
        msg = json.loads(line)
        if isinstance(msg, dict) and "method" in msg and "id" in msg:
            ours = next(self.ids)
            self.client_ids[ours] = msg["id"]
            msg["id"] = ours
        return json.dumps(msg, separators=(",", ":")).encode() + b"\n"

    def outward(self, line: bytes) -> bytes:
        msg = json.loads(line)
        if isinstance(msg, dict) and "method" not in msg and msg.get("id") in self.client_ids:
            msg["id"] = self.client_ids.pop(msg["id"])
        return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


class _Lines(asyncio.Protocol):
    """Bytes in, whole lines out through `each`, written to `out`."""

    def __init__(self, each: Any, out: Any, done: asyncio.Future[None]) -> None:
        self.each, self.out, self.done = each, out, done
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        *lines, self.buffer = (self.buffer + data).split(b"\n")
        for line in lines:
            if line.strip():
                self.out.write(self.each(line))

    def eof_received(self) -> bool:
        if not self.done.done():
            self.done.set_result(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def relay(argv: list[str]) -> int:
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    loop = asyncio.get_running_loop()
    state = _Relay()
    client_gone: asyncio.Future[None] = loop.create_future()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(sys.stdout.fileno(), "wb", 0))
    await loop.connect_read_pipe(lambda: _Lines(state.inward, proc.stdin, client_gone),
                                 os.fdopen(sys.stdin.fileno(), "rb", 0))
    buffer = b""
    while chunk := await proc.stdout.read(65536):
        *lines, buffer = (buffer + chunk).split(b"\n")
        for line in lines:
            if line.strip():
                out.write(state.outward(line))
    return await proc.wait()


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import uvloop  # the daemon's loop, where it is installed
    except ImportError:
        return asyncio.run(relay(sys.argv[1:]))
    return uvloop.run(relay(sys.argv[1:]))


if __name__ == "__main__":
    raise SystemExit(main())
