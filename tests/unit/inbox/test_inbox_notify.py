"""Notifications (elicit.notify) to real local receivers: a webhook and an ntfy-compatible server, in aiohttp here,
beside a target that is down and one that never answers — against the real daemon.

Every wait is for a receiver's event or a state seen through the API, bounded; never a sleep.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from conftest import ask, wait_for
from harness import PATIENCE, free_port, make_daemon, read_log, receiving
from mcpx.presentation.urlfacts import LOOPBACK_NOTE


class Receiver:
    """A local HTTP server that keeps what it is sent, and can be told to hang."""

    def __init__(self, hang: bool = False) -> None:
        self.got: list[tuple[dict[str, str], bytes]] = []
        self.arrived = asyncio.Event()
        self.hang = hang
        self.release = asyncio.Event()
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.got.append((dict(request.headers), await request.read()))
        self.arrived.set()
        if self.hang:
            await self.release.wait()
        return web.Response(text="ok")

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[Receiver]:
        async with receiving(self.handle) as base:
            self.url = f"{base}/hook/secret-topic-123"
            try:
                yield self
            finally:
                self.release.set()  # a hanging handler lets go, so the server can stop


async def test_a_question_reaches_a_webhook_and_ntfy_while_a_down_and_a_slow_target_fail_alone(home: Path) -> None:
    hook, ntfy, slow, other = Receiver(), Receiver(), Receiver(hang=True), Receiver()
    down = f"http://127.0.0.1:{free_port()}/nobody-listens"
    async with hook.serving(), ntfy.serving(), slow.serving(), other.serving():
        config = {"servers": {}, "elicit": {"notify": [
            {"webhook": slow.url}, {"webhook": down}, {"webhook": hook.url, "audience": "agent-then-human"},
            {"ntfy": ntfy.url}, {"webhook": other.url, "server": "elsewhere"}]}}
        with make_daemon(home, config) as d:
            async with d.session() as http:
                q = await ask(http, message="Which repository?\nThe ⏎ second line", ttl="10m")
                async with asyncio.timeout(PATIENCE):
                    await hook.arrived.wait()
                    await ntfy.arrived.wait()
                    await slow.arrived.wait()
                headers, raw = hook.got[0]
                body = json.loads(raw)
                assert {k: body[k] for k in ("event", "id", "server", "message", "audience", "deadline")} == {
                    "event": "elicit.open", "id": q["id"], "server": "mcpx", "message": q["message"],
                    "audience": "agent-then-human", "deadline": q["expiresAt"]}
                assert headers["Content-Type"].startswith("application/json")
                link = body["link"]
                async with aiohttp.ClientSession() as browser, browser.get(link) as page:
                    assert page.status == 200 and q["id"] in await page.text()  # the link opens that question
                nheaders, nraw = ntfy.got[0]
                # the daemon is on loopback: the notification says its link opens on this machine only, and why
                assert nraw.decode() == q["message"] + "\n" + LOOPBACK_NOTE and body["reach"] == LOOPBACK_NOTE
                assert nheaders["Click"] == link and nheaders["Title"] == "mcpx: mcpx asks"

                def shown(url: str) -> str:  # a target as status shows it: no path, where its secret may be
                    return f"webhook http://127.0.0.1:{port_of(url)}/…"

                async def counted() -> dict[str, Any] | None:
                    async with http.get("/v1/health") as r:
                        stats = {s["target"]: s for s in (await r.json())["notify"]}
                    return stats if stats[shown(down)]["failed"] == 1 else None
                stats = await wait_for(counted, what="the down target's failure, after its retries")
                assert stats[shown(hook.url)]["sent"] == 1 and stats[shown(other.url)]["sent"] == 0
                assert other.got == []  # another server's questions only
                # a question is answered as usual while the slow target still holds its request
                async with http.post(f"/v1/elicit/{q['id']}/accept", json={"content": {"repo": "o/r"}}) as r:
                    assert r.status == 200
            status = d.cli("status")
            assert "1 failed" in status.stdout and "secret-topic" not in status.stdout
            log = read_log(home)
            assert "failed for " + q["id"] in log
            assert "secret-topic" not in log and link.split("link=")[1] not in log


def port_of(url: str) -> int:
    return int(url.split("://")[1].split("/")[0].rsplit(":", 1)[1])


async def test_a_question_escalated_to_the_person_is_news_for_a_human_target(home: Path) -> None:
    hook = Receiver()
    async with hook.serving():
        notify = [{"webhook": hook.url, "audience": "human"}]
        with make_daemon(home, {"servers": {}, "elicit": {"notify": notify}}) as d:
            async with d.session() as http:
                q = await ask(http, ttl="10m")  # free text: the agent's first
                async with http.post(f"/v1/elicit/{q['id']}/decline", json={"reason": "no idea"},
                                     headers={"X-Mcpx-Answerer": "agent:mcp"}) as r:
                    assert r.status == 200 and (await r.json())["escalated"]
                async with asyncio.timeout(PATIENCE):
                    await hook.arrived.wait()
                body = json.loads(hook.got[0][1])
                assert (body["event"], body["id"], body["audience"]) == ("elicit.escalated", q["id"], "human")
                assert len(hook.got) == 1  # its opening (for the agent) was no news for this target


def test_a_notify_target_is_one_kind_with_an_http_url(home: Path) -> None:
    d = make_daemon(home, {"servers": {}, "elicit": {"notify": [{"webhook": "ftp://x", "desktop": True}]}})
    done = d.cli("config", "check")
    assert done.returncode != 0 and "notify" in done.stdout + done.stderr
