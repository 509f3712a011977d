"""mcpx logs in for the person (MCP authorization, OAuth 2.1; docs/auth.md), against real parts nobody here wrote:
oidc-provider (npm) as the authorization server, with dynamic registration, PKCE, resource indicators, JWT access
tokens and refresh tokens; FastMCP verifying those tokens as the MCP server (tests/oauth_servers.py); the login
typed into the authorization server's own pages in headless Chromium; the tokens kept in a real gnome-keyring
(tests/keychain.py), and looked for afterwards in every file under the state directory and every output.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from conftest import wait_for
from harness import PATIENCE, Daemon, free_port, make_daemon
from keychain import Keychain, private_keychain
from oauth_servers import authorization_server, resource_server
from test_inbox_web import chromium, page_of

ACCESS_TTL = 8  # seconds: short enough that a test sees a token expire and be refreshed, long enough for a call


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    """The authorization server, the MCP server behind its login, and the same server with no login."""
    rs_port, as_port, open_port = free_port(), free_port(), free_port()
    resource = f"http://127.0.0.1:{rs_port}/mcp"
    with authorization_server(as_port, resource, ACCESS_TTL) as issuer, resource_server(rs_port, issuer), \
            resource_server(open_port, "none") as plain:
        yield {"issuer": issuer, "notes": resource, "plain": plain}


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[Keychain]:
    with private_keychain(tmp_path / "kc") as k:
        yield k


def daemon_for(home: Path, servers: dict[str, str], keys: Keychain) -> Daemon:
    return make_daemon(home, {"servers": {"notes": {"url": servers["notes"]}, "plain": {"url": servers["plain"]}},
                              "elicit": {"askTimeout": 300}}, extra_env=keys.env)


def kept_login(keys: Keychain, servers: dict[str, str]) -> dict[str, Any]:
    """The tokens mcpx keeps for the notes server, read from the keychain itself (secret-tool), not through mcpx."""
    out = subprocess.run(["secret-tool", "lookup", "service", f"mcpx-oauth:{servers['issuer']}", "username",
                          f"tokens {servers['notes']}"], env={**keys.env, "PATH": "/usr/bin:/bin"},
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


async def log_in(page: Any, url: str, who: str) -> None:
    """Type a login into the authorization server's own pages, and consent if it asks."""
    await page.goto(url)
    await page.fill("input[name=login]", who)
    await page.fill("input[name=password]", "any password")
    await page.click("button[type=submit]")
    await page.wait_for_load_state()
    if await page.locator("input[name=prompt][value=consent]").count():
        await page.click("button[type=submit]")


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

        done = [d.cli("task", "result", q["task"], "--json") for q in (q1, q2)]
        assert result_text(done[0]) == "ada with notes:read"
        assert result_text(done[1]) == "3"
        shown = json.loads(d.cli("elicit", "show", q1["id"], "--json").stdout)
        assert shown["elicitation"]["state"] == "answered" and shown["answer"]["action"] == "accept"
        assert shown["answer"]["by"] == "person:browser"
        listed = d.cli("auth", "list", "--json")
        row = {r["server"]: r for r in json.loads(listed.stdout)["logins"]}
        assert row["notes"]["state"] == "logged-in" and row["notes"]["subject"] == "ada"
        assert "notes:read" in row["notes"]["scopes"] and row["notes"]["issuer"] == servers["issuer"]
        kept = kept_login(keys, servers)
        assert kept.get("refresh_token") and kept["access_token"], {k: v for k, v in kept.items() if "token" not in k}
        outputs += [r.stdout + r.stderr for r in (*runs, *done, listed, plain)]

        # a restart asks nobody and registers nothing: the login and the client are the keychain's
        d.stop()
        d.start()
        again = d.cli("call", "notes.whoami", "--json")
        assert result_text(again) == "ada with notes:read"
        assert (home / "daemon.log").read_text().count("registered mcpx as client") == 1

        # the access token expires: the next call refreshes it, and asks nothing
        expired_at = kept["expires_at"]
        await wait_for(lambda: time.time() > expired_at + 1, timeout=ACCESS_TTL + PATIENCE, what="the token expired")
        later = d.cli("call", "notes.whoami", "--json")
        assert result_text(later) == "ada with notes:read"
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
