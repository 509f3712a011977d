"""Notifications: news of each question, as it opens (or is escalated to the person), to the targets of
`elicit.notify` — a webhook (JSON), an ntfy topic (ntfy's publish format) or this machine's desktop.

A notification follows the broker's event bus, so it leaves in the loop turn after the question commits. Each
send is its own task, bounded (a few attempts, each with a timeout), so a target that is down or slow never
delays or breaks opening a question, nor another target. Failures are logged (the target's scheme and host
only: a URL's path is often its secret) and counted for `mcpx status`.

What is sent: the question's id, server, tool, message, mode, audience, deadline and link. Never an answer's
values, never the inbox's token; the link opens that one question while it is pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from pydantic import BaseModel, Field

from mcpx.broker.broker import Broker
from mcpx.broker.models import Audience, AuditRecord, Elicitation, Mode, WireModel
from mcpx.config.models import NotifyTarget, Person
from mcpx.presentation.text import plain
from mcpx.presentation.urlfacts import LOOPBACK_NOTE, reachable_elsewhere
from mcpx.shared.errors import McpxError

log = logging.getLogger("mcpx.notify")

KINDS = ("elicit.open", "elicit.escalated", "elicit.reminded")
SIGNATURE = "X-Mcpx-Signature"  # sha256=<hex HMAC-SHA256 of the raw body, keyed by the webhook's secret>
ATTEMPTS = 3
TIMEOUT = 5.0  # seconds per attempt
BACKOFF = 0.5  # seconds before the second attempt, doubling


class NotifyStat(WireModel):
    target: str = Field(description="the target's kind, scheme and host")
    sent: int = 0
    failed: int = 0
    last_error: str | None = None


class SendFailed(McpxError):
    pass


class Notice(BaseModel):
    """A webhook's JSON: news of one question (docs/inbox.md). Never an answer's values, never the inbox's token."""

    event: str
    id: str
    server: str
    tool: str | None
    message: str
    mode: Mode
    audience: Audience
    deadline: str  # as the API writes a question's expiresAt
    link: str | None  # its one-answer link, None while the inbox has no address
    reach: str | None = None  # given only when the link cannot be opened where the notification is read

    def wire(self) -> dict[str, Any]:
        """The JSON object POSTed: what was given, `reach` left out when there is none."""
        return self.model_dump(exclude_unset=True)


class Action(BaseModel):
    """One of an approver's buttons: a bot performs it exactly as given (POST `url` with `body`)."""

    label: str
    action: Literal["accept", "decline"]
    url: str
    method: Literal["POST"]
    body: str


class Tally(BaseModel):
    """Where a question's approvals stand, as an approver's notice says it."""

    need: int
    by: list[str]
    waiting: list[str]


class ApproverNotice(Notice):
    """An approver's webhook JSON (docs/approvals.md): the question's news, and theirs to act on."""

    person: str
    why: str  # asked, reminder or escalation
    approvals: Tally
    status: str
    actions: list[Action]


def payload(q: Elicitation, link: str | None, event: str) -> Notice:
    return Notice(event=event, id=q.id, server=q.server, tool=q.tool, message=q.message, mode=q.mode,
                  audience=q.audience, deadline=q.wire()["expiresAt"], link=link,
                  **({"reach": why} if (why := reach(link)) is not None else {}))


def signature(key: bytes, body: bytes) -> str:
    """The X-Mcpx-Signature of a webhook's POST: what a receiver recomputes over the raw body to trust it."""
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def reach(link: str | None) -> str | None:
    """Why a link in a notification cannot be opened where the notification is read, or None if it can."""
    return None if link is None or reachable_elsewhere(link) else LOOPBACK_NOTE


@dataclass(frozen=True)
class Approver:
    """One approver's notification: who, why now, and their own link and actions (url, method, body)."""

    person: str
    why: str  # asked, reminder or escalation
    link: str
    accept: str
    decline: str

    def actions(self) -> list[Action]:
        return [Action(label="Approve", action="accept", url=self.accept, method="POST", body=""),
                Action(label="Decline", action="decline", url=self.decline, method="POST", body="")]


def approver_payload(q: Elicitation, who: Approver, event: str) -> ApproverNotice:
    news = payload(q, who.link, event)
    assert q.approvals is not None
    a = q.approvals
    return ApproverNotice(**{name: getattr(news, name) for name in news.model_fields_set}, person=who.person,
                          why=who.why, approvals=Tally(need=a.need, by=a.by, waiting=a.waiting), status=a.status,
                          actions=who.actions())


