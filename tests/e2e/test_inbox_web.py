"""The web inbox in a real headless Chromium (Debian's `chromium`, driven by Playwright through executable_path;
nothing here downloads a browser), against the real daemon on its real TCP listener.

Every wait is for something the page shows or the daemon records, bounded; never a sleep.
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import aiohttp
import pytest
from aiohttp import web

from browser import chromium, page_of
from conftest import ask, wait_for
from harness import Daemon, read_log, serving

DOCS = Path(__file__).resolve().parents[1].parent / "docs"

EVERY_KIND = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "description": "as on the <b>badge</b>", "minLength": 2},
        "email": {"type": "string", "format": "email"},
        "when": {"type": "string", "format": "date"},
        "site": {"type": "string", "format": "uri"},
        "copies": {"type": "integer", "minimum": 1, "maximum": 5, "default": 2},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "urgent": {"type": "boolean", "default": False},
        "size": {"type": "string", "enum": ["s", "m", "l"], "enumNames": ["Small", "Medium", "Large"]},
        "region": {"type": "string", "oneOf": [{"const": "eu", "title": "Europe"}, {"const": "us", "title": "America"}],
                   "default": "eu"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue"]}, "default": ["green"]},
        "pets": {"type": "array",
                 "items": {"anyOf": [{"const": "cat", "title": "Cat"}, {"const": "dog", "title": "Dog"}]}},
    },
    "required": ["name", "copies"],
}


def signed_in_url(daemon: Daemon) -> str:
    done = daemon.cli("inbox", "--print")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def link_of(daemon: Daemon, eid: str) -> str:
    done = daemon.cli("elicit", "link", eid, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["url"]


async def answer_of(http: aiohttp.ClientSession, eid: str) -> dict[str, Any]:
    async with http.get(f"/v1/elicit/{eid}") as r:
        return await r.json()


@pytest.mark.shared_daemon
async def test_a_form_answered_in_the_page_is_recorded_as_typed_by_person_web(daemon: Daemon,
                                                                                http: aiohttp.ClientSession) -> None:
    q = await ask(http, message="Ship <script>alert(1)</script> the order?", requestedSchema=EVERY_KIND, ttl="10m")
    async with chromium() as browser, page_of(browser) as page:
        await page.goto(signed_in_url(daemon))
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/inbox", page.url), page.url  # the token left the address bar
        await page.locator(f'tr[data-id="{q["id"]}"]').wait_for()
        await page.click(f'a[href="/inbox/q/{q["id"]}"]')
        await page.locator("#answer").wait_for()
        # the server's words are text, never markup
        assert await page.locator("blockquote.words").inner_text() == q["message"]
        assert await page.locator("blockquote.words script").count() == 0
        # each input is named after its property; defaults are filled in
        assert await page.input_value('input[name="copies"]') == "2"
        assert await page.is_checked('input[name="urgent"][value="false"]')
        assert await page.input_value('select[name="region"]') == "eu"
        assert await page.is_checked('input[name="tags"][value="green"]')
        assert await page.get_attribute('input[name="email"]', "type") == "email"
        if os.environ.get("MCPX_SCREENSHOT"):  # how docs/inbox-form.png is made
            await page.screenshot(path=str(DOCS / "inbox-form.png"), full_page=True)
        await page.fill('input[name="name"]', "Ada <Lovelace>")
        await page.fill('input[name="email"]', "ada@example.org")
        await page.fill('input[name="when"]', "2026-12-24")
        await page.fill('input[name="site"]', "https://example.org/x")
        await page.fill('input[name="copies"]', "3")
        await page.fill('input[name="ratio"]', "0.25")
        await page.check('input[name="urgent"][value="true"]')
        await page.select_option('select[name="size"]', "m")
        await page.select_option('select[name="region"]', "us")
        await page.check('input[name="tags"][value="blue"]')
        await page.uncheck('input[name="tags"][value="green"]')
        await page.check('input[name="pets"][value="dog"]')
        await page.click("#accept")
        await page.locator("#outcome").wait_for()
        assert "accept by person:web" in await page.locator("#outcome").inner_text()
    body = await answer_of(http, q["id"])
    assert body["elicitation"]["state"] == "answered"
    assert body["answer"]["by"] == "person:web"
    assert body["answer"]["content"] == {
        "name": "Ada <Lovelace>", "email": "ada@example.org", "when": "2026-12-24", "site": "https://example.org/x",
        "copies": 3, "ratio": 0.25, "urgent": True, "size": "m", "region": "us", "tags": ["blue"], "pets": ["dog"]}


@pytest.mark.shared_daemon
async def test_decline_with_a_reason_needs_no_form_and_a_bad_field_keeps_it_pending(
        daemon: Daemon, http: aiohttp.ClientSession) -> None:
    q = await ask(http, requestedSchema=EVERY_KIND, ttl="10m")
    async with chromium() as browser, page_of(browser) as page:
        await page.goto(signed_in_url(daemon))
        await page.goto(page.url.replace("/inbox", f"/inbox/q/{q['id']}"))
        await page.fill('input[name="name"]', "A")  # too short
        await page.fill('input[name="copies"]', "9")  # above its maximum
        await page.fill('input[name="email"]', "not an address")
        await page.click("#accept")
        await page.locator(".field.invalid").first.wait_for()
        problems = {await f.get_attribute("data-field"): await f.locator(".problem").inner_text()
                    for f in await page.locator(".field.invalid").all()}
        assert problems == {"name": "must be at least 2 characters", "copies": "must be at most 5",
                            "email": "is not an email address"}
        assert await page.input_value('input[name="copies"]') == "9"  # as typed, to be corrected
        assert (await answer_of(http, q["id"]))["elicitation"]["state"] == "pending"
        # decline: the form is still wrong, and that does not matter
        await page.fill("#reason", "wrong project")
        await page.click("#decline")
        await page.locator("#outcome").wait_for()
    body = await answer_of(http, q["id"])
    assert (body["answer"]["action"], body["answer"]["by"], body["answer"]["reason"]) == (
        "decline", "person:web", "wrong project")


@pytest.mark.shared_daemon
async def test_a_link_opens_one_question_once_and_its_secret_is_never_logged(daemon: Daemon,
                                                                             http: aiohttp.ClientSession) -> None:
    q = await ask(http, ttl="10m")
    other = await ask(http, ttl="10m")
    link = link_of(daemon, q["id"])
    secret = link.split("link=")[1]
    async with chromium() as browser, page_of(browser) as page:
        await page.goto(link)
        await page.fill('input[name="repo"]', "octo/hello")
        await page.click("#accept")
        await page.locator("#outcome").wait_for()
        # the same link again: it shows the answer, and has nothing to answer with
        response = await page.goto(link)
        assert response.status == 410
        assert "accept by person:web" in await page.locator("#outcome").inner_text()
        assert await page.locator("#answer").count() == 0
        # a second answer posted with the link is refused, and the first stands
        again = await page.request.post(link.replace(f"/q/{q['id']}?", f"/q/{q['id']}/decline?"))
        assert again.status == 409 and "already answered" in await again.text()
        # the link opens that question only, and nothing of the rest of the inbox
        assert (await page.goto(link.replace(q["id"], other["id"]))).status == 403
        assert (await page.goto(link.split("/inbox/")[0] + "/inbox")).status == 401
    body = await answer_of(http, q["id"])
    assert (body["answer"]["action"], body["answer"]["by"], body["answer"]["content"]) == (
        "accept", "person:web", {"repo": "octo/hello"})
    assert secret not in read_log(daemon.home)


@pytest.mark.shared_daemon
async def test_unknown_and_expired_links_get_a_clear_page(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    q = await ask(http, ttl="4s")
    async with http.get(f"/v1/elicit/{q['id']}/link") as r:  # at once, over the socket: the CLI may start slowly
        link = (await r.json())["url"]
    await wait_for(lambda: _state(http, q["id"], "expired"), what="expiry")
    async with chromium() as browser, page_of(browser) as page:
        response = await page.goto(link)
        assert response.status == 410
        assert "Expired" in await page.locator("#outcome").inner_text()
        unknown = link.replace(q["id"], "elc-0000000000000000")
        response = await page.goto(unknown)
        assert response.status == 403  # a secret for another question opens nothing
        assert "does not open anything" in await page.locator("#title").inner_text()
        response = await page.goto(signed_in_url(daemon))
        response = await page.goto(unknown.split("?")[0])
        assert response.status == 404 and "No such question" in await page.locator("#title").inner_text()
    refused = daemon.cli("elicit", "link", q["id"])
    assert refused.returncode == 1 and "link is dead" in refused.stderr


async def _state(http: aiohttp.ClientSession, eid: str, state: str) -> bool:
    return (await answer_of(http, eid))["elicitation"]["state"] == state


@pytest.mark.shared_daemon
async def test_a_url_mode_page_shows_the_url_and_opens_it_only_when_asked_to(daemon: Daemon,
                                                                              http: aiohttp.ClientSession) -> None:
    hits: list[str] = []

    async def target(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text="<h1>the server's page</h1>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", target)
    async with serving(app) as port:
        url = f"http://localhost:{port}/authorize?state=abc"
        q = await ask(http, message="Sign in to the tracker", url=url, ttl="10m")
        async with chromium() as browser, page_of(browser) as page:
            await page.goto(signed_in_url(daemon))
            start = page.url.replace("/inbox", f"/inbox/q/{q['id']}")
            await page.goto(start)
            await page.wait_for_load_state("networkidle")
            assert await page.locator("#url").inner_text() == url
            assert await page.locator("#domain").inner_text() == "localhost"
            assert hits == [] and page.url == start  # shown, neither fetched nor opened
            await page.click("#refuse")
            await page.locator("#consent").wait_for()
            async with page.context.expect_page() as opened:
                await page.click("#open")
            new = await opened.value
            await new.wait_for_load_state()
            assert hits[0] == "/authorize" and new.url == url  # (the browser may ask it for a favicon after)
        audit = await (await http.get("/v1/audit", params={"elicit": q["id"], "kinds": "elicit.consent"})).json()
        assert [(r["data"]["consent"], r["data"]["by"]) for r in audit["records"]] == [
            (False, "person:web"), (True, "person:web")]


@pytest.mark.shared_daemon
async def test_a_punycode_domain_is_flagged(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    q = await ask(http, message="Pay here", url="https://xn--pypal-4ve.com/pay", ttl="10m")
    async with chromium() as browser, page_of(browser) as page:
        await page.goto(signed_in_url(daemon))
        await page.goto(page.url.replace("/inbox", f"/inbox/q/{q['id']}"))
        assert await page.locator("#domain").inner_text() == "xn--pypal-4ve.com"
        assert "Punycode" in await page.locator("#url-warning").inner_text()


async def test_the_list_updates_live_and_needs_the_token(daemon: Daemon, http: aiohttp.ClientSession) -> None:
    first = await ask(http, ttl="10m", server="alpha")
    async with chromium() as browser, page_of(browser) as page:
        base = signed_in_url(daemon).split("/inbox/")[0]
        assert (await page.goto(base + "/inbox")).status == 401
        assert (await page.goto(base + "/inbox/login?token=nope")).status == 401
        events = await page.request.get(base + "/v1/events")
        assert events.status == 401
        await page.goto(signed_in_url(daemon))
        await page.locator("#live", has_text="live").wait_for()
        await page.locator(f'tr[data-id="{first["id"]}"]').wait_for()
        second = await ask(http, ttl="10m", server="beta")
        await page.locator(f'tr[data-id="{second["id"]}"]').wait_for()
        assert await page.locator("#badge").inner_text() == "● 2 questions"
        async with http.post(f"/v1/elicit/{first['id']}/cancel", json={}) as r:
            assert r.status == 200
        await page.locator(f'tr[data-id="{first["id"]}"]').wait_for(state="detached")
        await page.goto(base + "/inbox?server=beta")
        assert await page.locator("tr[data-id]").count() == 1


@pytest.mark.shared_daemon
async def test_an_agents_shell_gets_neither_the_inbox_token_nor_a_link(daemon: Daemon,
                                                                       http: aiohttp.ClientSession) -> None:
    q = await ask(http, ttl="10m")
    for args in (("inbox", "--print"), ("elicit", "link", q["id"])):
        refused = daemon.cli(*args, env={"AGENT": "1"})
        assert refused.returncode == 1 and "agent's shell" in refused.stderr, refused.stderr
        assert "token=" not in refused.stdout + refused.stderr and "link=" not in refused.stdout + refused.stderr


@pytest.mark.shared_daemon
async def test_the_texts_that_say_how_to_answer_give_the_questions_page_which_needs_the_sign_in(
        daemon: Daemon, http: aiohttp.ClientSession) -> None:
    q = await ask(http, message="Deploy?", requestedSchema={"type": "object", "properties": {
        "confirm": {"type": "boolean"}}}, ttl="10m")
    async with http.get(f"/v1/elicit/{q['id']}", params={"render": "true"}) as r:
        render = (await r.json())["elicitation"]["render"]
    page = render["page"]
    assert page.endswith(f"/inbox/q/{q['id']}") and page.startswith("http://127.0.0.1:")
    said = f"they answer from a terminal: {render['terminal']}; or in the web inbox: {page}"
    assert said in render["person"]["notify"]
    assert "link=" not in json.dumps(render)  # an agent is shown the page, never the question's link
    async with aiohttp.ClientSession() as anyone, anyone.get(page) as r:
        assert r.status == 401 and "mcpx inbox" in await r.text()


async def question_page(daemon: Daemon, page: Any, eid: str) -> None:
    """Sign the browser in and open question `eid`'s page, its form shown."""
    await page.goto(signed_in_url(daemon))
    await page.goto(page.url.replace("/inbox", f"/inbox/q/{eid}"))
    await page.locator("#answer").wait_for()


