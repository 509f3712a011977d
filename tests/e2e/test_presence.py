"""Answers only the person can give (issue 41, docs/presence.md): passkeys enrolled and asserted in a real headless
Chromium (Debian's, driven by Playwright through executable_path) with the DevTools protocol's virtual
authenticator, against the real daemon; py_webauthn checks every registration and assertion in the daemon.

Every wait is for something the page shows or the daemon records, bounded; every browser and daemon is stopped
however the test ends.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from mcp_types import ElicitResult
from test_surface import http_client, text

from browser import chromium, copy_passkeys, create_passkey, person_page, sign_on_page, vouch_on_page
from conftest import ask, wait_for
from gateway_helpers import answer, call, result, stdio, until_pending
from harness import PATIENCE, Daemon, free_port, make_daemon

BRANCH = {"type": "object", "properties": {"branch": {"type": "string"}}, "required": ["branch"]}
YES = {"type": "object", "properties": {}}


def cli_json(daemon: Daemon, *args: str) -> Any:
    done = daemon.cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def passkeys(http: aiohttp.ClientSession) -> list[dict[str, Any]]:
    async with http.get("/v1/people/passkeys") as r:
        return list((await r.json())["passkeys"])


async def link(http: aiohttp.ClientSession, eid: str, person: str | None = None) -> str:
    async with http.get(f"/v1/elicit/{eid}/link", params={"as": person} if person else {}) as r:
        return str((await r.json())["url"])


async def enrol(daemon: Daemon, http: aiohttp.ClientSession, page: Any, person: str, cli: bool = False) -> str:
    """`person` creates a passkey through their enrolment link (`cli`: as `mcpx person enroll` prints it); its
    credential id."""
    if cli:
        link = cli_json(daemon, "person", "enroll", person)
        url = link["url"]
        assert f"{person} has no passkey: this one is trusted on first use" in link["terms"], link
    else:
        async with http.post(f"/v1/people/{person}/enroll") as r:
            url = (await r.json())["url"]
    said = await create_passkey(page, url, person)
    assert f"{person}'s passkey is enrolled" in said, said
    again = await page.goto(url)  # single use
    assert again is not None and again.status == 410
    keys = [k for k in await passkeys(http) if k["person"] == person]
    assert "lastUsed" not in keys[-1]
    return str(keys[-1]["id"])


async def captured_assertion(page: Any, url: str, fill: dict[str, str]) -> dict[str, Any]:
    """What the page would post to accept the question at `url` with this page's passkey, held back unsent."""
    held: list[dict[str, Any]] = []

    async def hold(route: Any) -> None:
        held.append(json.loads(route.request.post_data))
        await route.fulfill(status=599, content_type="application/json", body='{"message": "held by the test"}')

    await page.route("**/inbox/passkey/*/accept*", hold)
    try:
        assert "held by the test" in await sign_on_page(page, url, fill)
    finally:
        await page.unroute("**/inbox/passkey/*/accept*")
    return held[0]


async def post_from(page: Any, path: str, body: dict[str, Any]) -> tuple[int, str]:
    """`body` posted from the page (same origin) to `path`: the status and the daemon's message."""
    got = await page.evaluate("""async ([path, body]) => {
        const r = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json"},
                                     body: JSON.stringify(body)});
        return [r.status, (await r.json()).message];
    }""", [path, body])
    return int(got[0]), str(got[1])


def accept_path(link: str) -> str:
    """The passkey accept of a question's link, as its page posts it."""
    m = re.fullmatch(r"http://localhost:\d+/inbox/q/(elc-[0-9a-f]+)\?(link=.+)", link)
    assert m, link
    return f"/inbox/passkey/{m[1]}/accept?{m[2]}"


async def state_of(http: aiohttp.ClientSession, eid: str) -> dict[str, Any]:
    async with http.get(f"/v1/elicit/{eid}") as r:
        return dict(await r.json())


