"""A server's secrets: asked on first use, kept in a real Secret Service, given to its process, written nowhere else.

A real daemon, a real SDK server that reports a digest of a variable it was given, and gnome-keyring on a private
D-Bus session bus (tests/keychain.py); the keychain is read back with secret-tool, and every file under the
daemon's state directory (its database, log, stderr) is searched for the value.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_surface import accepting, stdio_client, text

from conftest import wait_for
from gateway_helpers import answer, stdio
from harness import Daemon, make_daemon
from keychain import Keychain, private_keychain


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[Keychain]:
    with private_keychain(tmp_path / "kc") as k:
        yield k


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def needing_secret(home: Path, env: dict[str, str], **entry: object) -> Daemon:
    return make_daemon(home, {"servers": {"env": stdio("env_server.py", secrets=["API_TOKEN"], **entry)}},
                       extra_env=env)


def written(home: Path, value: str) -> list[str]:
    """Every file under the state directory that holds `value` (the database and its WAL, logs, config)."""
    return [str(p) for p in home.rglob("*") if p.is_file() and value.encode() in p.read_bytes()]


def test_a_missing_secret_is_asked_kept_in_the_keychain_and_never_written(home: Path, keys: Keychain) -> None:
    value = "tok-" + secrets.token_hex(16)
    d = needing_secret(home, keys.env)
    d.start()
    try:
        asked = d.cli("call", "env.variable_digest", "name=API_TOKEN", "--json")
        assert asked.returncode == 75, asked  # the call waits on mcpx's own question, as on any
        q = json.loads(asked.stdout)["inputRequired"]["elicitation"]
        assert q["server"] == "mcpx" and q["audience"] == "human" and q["tool"] == "env"
        assert "Server env needs API_TOKEN" in q["message"] and "keychain" in q["message"]
        assert q["requestedSchema"]["properties"]["API_TOKEN"]["format"] == "password"
        task = json.loads(asked.stdout)["inputRequired"]["task"]
        given = d.cli("elicit", "answer", q["id"], json.dumps({"API_TOKEN": value}))
        assert given.returncode == 0, given
        done = d.cli("task", "result", task, "--json")
        assert done.returncode == 0, done
        assert json.loads(json.loads(done.stdout)["result"]["content"][0]["text"]) == digest(value)
        assert keys.lookup("env", "API_TOKEN") == value
        shown = d.cli("elicit", "show", q["id"], "--json").stdout
        assert value not in shown and "[redacted]" in shown
        audit = d.cli("audit", "--json").stdout
        assert value not in audit
        d.stop()
        d.start()  # a later start, after a restart too, reads the keychain without asking
        again = d.cli("call", "env.variable_digest", "name=API_TOKEN", "--json")
        assert again.returncode == 0, again
        assert json.loads(json.loads(again.stdout)["result"]["content"][0]["text"]) == digest(value)
        assert json.loads(d.cli("elicit", "list", "--json").stdout)["elicitations"] == []
    finally:
        d.stop()
    assert written(home, value) == []
    for out in (asked, given, done, again):
        assert value not in out.stdout + out.stderr


async def test_a_listing_asks_without_waiting_and_the_tools_follow_the_answer(home: Path, keys: Keychain) -> None:
    value = "tok-" + secrets.token_hex(16)
    d = needing_secret(home, keys.env)
    d.start()
    try:
        async with d.session() as http:
            async def listing() -> tuple[int, str]:
                async with http.get("/v1/tools/env") as r:
                    return r.status, (await r.json())["error"]["message"]

            (status, said), (again, also) = await asyncio.gather(listing(), listing())  # at once: one question
            assert status == again == 502 and "waits for its secrets: mcpx asked for them in elc-" in said, said
            eid = said.split(" in ", 1)[1].split()[0]
            assert eid in also
            assert eid in (await listing())[1]  # and later: the same one, not a second
        d.stop()
        d.start()  # its asker gone, the question ends; the next listing asks again
        async with d.session() as http:
            async with http.get(f"/v1/elicit/{eid}") as r:
                orphan = (await r.json())["elicitation"]
            assert orphan["state"] == "abandoned" and "restarted" in orphan["stateReason"], orphan
            async with http.get("/v1/tools/env") as r:
                said = (await r.json())["error"]["message"]
            eid = said.split(" in ", 1)[1].split()[0]
            assert eid != orphan["id"]
            status, _ = await answer(http, eid, "accept", {"API_TOKEN": value})
            assert status == 200

            async def listed() -> dict[str, object] | None:
                async with http.get("/v1/tools/env") as r:  # the keychain takes the value just after the answer
                    return await r.json() if r.status == 200 else None

            tools = await wait_for(listed, what="the server's tools listed once its secret is kept")
            assert "variable_digest" in json.dumps(tools), tools
    finally:
        d.stop()
    assert keys.lookup("env", "API_TOKEN") == value
    assert written(home, value) == []


def test_secrets_list_set_and_forget(home: Path, keys: Keychain) -> None:
    value = "tok-" + secrets.token_hex(16)
    d = needing_secret(home, keys.env)  # not started: these commands need no daemon
    listed = d.cli("secrets", "list", "--json")
    assert json.loads(listed.stdout)["secrets"] == [{"server": "env", "name": "API_TOKEN", "inKeychain": False}]
    kept = d.cli("secrets", "set", "env", "API_TOKEN", input=value + "\n")
    assert kept.returncode == 0 and "kept in the keychain" in kept.stdout, kept
    assert keys.lookup("env", "API_TOKEN") == value
    text = d.cli("secrets", "list")
    assert "env" in text.stdout and "API_TOKEN" in text.stdout and "in the keychain" in text.stdout
    assert value not in text.stdout + kept.stdout + kept.stderr
    unknown = d.cli("secrets", "set", "env", "OTHER", input="x\n")
    assert unknown.returncode == 2 and "lists no secret OTHER (its secrets: API_TOKEN)" in unknown.stderr
    gone = d.cli("secrets", "forget", "env", "API_TOKEN")
    assert gone.returncode == 0 and "taken out of the keychain" in gone.stdout
    assert keys.lookup("env", "API_TOKEN") is None
    assert "missing" in d.cli("secrets", "list").stdout


def test_a_running_server_keeps_calls_off_the_keychain_and_a_changed_secret_takes_effect(home: Path,
                                                                                          tmp_path: Path) -> None:
    first, second, third = ("tok-" + secrets.token_hex(16) for _ in range(3))
    d: Daemon | None = None

    def call() -> subprocess.CompletedProcess[str]:
        assert d is not None
        return d.cli("call", "env.variable_digest", "name=API_TOKEN", "--json")

    def given(done: subprocess.CompletedProcess[str]) -> str:
        assert done.returncode == 0, done
        return str(json.loads(json.loads(done.stdout)["result"]["content"][0]["text"]))

    try:
        with private_keychain(tmp_path / "kc") as keys:
            d = needing_secret(home, keys.env)
            d.start()
            told = d.cli("secrets", "set", "env", "API_TOKEN", input=first + "\n")
            assert "the daemon was told; none of its instances is running" in told.stdout, told
            assert given(call()) == digest(first)
            # a running instance keeps the value it started with: `set` tells the daemon, which stops it
            told = d.cli("secrets", "set", "env", "API_TOKEN", input=second + "\n")
            assert "the daemon was told: 1 idle instance(s) stopped" in told.stdout, told
            assert given(call()) == digest(second)
            # `forget` too: the daemon does not trust what it knew, and the next call asks again
            told = d.cli("secrets", "forget", "env", "API_TOKEN")
            assert "the daemon was told: 1 idle instance(s) stopped" in told.stdout, told
            asked = call()
            assert asked.returncode == 75, asked
            q = json.loads(asked.stdout)["inputRequired"]
            assert d.cli("elicit", "answer", q["elicitation"]["id"], json.dumps({"API_TOKEN": third})).returncode == 0
            assert given(d.cli("task", "result", q["task"], "--json")) == digest(third)
        # the keychain is gone (its bus and daemon stopped): a call to the instance running with its secrets does
        # not ask the keychain again, and goes through
        assert given(call()) == digest(third)
        assert [i["server"] for i in json.loads(d.cli("status", "--json").stdout)["upstreams"]["instances"]] == ["env"]
    finally:
        if d is not None:
            d.stop()
    assert not any(written(home, value) for value in (first, second, third))


def test_no_keychain_is_a_clear_error_naming_what_to_do_instead(home: Path, tmp_path: Path) -> None:
    nobus = {"DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path}/no-bus-here"}
    with needing_secret(home, nobus) as d:
        out = d.cli("call", "env.variable_digest", "name=API_TOKEN")
        kept = d.cli("secrets", "set", "env", "API_TOKEN", input="x\n")
        listing = d.cli("secrets", "list")
    assert out.returncode == 1, out
    # the list is whole without a keychain: each configured name, marked as unreadable, and the error's advice
    assert listing.returncode == 1, listing
    assert "API_TOKEN" in listing.stdout and "unreadable" in listing.stdout, listing
    for said in (out.stderr, kept.stderr, listing.stderr):
        assert "no keychain" in said and "Secret Service" in said, said
        assert '"env": {"API_TOKEN": "${API_TOKEN}"}' in said, said
    assert kept.returncode == 1
    assert not any(p.name.endswith((".keyring", ".cfg")) for p in home.rglob("*"))  # no file of secrets anywhere


def test_a_bad_secrets_field_is_named(home: Path) -> None:
    d = make_daemon(home, {"servers": {"env": stdio("env_server.py", secrets=["9LIVES", "A"], env={"A": "x"})}})
    out = d.cli("config", "check")
    assert out.returncode == 1
    assert "'9LIVES' is not a variable name" in out.stderr and "A is in env too" in out.stderr
    http = make_daemon(home, {"servers": {"web": {"url": "http://127.0.0.1:9/mcp", "secrets": ["A"]}}})
    out = http.cli("config", "check")
    assert out.returncode == 1 and "secrets" in out.stderr


async def test_a_hosts_call_gets_the_question_passed_through_and_its_answer_kept(home: Path, keys: Keychain) -> None:
    """An MCP host that can ask (the SDK client through `mcpx serve`) is asked mcpx's question like any: its answer
    is the person's, the keychain keeps it, the server sees it."""
    value = "tok-" + secrets.token_hex(16)
    seen: list[str] = []
    with needing_secret(home, keys.env) as d:
        async with stdio_client(d, "legacy", accepting({"API_TOKEN": value}, seen)) as client:
            result = await client.call_tool("env_variable_digest", {"name": "API_TOKEN"})
            assert json.loads(text(result)) == digest(value), text(result)
            assert "env_variable_digest" in {t.name for t in (await client.list_tools()).tools}
        async with d.session() as http, http.get("/v1/audit", params={"kinds": "elicit.answered"}) as r:
            records = (await r.json())["records"]
    assert len(seen) == 1 and "Server env needs API_TOKEN" in seen[0], seen
    assert [rec["data"]["by"] for rec in records] == ["person:mcp-client"]
    assert keys.lookup("env", "API_TOKEN") == value
    assert written(home, value) == []


def test_a_declined_question_runs_nothing_and_keeps_nothing(home: Path, keys: Keychain) -> None:
    with needing_secret(home, keys.env) as d:
        out = d.cli("call", "env.variable_digest", '{"name": "API_TOKEN"}', "--elicit=decline")
    assert out.returncode == 1, out
    assert "env.variable_digest was not run: its server needs secrets, mcpx asked for them (elc-" in out.stderr, out
    assert "said decline" in out.stderr
    assert keys.lookup("env", "API_TOKEN") is None