def _header(text: str) -> str:
    """A header's value: one line, and what HTTP headers can carry (latin-1); the body carries the rest."""
    return plain(text, 200).encode("latin-1", "replace").decode("latin-1")


class Notifier:
    """`people`: the config's people in force; `approver(eid, person, action)`: that approver's own link (action
    None: their page; accept, decline: the POST that answers as them), None while the inbox has no address."""

    def __init__(self, broker: Broker, targets: Callable[[], list[NotifyTarget]],
                 link: Callable[[str], str | None], timeout: float = TIMEOUT,
                 people: Callable[[], dict[str, Person]] = dict,
                 approver: Callable[[str, str, str | None], str | None] = lambda *_: None) -> None:
        self.broker = broker
        self.targets = targets
        self.link = link
        self.people = people
        self.approver = approver
        self.timeout = timeout
        self.stats: dict[str, NotifyStat] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None
        self._http: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        self._runner = asyncio.create_task(self._follow(), name="mcpx-notify")

    async def close(self) -> None:
        for task in [self._runner, *self._tasks]:
            if task is not None:
                task.cancel()
        for task in [self._runner, *self._tasks]:
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._http is not None:
            await self._http.close()

    def summary(self) -> list[NotifyStat]:
        return [self.stats[t.shown] if t.shown in self.stats else NotifyStat(target=t.shown) for t in self.targets()]

    async def _follow(self) -> None:
        while not self.broker.bus.closed:
            # by kinds: the bus asks nothing of it for another kind's record, and knows nobody here hears a plain
            # call's task.done (EventBus.hears: such records are then not even made); `_may_tell` of those kinds
            with self.broker.bus.subscribe(self._may_tell, kinds=frozenset(KINDS)) as sub:
                while (record := await sub.get()) is not None:
                    try:
                        await self._news(record)
                    except Exception:  # one question's news must not end the others'
                        log.exception("notifying of %s failed", record.elicit)
            # the stream ended: the daemon is stopping, or this fell behind (then it follows on from now)

    def _may_tell(self, record: AuditRecord) -> bool:
        """Whether `_news` could tell anyone of `record`: not without a target or a person in the config in force
        (the records' own approvers are people of it). Asked as the record is published, so that a daemon with
        neither does not wake this task for every question it opens (~1.3% of a question's lifecycle on the loop,
        under callgrind)."""
        return bool(self.targets()) or bool(self.people())

    async def _news(self, record: AuditRecord) -> None:
        targets = self.targets() if record.kind != "elicit.reminded" else []
        asks = self._approvers(record)
        if (not targets and not asks) or record.elicit is None:
            return
        q, _ = await self.broker.get(record.elicit)
        if q.state != "pending":
            return  # answered by a rule as it opened: there is nothing to ask anyone
        people = self.people()
        for person, why in asks:
            urls = [self.approver(q.id, person, action) for action in (None, "accept", "decline")]
            if None in urls or person not in people:
                continue
            link, accept, decline = (u or "" for u in urls)
            who = Approver(person, why, link, accept, decline)
            for target in people[person].notify:
                self._spawn(target, q, approver_payload(q, who, record.kind), who)
        if not targets:
            return
        # who it was for when this happened, not now: a notifier that lags behind may read a question already
        # escalated, and its opening was the agent's news, not the person's
        then = record.data.get("to" if record.kind == "elicit.escalated" else "audience")
        if then in ("agent", "agent-then-human", "human") and then != q.audience:
            q = q.model_copy(update={"audience": then})
        body = payload(q, self.link(q.id), record.kind)
        for target in targets:
            if target.wants(q.audience, q.server, q.session):
                self._spawn(target, q, body, None)

    def _approvers(self, record: AuditRecord) -> list[tuple[str, str]]:
        """The approvers a record says to notify now, and why; none for a record another daemon of a team wrote
        (that daemon notifies them, each once)."""
        me = self.broker.store_info.daemon
        if record.data.get("daemon") not in (None, me.id if me is not None else None):
            return []
        if record.kind == "elicit.open" and isinstance(record.data.get("approvals"), dict):
            return [(p, "asked") for p in record.data["approvals"].get("waiting", [])]
        if record.kind == "elicit.reminded":
            return ([(p, "reminder") for p in record.data.get("remind", [])]
                    + [(p, "escalation") for p in record.data.get("escalate", [])])
        return []

    def _spawn(self, target: NotifyTarget, q: Elicitation, body: Notice, who: Approver | None) -> None:
        task = asyncio.create_task(self._send(target, q, body, who), name=f"mcpx-notify-{target.kind}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, target: NotifyTarget, q: Elicitation, body: Notice, who: Approver | None) -> None:
        stat = self.stats.setdefault(target.shown, NotifyStat(target=target.shown))
        delay = BACKOFF
        for attempt in range(1, ATTEMPTS + 1):
            try:
                async with asyncio.timeout(self.timeout):
                    await self._deliver(target, q, body, who)
                stat.sent += 1
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                why = f"{type(exc).__name__}: {plain(exc, 200)}" if str(exc) else type(exc).__name__
                if attempt == ATTEMPTS:
                    stat.failed += 1
                    stat.last_error = f"{q.id}: {why}"
                    log.warning("notify: %s failed for %s after %d attempts: %s", target.shown, q.id, ATTEMPTS, why)
                    return
                await asyncio.sleep(delay)
                delay *= 2

    async def _deliver(self, target: NotifyTarget, q: Elicitation, body: Notice, who: Approver | None) -> None:
        title = f"mcpx: {q.server} asks" + (" you" if q.audience == "human" else "")
        if who is not None:
            title = f"mcpx: {q.server} asks {who.person} to approve" + (" (reminder)" if who.why == "reminder" else "")
        message = q.message + (f"\n{body.status}" if isinstance(body, ApproverNotice) else "")
        if body.reach:
            message += f"\n{body.reach}"
        if target.kind == "desktop":
            await self._desktop(title, message)
            return
        assert self._http is not None
        if target.kind == "webhook":
            raw = json.dumps(body.wire()).encode()
            headers = {"Content-Type": "application/json"}
            if (key := target.signing_key()) is not None:
                headers[SIGNATURE] = signature(key, raw)
            request = self._http.post(target.webhook or "", data=raw, headers=headers)
        elif who is not None:
            root, raw = ntfy_json(target.ntfy or "", title, message, who)
            request = self._http.post(root, data=raw, headers={"Content-Type": "application/json"})
        else:
            headers = {"Title": _header(title), "Tags": "question"}
            if body.link:
                headers["Click"] = body.link
                headers["Actions"] = f"view, Answer, {body.link}"
            request = self._http.post(target.ntfy or "", data=message.encode(), headers=headers)
        async with request as resp:
            if resp.status >= 300:
                raise SendFailed(f"HTTP {resp.status}")

    @staticmethod
    async def _desktop(title: str, message: str) -> None:
        if sys.platform == "darwin" and shutil.which("osascript"):
            script = "display notification (item 2 of argv) with title (item 1 of argv)"
            args = ["osascript", "-e", f"on run argv\n{script}\nend run", title, plain(message, 300)]
        elif shutil.which("notify-send"):
            args = ["notify-send", "--app-name=mcpx", "--", title, plain(message, 300)]
        else:
            raise SendFailed("no notify-send (Linux) or osascript (macOS) on PATH")
        proc = await asyncio.create_subprocess_exec(*args, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        try:
            _, err = await proc.communicate()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        if proc.returncode != 0:
            raise SendFailed(f"{args[0]} exited {proc.returncode}: {plain(err.decode(errors='replace'), 200)}")


def ntfy_json(topic_url: str, title: str, message: str, who: Approver) -> tuple[str, bytes]:
    """An approver's ntfy message in ntfy's JSON publish format, with its buttons: POSTed to the server's root with
    the topic in the body (JSON sent to the topic's own URL is shown as text, buttons and all, as a plain message).
    Each button is an http action that answers as this approver, from the lock screen."""
    parts = urlsplit(topic_url)
    topic = parts.path.strip("/")
    root = urlunsplit((parts.scheme, parts.netloc, "/", "", ""))
    actions = [{"action": "http", "label": a.label, "url": a.url, "method": a.method, "body": a.body, "clear": True}
               for a in who.actions()]
    doc = {"topic": topic, "title": title, "message": message, "tags": ["question"], "click": who.link,
           "actions": actions}
    return root, json.dumps(doc).encode()