async def test_a_person_enrols_and_only_their_fresh_assertion_of_exactly_this_question_accepts_it(
        daemon: Daemon, http: aiohttp.ClientSession) -> None:
    asker: subprocess.Popen[str] | None = None
    try:
        async with chromium() as browser, person_page(browser) as ada:
            cid = await enrol(daemon, http, ada, "ada", cli=True)
            # `mcpx elicit ask --presence` waits; the CLI's accept is refused, exit 1, naming the page
            asker = daemon.cli_bg("elicit", "ask", "--message", "Delete branch main?", "--presence", "--ttl", "10m")
            async def asked() -> list[dict[str, Any]]:
                async with http.get("/v1/elicit") as r:
                    return [q for q in (await r.json())["elicitations"] if q["message"] == "Delete branch main?"]

            [q] = await wait_for(asked, what="the question mcpx elicit ask opens")
            assert q["presence"] is True
            refused = daemon.cli("elicit", "answer", q["id"])
            assert refused.returncode == 1, refused.stderr
            page = re.search(r"http://localhost:\d+/inbox/q/\S+", refused.stderr)
            assert page and "passkey" in refused.stderr and q["id"] in page[0], refused.stderr
            async with http.post(f"/v1/elicit/{q['id']}/accept", json={}) as r:  # the REST door: the same refusal
                body = await r.json()
                assert r.status == 403 and body["error"]["code"] == "presence_required", body
            # every door shows it, saying that accepting it needs the person's passkey and where: the rendering
            # every client shows (the agent's texts, the toast, a terminal's line) and `mcpx elicit show`
            async with http.get(f"/v1/elicit/{q['id']}", params={"render": "true"}) as r:
                render = (await r.json())["elicitation"]["render"]
            for text in (render["line"], render["toast"]["message"], render["person"]["notify"]):
                assert "Accepting it needs the person's passkey, on its page, http://" in text, text
            shown = daemon.cli("elicit", "show", q["id"])
            assert f"needs the person's passkey, on its page (mcpx elicit link {q['id']}" in shown.stdout, shown.stdout
            # a question without presence is unchanged: the CLI accepts it
            plain = await ask(http, message="Rename it?", ttl="10m")
            done = daemon.cli("elicit", "answer", plain["id"], "repo=x")
            assert done.returncode == 0, done.stderr
            # the inbox signed in (on 127.0.0.1, where no passkey signs) sends the person to its page by name
            async with http.get("/v1/inbox") as r:
                await ada.goto((await r.json())["url"])
            await ada.goto(ada.url.replace("/inbox", f"/inbox/q/{q['id']}"))
            assert await ada.locator("#passkey-page a").get_attribute("href") == page[0]
            # on its page, ada's passkey accepts it, as ada, recording which passkey signed
            said = await sign_on_page(ada, page[0])
            assert "accept by person:ada, verified by passkey" in said, said
            assert asker.wait(timeout=PATIENCE) == 0
            answered = await state_of(http, q["id"])
            assert (answered["answer"]["by"], answered["answer"]["passkeys"]) == ("person:ada", [cid])
            trail = daemon.cli("audit", "--elicit", q["id"])
            assert f"verified by passkey ({cid})" in trail.stdout, trail.stdout
            [listed] = cli_json(daemon, "person", "list")["passkeys"]
            assert (listed["id"], listed["person"]) == (cid, "ada") and listed["lastUsed"]

            # an assertion made for A, sent for B; the same one with other content; then replayed
            a = await ask(http, message="Force-push to which branch?", requestedSchema=BRANCH, ttl="10m",
                          presence=True)
            b = await ask(http, message="Force-push to which branch?", requestedSchema=BRANCH, ttl="10m",
                          presence=True)
            link_a, link_b = await link(http, a["id"]), await link(http, b["id"])
            held = await captured_assertion(ada, link_a, {"branch": "dev"})
            assert held["content"] == {"branch": "dev"}
            status, why = await post_from(ada, accept_path(link_b), held)
            assert status == 403 and f"made for another question ({a['id']})" in why, why
            status, why = await post_from(ada, accept_path(link_a), {**held, "content": {"branch": "main"}})
            assert status == 403 and "did not sign accepting exactly this question" in why, why
            assert (await state_of(http, a["id"]))["elicitation"]["state"] == "pending"
            status, why = await post_from(ada, accept_path(link_a), held)  # its challenge was spent by that try
            assert status == 403 and "used before" in why, why
            said = await sign_on_page(ada, link_a, {"branch": "dev"})
            assert "verified by passkey" in said, said
            assert (await state_of(http, a["id"]))["answer"]["content"] == {"branch": "dev"}
            assert (await state_of(http, b["id"]))["elicitation"]["state"] == "pending"

            # a revoked passkey signs nothing
            done = daemon.cli("person", "revoke", "ada", "--", cid)
            assert done.returncode == 0, done.stderr
            assert await passkeys(http) == []
            said = await sign_on_page(ada, link_b, {"branch": "dev"})
            assert "not enrolled here" in said, said
            assert (await state_of(http, b["id"]))["elicitation"]["state"] == "pending"
            # declining needs no passkey, from any door of the person's
            done = daemon.cli("elicit", "decline", b["id"])
            assert done.returncode == 0, done.stderr
            assert (await state_of(http, b["id"]))["answer"]["action"] == "decline"
    finally:
        if asker is not None and asker.poll() is None:
            asker.kill()
            asker.wait()