async def following(daemon: Daemon, page: Any, eid: str) -> None:
    """Open question `eid`'s page signed in, and wait until it follows the daemon's event stream."""
    await question_page(daemon, page, eid)
    await page.locator("#live", has_text="live").wait_for()


@pytest.mark.shared_daemon
async def test_a_questions_page_open_while_it_is_answered_elsewhere_says_so_and_takes_nothing_more(
        daemon: Daemon, http: aiohttp.ClientSession) -> None:
    q = await ask(http, ttl="10m")
    async with chromium() as browser, page_of(browser) as page:
        await following(daemon, page, q["id"])
        await page.fill('input[name="repo"]', "typed here, never sent")
        done = daemon.cli("elicit", "answer", q["id"], "repo=octo/elsewhere")
        assert done.returncode == 0, done.stderr
        # the page hears of it from the event stream: the form gives way to what became of the question
        outcome = page.locator("#outcome", has_text="Answered elsewhere: accept by person:cli")
        await outcome.wait_for()
        assert "Nothing entered on this page was sent." in await outcome.inner_text()
        assert await page.locator("#answer").count() == 0
        assert await page.locator("main button, main input, main select").count() == 0  # nothing left to submit
        # the countdown and the deadline stop: the head says what the question is now
        assert await page.locator("#state").inner_text() == "answered"
        assert await page.locator("[data-left]").count() == 0 and await page.locator("#deadline").count() == 0
    body = await answer_of(http, q["id"])
    assert (body["answer"]["by"], body["answer"]["content"]) == ("person:cli", {"repo": "octo/elsewhere"})


