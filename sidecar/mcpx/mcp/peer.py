"""A JSON-RPC endpoint over a message channel: our requests matched to their responses, theirs dispatched.

The two directions keep separate id spaces (a server numbers its own requests from 1 too),
and each incoming request runs in its own task, so one that waits for a person does not
hold up the frames behind it; or, on a channel that writes from a callback, a handler may take it in the turn
it is read, with no task at all (`TakeNow`: a plain call, surface/plain_call.py), and reply from a callback.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from mcpx.mcp import jsonrpc
from mcpx.mcp.jsonrpc import Message, RpcError
from mcpx.shared.errors import McpxError

log = logging.getLogger("mcpx.mcp")

RequestHandler = Callable[[Message], Awaitable[dict[str, Any]]]
NotificationHandler = Callable[[Message], Awaitable[None]]


class Channel(Protocol):
    """Moves whole JSON-RPC messages; stdio, HTTP and in-memory pipes all look like this.

    A channel that can hand each message on as it reads it also has `deliver_to(heard)` (mcp/stdio.py's
    pipes): the peer then takes them so, and never calls receive().
    """

    async def send(self, msg: Message) -> None: ...

    async def receive(self) -> Message | None:
        """The next message, or None once the other side is gone."""
        ...

    async def close(self) -> None: ...

    async def wait_exited(self) -> None:
        """Once the stream has ended: let the other side finish dying, so describe_exit can tell how."""
        ...

    def describe_exit(self) -> str:
        """Why the channel closed, in words (exit code, stderr tail)."""
        ...


class PeerClosed(McpxError):
    """The other side went away while we waited for it."""


class Taken(Protocol):
    """A request of the other side's taken in the loop turn it was read, with no task of its own (`TakeNow`): its
    handler replies from a callback (`Peer.reply_now`), or has a task carry it on (`Peer.take_on`)."""

    def withdraw(self) -> None:
        """The other side withdrew it (notifications/cancelled): no reply is owed."""
        ...

    def abandon(self) -> None:
        """The channel closed: nobody reads a reply."""
        ...


# takes a request in its turn, or declines (None: it runs in a task of its own, as every other request does); it is
# handed the peer the request came on (what it replies through), so that a handler needs no closure of its own over
# it: a partial does
TakeNow = Callable[[Message, "Peer"], Taken | None]


async def _no_requests(msg: Message) -> dict[str, Any]:
    raise RpcError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {msg.get('method')}")


async def _ignore(_msg: Message) -> None:
    return None


class Peer:
    def __init__(self, channel: Channel, on_request: RequestHandler = _no_requests,
                 on_notification: NotificationHandler = _ignore, name: str = "peer",
                 take_now: TakeNow | None = None) -> None:
        self.channel = channel
        self.name = name
        self.on_request = on_request
        self.on_notification = on_notification
        # a channel that writes from a callback (send_now) may have requests taken in their turn, with no task
        self._send_now: Callable[[Message], object] | None = getattr(channel, "send_now", None)
        self._take_now = take_now if self._send_now is not None else None
        self._taken: dict[jsonrpc.Id, Taken] = {}
        self._ids = itertools.count(1)
        self._pending: dict[jsonrpc.Id, asyncio.Future[Message]] = {}
        # who hears a reply in the loop turn it is read (Sent.when_replied), not a turn later as a future's callback
        self._hearing: dict[jsonrpc.Id, Callable[[], None]] = {}
        self._incoming: dict[jsonrpc.Id, asyncio.Task[None]] = {}
        self._notifying: set[asyncio.Task[None]] = set()  # held, or the loop may collect one mid-flight
        # incoming requests the other side withdrew (notifications/cancelled), as opposed to ones ended because
        # the channel closed: only the former is a cancel (surface/driver.py)
        self.withdrawn: set[jsonrpc.Id] = set()
        self._replied: set[jsonrpc.Id] = set()  # requests still being handled whose reply went early (reply_early)
        self._reader: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()
        self.shut = False  # closed.is_set(), read on every message's way without a call
        self.close_reason = ""

    def start(self) -> None:
        deliver_to = getattr(self.channel, "deliver_to", None)
        if deliver_to is not None:
            # a channel that hands each message on as it is read: dispatched in that same loop turn, with no
            # reader task of ours to wake first
            deliver_to(self._heard)
            return
        self._reader = asyncio.create_task(self._read(), name=f"mcpx-peer-{self.name}")

    @property
    def alive(self) -> bool:
        return not self.shut

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      timeout: float | None = None, numbered: Callable[[jsonrpc.Id], None] | None = None,
                      sent: Callable[[], object] | None = None) -> dict[str, Any]:
        """Send a request and return its result; RpcError for an error reply, PeerClosed if the peer dies.
        `numbered` hears the request's id before it is sent, `sent` that it was written."""
        out = await self.send_request(method, params, numbered)
        if sent is not None and out.written:
            sent()
        return await out.reply(timeout)

    async def send_request(self, method: str, params: dict[str, Any] | None = None,
                           numbered: Callable[[jsonrpc.Id], None] | None = None) -> Sent:
        """Write a request: its reply is awaited apart (`Sent.reply`), by this task or by another one (a plain
        call's lean path hands its request on so, surface/driver.py). A request that could not be written has its
        error (PeerClosed) as its reply."""
        opened = self._open(numbered)
        if isinstance(opened, Sent):
            return opened
        rid, fut = opened
        try:
            await self._send(jsonrpc.request(rid, method, params), method)
        except PeerClosed as exc:
            self._pending.pop(rid, None)
            fut.set_exception(exc)
            return Sent(self, rid, fut, written=False)
        except asyncio.CancelledError:
            self._pending.pop(rid, None)
            await self._withdraw(rid)  # cancelled while its write drained: it may have gone out whole
            raise
        except BaseException:
            self._pending.pop(rid, None)
            raise
        return Sent(self, rid, fut, written=True)

    def send_request_now(self, method: str, params: dict[str, Any] | None = None,
                         numbered: Callable[[jsonrpc.Id], None] | None = None) -> Sent:
        """`send_request` from a callback, on a channel that writes so (`send_now`; else RuntimeError): written now,
        in order with every other message."""
        if self._send_now is None:
            raise RuntimeError(f"{self.name}: its channel cannot write from a callback")
        opened = self._open(numbered)
        if isinstance(opened, Sent):
            return opened
        rid, fut = opened
        try:
            self._send_now(jsonrpc.request(rid, method, params))
        except (ConnectionError, OSError) as exc:
            self._pending.pop(rid, None)
            fut.set_exception(self._unsent(method, exc))
            return Sent(self, rid, fut, written=False)
        return Sent(self, rid, fut, written=True)

    def _open(self, numbered: Callable[[jsonrpc.Id], None] | None) -> tuple[jsonrpc.Id, asyncio.Future[Message]] | Sent:
        """A new request's id and its reply's future, awaited from now on; a closed peer's Sent, its error its reply."""
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        if self.shut:
            fut.set_exception(PeerClosed(self.close_reason or f"{self.name} is closed"))
            return Sent(self, None, fut, written=False)
        rid = next(self._ids)
        if numbered is not None:
            numbered(rid)
        self._pending[rid] = fut
        return rid, fut

    async def _withdraw(self, rid: jsonrpc.Id) -> None:
        """Tell the other side we no longer want request `rid` (the stdio way; HTTP closes the stream)."""
        if self.closed.is_set():
            return
        try:
            await self.channel.send(jsonrpc.notification("notifications/cancelled",
                                                         {"requestId": rid, "reason": "cancelled by mcpx"}))
        except Exception as exc:
            log.debug("%s: could not withdraw request %r: %s", self.name, rid, exc)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        if not self.closed.is_set():
            await self._send(jsonrpc.notification(method, params), method)

    async def _send(self, msg: Message, method: str) -> None:
        """A message out; a channel that went away is PeerClosed, as it is to whoever waits for a reply."""
        try:
            await self.channel.send(msg)
        except (ConnectionError, OSError) as exc:
            raise self._unsent(method, exc) from None

    def _unsent(self, method: str, exc: Exception) -> PeerClosed:
        return PeerClosed(self.close_reason or f"{self.name}: {method} could not be sent: {exc}")

    async def _read(self) -> None:
        try:
            while True:
                msg = await self.channel.receive()
                if msg is None:
                    break
                self._dispatch(msg)
        except Exception as exc:  # a broken channel ends the peer; the reason is kept
            self.close_reason = f"{type(exc).__name__}: {exc}"
            log.debug("%s: channel failed: %s", self.name, exc)
        finally:
            await self._ended()

    def _heard(self, msg: Message | None) -> None:
        if self.shut or self._reader is not None:  # closed, or ending: nothing more is read
            return
        if msg is not None:
            try:
                self._dispatch(msg)
                return
            except Exception as exc:  # as in _read: a message that breaks the dispatch ends the peer
                self.close_reason = f"{type(exc).__name__}: {exc}"
                log.debug("%s: channel failed: %s", self.name, exc)
        if self._reader is None:
            self._reader = asyncio.create_task(self._ended(), name=f"mcpx-peer-{self.name}")

    async def _ended(self) -> None:
        if not self.close_reason:
            try:
                await asyncio.wait_for(self.channel.wait_exited(), 2.0)
            except Exception as exc:  # its exit is only the reason given; the peer shuts all the same
                log.debug("%s: no exit status to give as the reason: %r", self.name, exc)
        self._shut(self.close_reason or self.channel.describe_exit())

    def _dispatch(self, msg: Message) -> None:
        kind = jsonrpc.kind(msg)
        if kind in ("response", "error"):
            rid = jsonrpc.id_of(msg.get("id"))
            fut = self._pending.get(rid) if rid is not None else None
            if fut is not None and not fut.done():
                fut.set_result(msg)
                hearing = self._hearing.pop(rid, None) if self._hearing and rid is not None else None
                if hearing is not None:
                    _hear(hearing)
            else:
                log.debug("%s: response to unknown id %r dropped", self.name, msg.get("id"))
        elif kind == "request":
            rid = msg["id"]
            if self._take_now is not None and rid not in self._taken and rid not in self._incoming:
                try:
                    taken = self._take_now(msg, self)
                except Exception as exc:  # its handler's trouble, said to the other side as any handler's is
                    self._reply_now(self._failed(msg, exc))
                    return
                if taken is not None:
                    self._taken[rid] = taken
                    return
            self._incoming[rid] = asyncio.create_task(self._answer(msg), name=f"mcpx-in-{self.name}-{rid}")
        else:
            if msg.get("method") == "notifications/cancelled":
                target = jsonrpc.id_of((msg.get("params") or {}).get("requestId"))
                task = self._incoming.get(target) if target is not None else None
                if target is not None and task is not None:
                    self.withdrawn.add(target)
                    task.cancel()
                elif target is not None and (taken := self._taken.get(target)) is not None:
                    self.withdrawn.add(target)
                    taken.withdraw()
            handling = asyncio.create_task(self._notify_safely(msg))
            self._notifying.add(handling)
            handling.add_done_callback(self._notifying.discard)

    async def _notify_safely(self, msg: Message) -> None:
        try:
            await self.on_notification(msg)
        except Exception:
            log.exception("%s: handling %s failed", self.name, msg.get("method"))

    async def _answer(self, msg: Message, work: Awaitable[dict[str, Any]] | None = None) -> None:
        """Reply to `msg` with what its handler (or `work`, a taken request's carrying on) returns."""
        rid = msg["id"]
        try:
            try:
                value = await (work if work is not None else self.on_request(msg))
                # its reply went early already (reply_early): nothing of what the handler returned is written
                reply: Message | None = None if rid in self._replied else jsonrpc.result(rid, value)
            except RpcError as exc:
                reply = jsonrpc.error(rid, exc.code, exc.message, exc.data)
            except asyncio.CancelledError:
                raise  # withdrawn by the peer (or we are closing): no reply is owed
            except Exception as exc:
                reply = self._failed(msg, exc)
            if reply is None or rid in self._replied:
                return  # its reply went early, from the step that had it (reply_early)
            if not self.closed.is_set():
                try:
                    await self.channel.send(reply)
                except Exception as exc:
                    log.debug("%s: could not reply to %r: %s", self.name, rid, exc)
        finally:
            self._incoming.pop(rid, None)
            self._taken.pop(rid, None)
            self.withdrawn.discard(rid)
            self._replied.discard(rid)

    def _failed(self, msg: Message, exc: Exception) -> Message:
        """The reply to a request whose handler failed (mcpx's own bug: logged whole)."""
        log.exception("%s: handling %s failed", self.name, msg.get("method"), exc_info=exc)
        return jsonrpc.error(msg["id"], jsonrpc.INTERNAL_ERROR, f"mcpx failed handling {msg.get('method')}: {exc}")

    def reply_early(self, rid: jsonrpc.Id, value: dict[str, Any]) -> bool:
        """The reply to request `rid`, whose handler is still running, written now from a callback's step (a question's
        answer handed to its server before the answer's record is built: upstream/mcp_call.py); what the handler then
        returns is not written. False, and nothing written, where it cannot be: a channel that does not write from a
        callback, a request not being handled here (or withdrawn, or replied to already), a closed peer."""
        if rid not in self._incoming or rid in self.withdrawn or rid in self._replied:
            return False
        if not self._reply_now(jsonrpc.result(rid, value)):
            return False  # the other side went (its handler's reply would not go either), or no such channel
        self._replied.add(rid)
        return True

    def reply_now(self, rid: jsonrpc.Id, value: dict[str, Any]) -> None:
        """The reply to a taken request, written from a callback; it is over."""
        self.settle(rid)
        self._reply_now(jsonrpc.result(rid, value))

    def reply_error_now(self, rid: jsonrpc.Id, exc: RpcError) -> None:
        """`reply_now` of an error: the reply to a taken request, its handler's RpcError, as `_answer` writes it."""
        self.settle(rid)
        self._reply_now(jsonrpc.error(rid, exc.code, exc.message, exc.data))

    def _reply_now(self, reply: Message) -> bool:
        """`reply` written from a callback's step; False where it could not be (no such channel, a closed peer, the
        other side gone)."""
        if self._send_now is None or self.shut:
            return False
        try:
            self._send_now(reply)
        except Exception as exc:
            log.debug("%s: could not reply to %r: %s", self.name, reply.get("id"), exc)
            return False
        return True

    def take_on(self, msg: Message, work: Awaitable[dict[str, Any]]) -> asyncio.Task[None]:
        """A taken request carried on in a task of its own, replied to as any request is; the task is the taken
        request's to cancel (withdraw, abandon), and nobody else's."""
        return asyncio.create_task(self._answer(msg, work), name=f"mcpx-in-{self.name}-{msg['id']}")

    def settle(self, rid: jsonrpc.Id) -> None:
        """A taken request is over with no reply of this peer's to write (withdrawn, or replied to)."""
        self._taken.pop(rid, None)
        self.withdrawn.discard(rid)

    def _shut(self, reason: str) -> None:
        if self.shut:
            return
        self.close_reason = reason
        self.shut = True
        self.closed.set()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(PeerClosed(reason))
        hearing, self._hearing = self._hearing, {}
        for heard in hearing.values():
            _hear(heard)
        for task in list(self._incoming.values()):
            task.cancel()
        for taken in list(self._taken.values()):
            try:
                taken.abandon()
            except Exception:  # one request's trouble is not the others'
                log.exception("%s: abandoning a request taken in its turn failed", self.name)

    async def close(self) -> None:
        self._shut(self.close_reason or "closed by mcpx")
        await self.channel.close()
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            await asyncio.wait({self._reader})  # its end; a cancel of close() itself still reaches our caller
            if not self._reader.cancelled() and self._reader.exception() is not None:
                log.debug("%s: the reader ended with %r", self.name, self._reader.exception())