@pytest.mark.stores  # the passkeys table and its sign counts on either store (PostgreSQL: schema version 2)
async def test_approvers_and_a_services_confirmation_each_sign_with_their_own_passkey_and_the_askers_is_refused(
        home: Path) -> None:
    people = {name: {} for name in ("alice", "bob", "carol", "erin")}
    rule = {"id": "prod", "match": {"server": "mcpx", "message": "^Deploy"}, "approvers": ["alice", "bob", "carol"],
            "need": 2, "presence": True}
    # a service whose entry says confirmPresence: mcpx's own confirmation of its command needs a passkey
    shell = {"commands": {"touch": {"argv": ["touch", "{path}"]}}, "confirmPresence": True}
    config = {"servers": {"shell": shell}, "people": people, "elicit": {"approvals": [rule]}}
    with make_daemon(home, config, extra_env={"MCPX_PERSON": "bob"}) as d:  # bob runs the daemon
        async with d.session() as http, chromium() as browser, person_page(browser) as alice, \
                person_page(browser) as bob, person_page(browser) as erin:
            keys = {"alice": await enrol(d, http, alice, "alice"), "bob": await enrol(d, http, bob, "bob")}
            await enrol(d, http, erin, "erin")
            q = await ask(http, message="Deploy v2 to production?", requestedSchema=YES, ttl="10m", **{"from": "erin"})
            assert q["presence"] is True and q["approvals"]["waiting"] == ["alice", "bob", "carol"]
            shared = await link(http, q["id"])
            # the asker's own passkey: refused, and recorded as refused
            said = await sign_on_page(erin, shared)
            assert "nobody approves their own request" in said, said
            # an approver's own link without a passkey: not counted (a person's link is no longer enough)
            async with aiohttp.ClientSession() as anyone:
                alice_link = await link(http, q["id"], "alice")
                async with anyone.post(alice_link.replace("/inbox/q/" + q["id"], f"/inbox/q/{q['id']}/accept"),
                                       data={}) as r:
                    assert r.status == 403 and "passkey" in await r.text()
            # alice on her own link, bob on the question's: each counts as the passkey's person
            said = await sign_on_page(alice, alice_link)
            assert "1 of 2 approved (alice)" in said, said
            said = await sign_on_page(bob, shared)
            assert "accept by person:alice,bob, verified by passkey" in said, said
            answered = await state_of(http, q["id"])
            assert answered["answer"]["approvers"] == ["alice", "bob"]
            assert answered["answer"]["passkeys"] == [keys["alice"], keys["bob"]]
            assert answered["elicitation"]["approvals"]["refused"] == ["erin"]
            trail = d.cli("audit", "--elicit", q["id"]).stdout
            assert trail.count("verified by passkey") >= 3, trail  # erin's refused try, alice's and bob's votes

            # the confirmation of the command: refused without a passkey at the REST door, naming its page; signed
            # on that page, bound to the exact request (confirms.request, in what the passkey signs), it runs
            touched = home / "touched"
            status, body, _ = await call(http, "shell", "touch", {"path": str(touched)})
            [c] = await until_pending(http)
            assert c["presence"] is True and c["confirms"]["server"] == "shell" and c["confirms"]["method"] == "RUN"
            exact = {"confirm": True, "digest": c["confirms"]["request"]}
            status, refused = await answer(http, c["id"], "accept", exact)
            assert status == 403 and refused["error"]["code"] == "presence_required", refused
            assert not touched.exists()
            said = await sign_on_page(bob, await link(http, c["id"]), yes="confirm")
            assert "accept by person:bob, verified by passkey" in said, said
            done = await result(http, body["task"])
            assert done["state"] == "completed" and touched.exists(), done
            confirmed = await state_of(http, c["id"])
            assert confirmed["answer"]["passkeys"] == [keys["bob"]]

            # alice adds a phone: her first passkey was trusted on first use; a second is enrolled only once a
            # passkey of hers (or of bob's, who runs the daemon) signs exactly it, on the enrolment page
            async with http.post("/v1/people/alice/enroll") as r:
                second = await r.json()
            assert "alice has had a passkey" in second["terms"] and "a passkey of alice or bob" in second["terms"]
            async with person_page(browser) as phone:
                async with phone.expect_response(lambda r: r.url == second["url"] and r.request.method == "POST"
                                                 ) as created:
                    said = await create_passkey(phone, second["url"], "alice")
                assert "is not enrolled yet" in said, said
                # erin's passkey, over exactly that challenge, sent from her own page: not hers to vouch for
                vouch = {**(await (await created.value).json())["vouch"], "allowCredentials": []}
                await erin.goto(second["url"])
                status, why = await post_from(erin, second["url"] + "/vouch", {"credential": await erin.evaluate(
                    """async (options) => (await navigator.credentials.get({
                        publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options)})).toJSON()""", vouch)})
                assert status == 403 and "a passkey of erin cannot vouch for alice's" in why, why
                assert [k["id"] for k in await passkeys(http) if k["person"] == "alice"] == [keys["alice"]]
                # bob, beside her, signs with his passkey (a security key, say, brought to her phone); hers would
                # do as well, but a virtual authenticator holds one passkey per person
                await copy_passkeys(bob, phone)
                said = await vouch_on_page(phone)
                assert "vouched for by bob's passkey" in said, said
            phone_key = [k["id"] for k in await passkeys(http) if k["person"] == "alice" and k["id"] != keys["alice"]]
            assert len(phone_key) == 1
            enrolments = d.cli("audit", "--kinds", "person.enrolled").stdout
            assert f"alice's passkey {keys['alice']}: trusted on first use (link asked for by person:rest)" \
                in enrolments, enrolments
            assert (f"alice's passkey {phone_key[0]}: vouched for by bob's passkey {keys['bob']} (link asked "
                    "for by person:rest)") in enrolments, enrolments
            assert "verified by passkey" not in enrolments, "an enrolment is signed by no passkey of its own"
            # revoking every passkey of hers is no way back to trust on first use: bob's must vouch now
            for key in (keys["alice"], phone_key[0]):
                # `--`: a base64url id may begin with '-' (one in 64 did, and argparse took it for an option)
                assert d.cli("person", "revoke", "alice", "--", key).returncode == 0
            async with http.post("/v1/people/alice/enroll") as r:
                third = await r.json()
            assert "alice has had a passkey" in third["terms"] and "a passkey of bob signs it" in third["terms"], third


