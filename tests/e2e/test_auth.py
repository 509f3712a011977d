"""mcpx logs in for the person (MCP authorization, OAuth 2.1; docs/auth.md), against real parts nobody here wrote:
oidc-provider (npm) as the authorization server, with dynamic registration, PKCE, resource indicators, JWT access
tokens and refresh tokens; FastMCP verifying those tokens as the MCP server (tests/oauth_servers.py); the login
typed into the authorization server's own pages in headless Chromium; the tokens kept in a real gnome-keyring
(tests/keychain.py), and looked for afterwards in every file under the state directory and every output.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from test_services import confirm, notes_service, received, shown

from browser import CHROMIUM, chromium, page_of
from conftest import wait_for
from gateway_helpers import call
from gateway_helpers import result as task_result
from harness import PATIENCE, Daemon, free_port, make_daemon
from keychain import Keychain, private_keychain
from oauth_servers import authorization_server, resource_server

ACCESS_TTL = 8  # seconds: short enough that a test sees a token expire and be refreshed, long enough for a call


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    """The authorization server, the MCP server behind its login, the same server with no login, and a REST service
    behind the login (tests/peers/notes_api.py)."""
    rs_port, as_port, open_port, api_port = free_port(), free_port(), free_port(), free_port()
    resource, api = f"http://127.0.0.1:{rs_port}/mcp", f"http://127.0.0.1:{api_port}"
    with authorization_server(as_port, f"{resource},{api}", ACCESS_TTL) as issuer, resource_server(rs_port, issuer), \
            resource_server(open_port, "none") as plain, notes_service(issuer, api_port):
        yield {"issuer": issuer, "notes": resource, "plain": plain, "api": api}


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[Keychain]:
    with private_keychain(tmp_path / "kc") as k:
        yield k


def daemon_for(home: Path, servers: dict[str, str], keys: Keychain) -> Daemon:
    return make_daemon(home, {"servers": {"notes": {"url": servers["notes"]}, "plain": {"url": servers["plain"]}},
                              "elicit": {"askTimeout": 300}}, extra_env=keys.env)


def kept_login(keys: Keychain, servers: dict[str, str], resource: str = "notes") -> dict[str, Any]:
    """The tokens mcpx keeps for the notes server (or `resource`), read from the keychain itself (secret-tool), not
    through mcpx."""
    out = subprocess.run(["secret-tool", "lookup", "service", f"mcpx-oauth:{servers['issuer']}", "username",
                          f"tokens {servers[resource]}"], env={**keys.env, "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=PATIENCE)
    assert out.returncode == 0 and out.stdout, out
    return dict(json.loads(out.stdout))


def written(home: Path, *values: str) -> list[str]:
    return [str(p) for p in home.rglob("*") if p.is_file() and any(v.encode() in p.read_bytes() for v in values)]


def asked(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The question a `mcpx call --json` that exited 75 waits on, and its task."""
    assert done.returncode == 75, done
    waiting = json.loads(done.stdout)["inputRequired"]
    return {**waiting["elicitation"], "task": waiting["task"]}