def _hear(heard: Callable[[], None]) -> None:
    """Whoever hears a reply in its turn: its trouble is its own, not the channel's (which it would end)."""
    try:
        heard()
    except Exception:
        log.exception("hearing a reply failed")


class Sent:
    """A request written to the peer, its reply still to come: `future` is set when it comes (or the peer dies)."""

    def __init__(self, peer: Peer, rid: jsonrpc.Id | None, future: asyncio.Future[Message], written: bool) -> None:
        self.peer = peer
        self.rid = rid
        self.future = future
        self.written = written

    def _forget(self) -> None:
        if self.rid is not None:
            self.peer._pending.pop(self.rid, None)
            self.peer._hearing.pop(self.rid, None)

    def abandon(self) -> None:
        """Nobody will wait for the reply (whoever was to was cancelled before it began): the request is withdrawn,
        as a cancelled wait (`reply`) withdraws it, unless its reply came or it was given up on already."""
        if self.rid is None or self.rid not in self.peer._pending or self.future.done():
            return
        self._forget()
        if self.written:
            withdrawing = asyncio.create_task(self.peer._withdraw(self.rid))
            self.peer._notifying.add(withdrawing)  # held, as a notification's handling is
            withdrawing.add_done_callback(self.peer._notifying.discard)

    def give_up(self) -> None:
        """Nobody waits for the reply any more, and the other side is not told: as a wait on it that timed out
        (`reply`), for whoever takes the reply in its turn (`when_replied`) and times it out itself."""
        self._forget()
        self.future.cancel()

    def when_replied(self, heard: Callable[[], None]) -> None:
        """Call `heard` in the loop turn the reply is read (or the peer dies), once `future` is set: not a loop turn
        later, as a callback on the future would be (a plain call's lean path takes its reply so). Soon, if it came
        already; never, once the reply was taken (`result`) or given up on."""
        if self.future.done():
            asyncio.get_running_loop().call_soon(heard)
        elif self.rid is not None and self.rid in self.peer._pending:
            self.peer._hearing[self.rid] = heard

    def result(self) -> dict[str, Any]:
        """The reply, once it came: its result; RpcError for an error reply, PeerClosed if the peer died."""
        self._forget()
        reply = self.future.result()
        if "error" in reply:
            raise RpcError.from_error(reply["error"])
        value = reply.get("result")
        return value if isinstance(value, dict) else {}

    async def reply(self, timeout: float | None = None) -> dict[str, Any]:
        """Wait for the reply (`result`). A wait that is cancelled withdraws the request: the other side is told."""
        peer = self.peer
        try:
            if timeout:
                # the reply's future is ours alone, so a timeout may cancel it: no shield, no wait_for's extra
                # future, and the caller resumes in the loop turn the reply is read in
                async with asyncio.timeout(timeout):
                    await self.future
            else:
                await self.future
        except TimeoutError:
            self._forget()
            raise
        except asyncio.CancelledError:
            self._forget()
            if self.written and self.rid is not None:
                await peer._withdraw(self.rid)
            raise
        except BaseException:
            self._forget()
            raise
        return self.result()