async def test_an_mcp_clients_accept_of_a_question_that_needs_presence_is_refused_and_its_decline_taken(
        home: Path) -> None:
    # the MCP client is one more door: its person's dialog is asked again, saying that accepting needs the passkey
    config = {"servers": {"sdk": stdio("sdk_server.py")},
              "elicit": {"presence": [{"match": {"server": "sdk", "tool": "need_repo"}}]}}
    seen: list[str] = []

    async def callback(_ctx: Any, params: Any) -> ElicitResult:
        seen.append(params.message)
        return ElicitResult(action="accept", content={"repo": "a/b"}) if len(seen) == 1 else ElicitResult(
            action="decline")

    with make_daemon(home, config, listen=f"127.0.0.1:{free_port()}") as d:
        async with http_client(d, "legacy", callback) as client:
            result = await client.call_tool("sdk_need_repo", {})
        assert json.loads(text(result))["action"] == "decline"
        assert len(seen) == 2 and "accepted only with the person's passkey" in seen[1], seen
        assert "Accepting it needs the person's passkey, on its page (mcpx elicit link elc-" in seen[0], seen
        async with d.session() as rest, rest.get("/v1/audit", params={"kinds": "elicit.answered"}) as r:
            [record] = (await r.json())["records"]
        assert (record["data"]["action"], record["data"]["by"]) == ("decline", "person:mcp-client")
        # its field is free text, which routing alone would put to the agent first: the agent can only decline
        # what the person's passkey alone accepts, so the question is the person's from the start
        async with d.session() as rest, rest.get(f"/v1/elicit/{record['elicit']}") as r:
            q = (await r.json())["elicitation"]
        assert q["audience"] == "human" and "only the person's passkey accepts it" in q["reason"], q