def result_text(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done
    return str(json.loads(done.stdout)["result"]["content"][0]["text"])


@asynccontextmanager
async def browser_page() -> AsyncIterator[Any]:
    async with chromium() as browser, page_of(browser) as page:
        # nothing beyond this machine (the login page's stylesheet asks for a web font)
        await page.context.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"), lambda route: route.abort())
        yield page


@asynccontextmanager
async def browser_elsewhere(issuer: str) -> AsyncIterator[Any]:
    """A browser that reaches the authorization server and nothing else (a phone, a laptop beside an SSH session):
    whatever is not the issuer goes to a proxy nobody runs, so its way back to the daemon fails."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, timeout=PATIENCE * 1000, args=[
            "--no-sandbox", f"--proxy-server=http://127.0.0.1:{free_port()}",
            f"--proxy-bypass-list=<-loopback>;{issuer.removeprefix('http://')}"])
        try:
            async with page_of(browser) as page:
                yield page
        finally:
            await browser.close()


async def log_in(page: Any, url: str, who: str) -> None:
    """Type a login into the authorization server's own pages, and consent if it asks."""
    await page.goto(url)
    if await page.locator("input[name=login]").count():  # a browser still signed in there goes to consent
        await page.fill("input[name=login]", who)
        await page.fill("input[name=password]", "any password")
        await page.click("button[type=submit]")
        await page.wait_for_load_state()
    if await page.locator("input[name=prompt][value=consent]").count():
        await page.click("button[type=submit]")


@pytest.mark.timeout(300)  # two daemon starts, a browser, a token's lifetime: several minutes on a loaded machine
async def test_a_call_asks_the_person_to_log_in_and_goes_on_kept_across_restarts_and_refreshed(
        home: Path, keys: Keychain, servers: dict[str, str]) -> None:
    d = daemon_for(home, servers, keys)
    d.start()
    outputs: list[str] = []
    try:
        # a server that needs no login is untouched: it answers, and nothing is asked or kept for it
        plain = d.cli("call", "plain.add", "a=2", "b=3", "--json")
        assert result_text(plain) == "5"
        # two calls at once that need the login wait on one question: url mode, from mcpx, for a person
        first, second = d.cli_bg("call", "notes.whoami", "--json"), d.cli_bg("call", "notes.add", "a=1", "b=2",
                                                                               "--json")
        outs = [p.communicate(timeout=PATIENCE) for p in (first, second)]
        runs = [subprocess.CompletedProcess(p.args, p.returncode, o, e) for p, (o, e) in zip((first, second), outs,
                                                                                             strict=True)]
        q1, q2 = asked(runs[0]), asked(runs[1])
        assert q1["id"] == q2["id"] and q1["task"] != q2["task"]
        assert q1["mode"] == "url" and q1["server"] == "mcpx" and q1["tool"] == "notes"
        assert q1["audience"] == "human"
        assert q1["url"].startswith(servers["issuer"] + "/auth?")
        assert "Log in to notes" in q1["message"] and servers["issuer"].removeprefix("http://") in q1["message"]
        assert "notes:read" in q1["message"]
        listed = d.cli("auth", "list", "--json")
        row = {r["server"]: r for r in json.loads(listed.stdout)["logins"]}
        assert row["notes"]["state"] == "asking" and row["notes"]["question"] == q1["id"]
        assert row["plain"]["state"] == "none"

        async with browser_page() as page:
            await log_in(page, q1["url"], "ada")
            await page.wait_for_selector("#title")
            assert (await page.text_content("#title")) == "Logged in to notes"
            # the same return again: its state was taken once, so nothing is done
            replay = await page.goto(page.url)
            assert replay is not None and replay.status == 400
            assert "not the return of a login mcpx has open" in (await page.text_content("#text") or "")

            # a step-up: a tool the server wants a wider scope for (403 insufficient_scope) asks again, for the
            # scope held and the one named, and the call goes on
            wider = asked(d.cli("call", "notes.write_note", "text=hi", "--json"))
            assert wider["id"] != q1["id"] and "notes:read notes:write" in wider["message"]
            assert "wants more scope" in wider["message"]
            await log_in(page, wider["url"], "ada")
            await page.wait_for_selector("#title")
            stepped = d.cli("task", "result", wider["task"], "--json")
            assert result_text(stepped) == "noted 'hi' for ada with notes:read notes:write"

        done = [d.cli("task", "result", q["task"], "--json") for q in (q1, q2)]
        assert result_text(done[0]) == "ada with notes:read"
        assert result_text(done[1]) == "3"
        shown = json.loads(d.cli("elicit", "show", q1["id"], "--json").stdout)
        assert shown["elicitation"]["state"] == "answered" and shown["answer"]["action"] == "accept"
        assert shown["answer"]["by"] == "person:browser"
        listed = d.cli("auth", "list", "--json")
        row = {r["server"]: r for r in json.loads(listed.stdout)["logins"]}
        assert row["notes"]["state"] == "logged-in" and row["notes"]["subject"] == "ada"
        assert row["notes"]["scopes"] == ["notes:read", "notes:write"] and row["notes"]["issuer"] == servers["issuer"]
        said = {line.split()[0]: line for line in d.cli("auth", "list").stdout.splitlines() if line.strip()}
        assert "logged in as ada" in said["notes"] and "expires in" in said["notes"], said  # the token's end, as sent
        kept = kept_login(keys, servers)
        assert kept.get("refresh_token") and kept["access_token"], {k: v for k, v in kept.items() if "token" not in k}
        outputs += [r.stdout + r.stderr for r in (*runs, *done, listed, plain, stepped)]

        # a restart asks nobody and registers nothing: the login and the client are the keychain's
        d.stop()
        d.start()
        again = d.cli("call", "notes.whoami", "--json")
        assert result_text(again) == "ada with notes:read notes:write"
        assert (home / "daemon.log").read_text().count("registered mcpx as client") == 1

        # the access token expires: the next call refreshes it, and asks nothing
        expired_at = kept["expires_at"]
        await wait_for(lambda: time.time() > expired_at + 1, timeout=ACCESS_TTL + PATIENCE, what="the token expired")
        later = d.cli("call", "notes.whoami", "--json")
        assert result_text(later) == "ada with notes:read notes:write"
        refreshed = kept_login(keys, servers)
        assert refreshed["access_token"] != kept["access_token"] and refreshed["expires_at"] > expired_at
        assert json.loads(d.cli("elicit", "list", "--json").stdout)["elicitations"] == []
        status = d.cli("status", "--json")
        tools = d.cli("tools", "--json")
        outputs += [r.stdout + r.stderr for r in (again, later, status, tools, d.cli("audit", "--json"),
                                                    d.cli("elicit", "list", "--all", "--json"))]
        tokens = [t for login in (kept, refreshed) for t in (login["access_token"], login["refresh_token"])]
    finally:
        d.stop()
    # no token is in a file under the state directory (database, its WAL, logs), nor in anything printed
    assert written(home, *tokens) == []
    assert not [o for o in outputs if any(t in o for t in tokens)]


def revoke_at_server(issuer: str, token: str, client_id: str) -> None:
    """The authorization server revokes a refresh token (as a person would from its account page)."""
    import urllib.parse
    import urllib.request

    body = urllib.parse.urlencode({"token": token, "token_type_hint": "refresh_token", "client_id": client_id})
    with urllib.request.urlopen(urllib.request.Request(f"{issuer}/token/revocation", data=body.encode()),
                                timeout=PATIENCE) as resp:
        assert resp.status == 200


def kept_client(keys: Keychain, servers: dict[str, str], callback: str) -> dict[str, Any]:
    out = subprocess.run(["secret-tool", "lookup", "service", f"mcpx-oauth:{servers['issuer']}", "username",
                          f"client {callback}"], env={**keys.env, "PATH": "/usr/bin:/bin"}, capture_output=True,
                         text=True, timeout=PATIENCE)
    assert out.returncode == 0 and out.stdout, out
    return dict(json.loads(out.stdout))


@pytest.mark.timeout(300)
async def test_paste_back_logout_revoked_refresh_declined_and_forged_returns(
        home: Path, keys: Keychain, servers: dict[str, str]) -> None:
    d = daemon_for(home, servers, keys)
    d.start()
    try:
        callback = f"http://127.0.0.1:{(home / 'inbox.port').read_text().strip()}/oauth/callback"
        # the headless case: the browser is elsewhere and cannot reach this daemon; the person pastes the address
        started = d.cli("auth", "login", "notes", "--json")
        assert started.returncode == 0, started
        login = json.loads(started.stdout)
        returned: list[str] = []
        async with browser_elsewhere(servers["issuer"]) as page:
            page.on("requestfailed", lambda request: returned.append(request.url) if request.url.startswith(
                callback) else None)
            with contextlib.suppress(Exception):  # the browser's last step fails: it cannot reach this machine
                await log_in(page, login["url"], "grace")
            await wait_for(lambda: returned, what="the browser sent back to the callback, in vain")
        # a forged return is refused, at the callback and pasted, and leaves the login question open
        forged = returned[0].replace("state=", "state=forged")
        refused = d.cli("auth", "complete", forged)
        assert refused.returncode != 0 and "not the return of a login mcpx has open" in refused.stderr
        async with aiohttp.ClientSession() as http, http.get(forged) as resp:
            assert resp.status == 400
        pending = json.loads(d.cli("elicit", "show", login["question"], "--json").stdout)
        assert pending["elicitation"]["state"] == "pending"
        pasted = d.cli("auth", "complete", returned[0])
        assert pasted.returncode == 0 and "logged in to notes" in pasted.stdout, pasted
        replayed = d.cli("auth", "complete", returned[0])
        assert replayed.returncode != 0 and "used already" in replayed.stderr
        shown = json.loads(d.cli("elicit", "show", login["question"], "--json").stdout)
        assert shown["answer"]["action"] == "accept" and shown["answer"]["by"] == "person:cli"
        # asked before any call, with no challenge to go by: every scope the server lists (RFC 9728)
        assert result_text(d.cli("call", "notes.whoami", "--json")) == "grace with notes:read notes:write"

        # logout revokes at the authorization server: the refresh token no longer refreshes anything
        kept = kept_login(keys, servers)
        out = d.cli("auth", "logout", "notes", "--json")
        assert json.loads(out.stdout) == {"server": "notes", "wasLoggedIn": True, "revoked": True}
        # a listing does not wait for a person: it asks and says where; the next call waits on that question;
        # declined, the call fails saying so
        tools = json.loads(d.cli("tools", "--json").stdout)["servers"]
        assert isinstance(tools["plain"], list) and "needs login: mcpx asked for it in elc-" in tools["notes"]
        again = asked(d.cli("call", "notes.whoami", "--json"))
        assert again["mode"] == "url" and again["id"] != login["question"] and again["id"] in tools["notes"]
        assert d.cli("elicit", "decline", again["id"]).returncode == 0
        failed = d.cli("task", "result", again["task"], "--json")
        assert "login declined" in json.loads(failed.stdout)["error"]

        # a refresh token the server revoked: the server needs login, status and doctor say so, the next call asks
        third = asked(d.cli("call", "notes.whoami", "--json"))
        async with browser_page() as page:
            await log_in(page, third["url"], "grace")
            await page.wait_for_selector("#title")
        assert result_text(d.cli("task", "result", third["task"], "--json")) == "grace with notes:read"
        fresh = kept_login(keys, servers)
        revoke_at_server(servers["issuer"], fresh["refresh_token"], kept_client(keys, servers, callback)["client_id"])
        await wait_for(lambda: time.time() > fresh["expires_at"] + 1, timeout=ACCESS_TTL + PATIENCE,
                       what="the token expired")
        fourth = asked(d.cli("call", "notes.whoami", "--json"))
        assert "could not be refreshed" in fourth["message"]
        status = d.cli("status")
        assert "! login   notes: server 'notes' needs login" in status.stdout, status
        listed = {r["server"]: r for r in json.loads(d.cli("auth", "list", "--json").stdout)["logins"]}
        assert listed["notes"]["state"] == "asking"
        # cancelled: nobody logged in, and the call says so
        assert d.cli("elicit", "cancel", fourth["id"]).returncode == 0
        failed = d.cli("task", "result", fourth["task"], "--json")
        assert "nobody logged in" in json.loads(failed.stdout)["error"]
        doctor = d.cli("doctor")
        assert "needs login" in doctor.stdout and "mcpx auth login notes" in doctor.stdout, doctor
        tokens = [kept["access_token"], kept["refresh_token"], fresh["access_token"], fresh["refresh_token"]]
    finally:
        d.stop()
    assert written(home, *tokens) == []


@pytest.mark.timeout(300)  # a browser, a token's lifetime: minutes on a loaded machine
async def test_a_rest_service_behind_the_login_gets_its_bearer_token_refreshed_and_never_shown(
        home: Path, keys: Keychain, servers: dict[str, str]) -> None:
    api = servers["api"]
    d = make_daemon(home, {"servers": {"api": {"openapi": f"{api}/openapi.json", "methods": "all", "auth": {}}},
                           "elicit": {"askTimeout": 300}}, extra_env=keys.env)
    d.start()
    try:
        async with d.session() as http:
            # a GET with no login held asks for one first, before anything is sent: the service's login, at the
            # authorization server its protected-resource metadata names (RFC 9728)
            status, body, _ = await call(http, "api", "list_notes", {"tag": "a"})
            assert status == 202, body
            q, task = body["elicitation"], body["task"]
            assert (q["mode"], q["server"], q["tool"]) == ("url", "mcpx", "api")
            assert q["url"].startswith(servers["issuer"] + "/auth?") and f"Log in to api ({api}/) at" in q["message"]
            assert [g for g in await received(api) if g["path"].startswith("/notes")] == []
            async with browser_page() as page:
                await log_in(page, q["url"], "ada")
                await page.wait_for_selector("#title")
            done = await task_result(http, task)
            assert done["state"] == "completed" and done["result"]["structuredContent"]["notes"][0]["title"] == \
                "first", done
            kept = kept_login(keys, servers, "api")
            [got] = [g for g in await received(api) if g["path"] == "/notes"]
            assert got["headers"]["authorization"] == f"Bearer {kept['access_token']}" and got["query"] == "tag=a"

            # a write is confirmed with the login's header shown masked, and sent with the token
            q, task = (lambda b: (b["elicitation"], b["task"]))((await call(http, "api", "create_note", {
                "body": {"title": "signed"}}))[1])
            assert shown(q)["headers"]["Authorization"] == "[redacted]" and kept["access_token"] not in json.dumps(q)
            await confirm(http, q)
            assert (await task_result(http, task))["result"]["structuredContent"]["title"] == "signed"
            [posted] = [g for g in await received(api) if g["method"] == "POST"]
            assert posted["headers"]["authorization"] == f"Bearer {kept['access_token']}"

            # the token expires: the next call refreshes it and asks nobody
            await wait_for(lambda: time.time() > kept["expires_at"] + 1, timeout=ACCESS_TTL + PATIENCE,
                           what="the token expired")
            status, body, _ = await call(http, "api", "get_note", {"note_id": 1})
            assert status == 200 and body["result"]["structuredContent"]["title"] == "first", body
            refreshed = kept_login(keys, servers, "api")
            assert refreshed["access_token"] != kept["access_token"]
            assert (await received(api))[-1]["headers"]["authorization"] == f"Bearer {refreshed['access_token']}"
            async with http.get("/v1/elicit") as r:
                assert (await r.json())["elicitations"] == []
            async with http.get(f"/v1/tasks/{task}") as r:
                outputs = [await r.text(), json.dumps(done), json.dumps(body)]

            # mcpx auth lists the service's login and logs it out (revoked); the next call asks again
            listed = d.cli("auth", "list", "--json")
            row = {r["server"]: r for r in json.loads(listed.stdout)["logins"]}["api"]
            assert (row["state"], row["subject"], row["url"], row["scopes"]) == ("logged-in", "ada", f"{api}/",
                                                                                  ["notes:read"])
            out = d.cli("auth", "logout", "api", "--json")
            assert json.loads(out.stdout) == {"server": "api", "wasLoggedIn": True, "revoked": True}, out
            status, body, _ = await call(http, "api", "get_note", {"note_id": 1})
            assert status == 202 and body["elicitation"]["mode"] == "url", body
            outputs += [listed.stdout, out.stdout, json.dumps(body)]
        outputs += [d.cli("audit", "--json").stdout, d.cli("elicit", "list", "--all", "--json").stdout]
        tokens = [t for login in (kept, refreshed) for t in (login["access_token"], login["refresh_token"])]
    finally:
        d.stop()
    assert written(home, *tokens) == []
    assert not [o for o in outputs if any(t in o for t in tokens)]
