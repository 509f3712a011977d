"""Server-sent events, both ways: the one writer and the one reader every part of mcpx uses.

Written by the daemon's `/v1/events` and by `/mcp`'s replies; read by the CLI (`mcpx elicit
watch`, `mcpx tui`) and by the upstream HTTP client. A stream is lines: `field: value`, a blank
line ending each event, a line starting with `:` a comment (a heartbeat).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def frame(data: str | None = None, *, id: object = None, event: str | None = None, retry: int | None = None,
          ) -> bytes:
    """One event. `data` is one line of text (JSON, in mcpx); a line break in it starts another data line."""
    out = []
    if retry is not None:
        out.append(f"retry: {retry}\n")
    if id is not None:
        out.append(f"id: {id}\n")
    if event is not None:
        out.append(f"event: {event}\n")
    if data is not None:
        lines = data.splitlines() if "\n" in data or "\r" in data else (data,)
        out.extend(f"data: {line}\n" for line in lines)
    out.append("\n")
    return "".join(out).encode()


def json_frame(data: bytes, *, id: int, event: str) -> bytes:
    """One event whose data is compact JSON already encoded (one line: JSON escapes its line breaks), as `frame`
    writes it, without decoding and re-encoding the bytes (every event stream sends each audit record)."""
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (id, event.encode(), data)


def comment(text: str) -> bytes:
    """A line readers skip: it keeps a quiet stream from looking dead to proxies and timeouts."""
    return f": {text}\n\n".encode()


@dataclass(frozen=True)
class Event:
    """One event as read. `id` is the stream's last event id (it carries over events that name none).

    `data` is None for an event without data, such as the daemon's opening `retry:`/`id:` frame
    that says where the log stands.
    """

    data: str | None
    event: str = "message"
    id: str | None = None
    retry: int | None = None


async def read(lines: AsyncIterable[bytes], partial: bool = False) -> AsyncIterator[Event]:
    """The events of a stream, each when its blank line arrives.

    An event the stream ends in the middle of is dropped, as the SSE spec says, unless `partial`:
    then one that has data is kept (some servers close a reply's stream without its last blank line).
    """
    last_id: str | None = None
    event, retry, fields = "message", None, False
    data: list[str] = []
    async for raw in lines:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if fields:
                yield Event("\n".join(data) if data else None, event, last_id, retry)
            event, data, retry, fields = "message", [], None, False
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        fields = True
        if name == "data":
            data.append(value)
        elif name == "id":
            last_id = value
        elif name == "event":
            event = value
        elif name == "retry" and value.isdigit():
            retry = int(value)
    if partial and data:
        yield Event("\n".join(data), event, last_id, retry)