@pytest.mark.shared_daemon
async def test_a_questions_page_open_as_it_expires_says_what_the_server_was_told(
        daemon: Daemon, http: aiohttp.ClientSession) -> None:
    async with chromium() as browser, page_of(browser) as page:
        await page.goto(signed_in_url(daemon))  # signed in first: the question's few seconds are for the page
        q = await ask(http, ttl="4s")
        await following(daemon, page, q["id"])
        await page.locator("#outcome", has_text="Expired — mcpx was told cancel").wait_for()
        assert await page.locator("#answer").count() == 0
        assert await page.locator("#state").inner_text() == "expired"
    assert (await answer_of(http, q["id"]))["answer"]["by"] == "expiry"


CREDENTIAL = {
    "type": "object",
    "properties": {
        "api_key": {"type": "string", "title": "API key", "description": "from the <b>Settings</b> page"},
        "name": {"type": "string", "title": "Your name", "description": "as on the badge", "minLength": 2,
                 "maxLength": 40},
        "copies": {"type": "integer", "minimum": 1, "maximum": 5},
        "email": {"type": "string", "format": "email"},
    },
    "required": ["api_key", "name"],
}


@pytest.mark.shared_daemon
async def test_a_questions_page_says_why_it_is_yours_until_when_and_which_field_is_a_credential(
        daemon: Daemon, http: aiohttp.ClientSession) -> None:
    q = await ask(http, message="Connect the tracker", requestedSchema=CREDENTIAL, ttl="10m")
    assert q["audience"] == "human" and "credential" in q["reason"]
    viewer = "Asia/Kathmandu"  # +05:45: no whole-hour zone's clock reads the same minutes
    async with chromium() as browser, page_of(browser, locale="en-GB", timezone_id=viewer) as page:
        await question_page(daemon, page, q["id"])
        # why: routing's reason, in the words the dialogs use
        assert await page.locator("#why").inner_text() == f"It is yours to answer: {q['reason']}."
        # until when: on the viewer's clock, from the deadline the page carries
        deadline = datetime.fromisoformat(q["expiresAt"])
        time = page.locator("#deadline")
        carried = datetime.fromisoformat(await time.get_attribute("datetime"))
        assert abs((carried - deadline).total_seconds()) < 0.001  # to the millisecond, as mcpx writes times
        shown = await time.inner_text()
        assert shown.startswith("until ") and shown.endswith(deadline.astimezone(ZoneInfo(viewer)).strftime("%H:%M"))
        # the credential field says where its value goes, and no other field does
        key = page.locator('.field[data-field="api_key"]')
        note = await key.locator(".credential").inner_text()
        assert note == "A credential: it goes to the asker (mcpx) only; mcpx stores it as [redacted]."
        assert await page.locator(".credential").count() == 1
        assert await page.get_attribute('input[name="api_key"]', "type") == "password"
        assert (await key.locator(".credential").get_attribute("id")) in (
            await page.get_attribute('input[name="api_key"]', "aria-describedby")).split()
        # under each field its description and limits in words, never the schema's own terms
        hints = {f: [await h.inner_text() for h in await page.locator(f'.field[data-field="{f}"] .hint').all()]
                 for f in CREDENTIAL["properties"]}
        assert hints == {"api_key": ["from the <b>Settings</b> page"],
                         "name": ["as on the badge", "2 to 40 characters"], "copies": ["1 to 5"], "email": []}
        assert await page.locator("#answer b").count() == 0
        form = (await page.locator("#answer").inner_text()).lower()
        assert not [w for w in ("string", "integer", "format", "length", "required", "type") if w in form], form
        # what the note says is so: the value reaches the store only as [redacted]
        await page.fill('input[name="api_key"]', "sk-test-0123456789abcdef")
        await page.fill('input[name="name"]', "Ada")
        await page.click("#accept")
        await page.locator("#outcome").wait_for()
        assert "sk-test" not in await page.content()
    body = await answer_of(http, q["id"])
    assert body["answer"]["content"] == {"api_key": "[redacted]", "name": "Ada"}
