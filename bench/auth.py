"""Benchmark of a logged-in call (docs/auth.md): mcpx against the same authenticated call made directly.

Against real parts (tests/oauth_servers.py): oidc-provider as the authorization server, a FastMCP server that
verifies its JWT access tokens, a private gnome-keyring for mcpx's tokens. It measures:

1. the time from the first call to its login question being there for the person: `POST /v1/call/notes/whoami`
   until its 202 names the url-mode question (the 401, discovery, registration and the question's commit are
   all in it). Once: a first call happens once.
2. after a login typed in headless Chromium, a logged-in `whoami` through mcpx's REST `POST /v1/call` against the
   same call by the official SDK client straight to the server with the same bearer token (one connection,
   `Authorization` header), in interleaved rounds: p50/p99 of each and the ratio mcpx/direct at p50. The goal
   is the plain-call goal (docs/bench.md: ≤ 1.3×).

    .venv/bin/python bench/auth.py            # about a minute on 2 cores

A benchmark, not a test: it exits 0 and says MISSED where the goal is not met.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))
sys.path.insert(0, str(BENCH.parent / "tests" / "e2e"))  # the login tests' browser steps
from test_auth import browser_page, kept_login, log_in  # noqa: E402

from broker import fmt_ms, p50, p99, say  # noqa: E402
from harness import free_port, make_daemon  # noqa: E402
from keychain import private_keychain  # noqa: E402
from oauth_servers import authorization_server, resource_server  # noqa: E402

ROUNDS = 200


async def main() -> int:
    rs_port, as_port = free_port(), free_port()
    resource = f"http://127.0.0.1:{rs_port}/mcp"
    with tempfile.TemporaryDirectory(prefix="mcpx-bench-auth-") as tmp, private_keychain(Path(tmp) / "kc") as keys, \
            authorization_server(as_port, resource) as issuer, resource_server(rs_port, issuer):
        home = Path(tmp) / "home"
        home.mkdir()
        d = make_daemon(home, {"servers": {"notes": {"url": resource}}, "elicit": {"askTimeout": 300}},
                        extra_env=keys.env)
        d.start()
        try:
            async with d.session() as http:
                began = time.monotonic()
                async with http.post("/v1/call/notes/whoami", json={"arguments": {}}) as r:
                    body = await r.json()
                asked_in = time.monotonic() - began
                question = body["elicitation"]
                say(f"1. first call to its login question at the doors: {fmt_ms(asked_in * 1000)} "
                    f"(HTTP {r.status}, {question['mode']} mode)")
                async with browser_page() as page:
                    await log_in(page, question["url"], "bench")
                    await page.wait_for_selector("#title")
                token = kept_login(keys, {"issuer": issuer, "notes": resource})["access_token"]

                async def through_mcpx() -> None:
                    async with http.post("/v1/call/notes/whoami", json={"arguments": {}}) as resp:
                        if resp.status != 200:
                            raise RuntimeError(f"through mcpx: {resp.status} {await resp.text()}")

                headers = {"Authorization": f"Bearer {token}"}
                async with httpx2.AsyncClient(headers=headers) as direct_http, \
                        Client(streamable_http_client(resource, http_client=direct_http)) as direct:
                    async def straight() -> None:
                        await direct.call_tool("whoami", {})

                    for _ in range(20):  # warm both up
                        await through_mcpx()
                        await straight()
                    mcpx_t: list[float] = []
                    direct_t: list[float] = []
                    for _ in range(ROUNDS):
                        for fn, into in ((through_mcpx, mcpx_t), (straight, direct_t)):
                            t = time.perf_counter()
                            await fn()
                            into.append((time.perf_counter() - t) * 1000)
            ratio = p50(mcpx_t) / p50(direct_t)
            say(f"2. logged-in call, {ROUNDS} rounds: mcpx p50 {fmt_ms(p50(mcpx_t))} p99 {fmt_ms(p99(mcpx_t))}; "
                f"direct p50 {fmt_ms(p50(direct_t))} p99 {fmt_ms(p99(direct_t))}; mcpx/direct {ratio:.2f}x "
                f"(goal <= 1.3x{'' if ratio <= 1.3 else ': MISSED'})")
        finally:
            d.stop()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
