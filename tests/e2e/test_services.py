"""REST services and commands behind mcpx (issue 38), against the real daemon: a real FastAPI service with its own
generated OpenAPI 3.1 document that keeps every request it receives (tests/peers/notes_api.py), OpenAPI's own
Petstore document served by Stoplight's Prism (a mock that checks each request against the document), and git on
a temporary repository. Writes are confirmed one by one, each accept bound to exactly
the request shown; nothing the person did not accept reaches the service."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from conftest import loud_skip, wait_for
from gateway_helpers import answer, call, result, until_pending
from harness import (
    PATIENCE,
    PEERS,
    ROOT,
    Daemon,
    free_port,
    make_daemon,
    process_serving,
    wait_for_sync,
)
from keychain import Keychain, private_keychain

PRISM = ROOT / "node_modules" / ".bin" / "prism"  # Stoplight's mock server (package.json)
KEY = "sk-live-4f9a8b7c6d5e4f3a2b1c"  # the service's key, from the daemon's environment: sent, never shown
TOKEN = "tok-9b8a7c6d5e4f3a2b"  # a bearer token from the keychain: sent, never shown
DEMO = {"command": sys.executable, "args": ["-m", "mcpx", "demo-server"]}


@contextmanager
def notes_service(issuer: str | None = None, port: int | None = None) -> Iterator[str]:
    """The FastAPI notes service on a loopback port (a free one by default), for the block: its base URL. With
    `issuer`, behind that authorization server's login (a bearer JWT for the service)."""
    port = port or free_port()
    with process_serving([sys.executable, str(PEERS / "notes_api.py"), str(port), *([issuer] if issuer else [])], port,
                         "the notes service", stderr=subprocess.PIPE) as base:
        yield base


async def received(base: str) -> list[dict[str, Any]]:
    """What the service received, but mcpx's reading of its document."""
    async with aiohttp.ClientSession() as client, client.get(f"{base}/_received") as r:
        return [{**got, "body": base64.b64decode(got["body"])} for got in await r.json()
                if got["path"] != "/openapi.json"]


async def tools(http: aiohttp.ClientSession, server: str) -> dict[str, dict[str, Any]]:
    async with http.get(f"/v1/tools/{server}") as r:
        body = await r.json()
        assert r.status == 200, body
        return {t["name"]: t for t in body["servers"][server]}


async def asked(http: aiohttp.ClientSession, server: str, tool: str, arguments: dict[str, Any]
                ) -> tuple[dict[str, Any], str]:
    """Call a tool that needs mcpx's confirmation: its question, and its task."""
    status, body, _ = await call(http, server, tool, arguments)
    assert status == 202 and body["elicitation"]["server"] == "mcpx", body
    return body["elicitation"], body["task"]


def shown(q: dict[str, Any]) -> dict[str, Any]:
    """The exact request a confirmation shows, between its first line and its question."""
    first, exact, last = q["message"].split("\n\n")
    assert (first, last) == (f"{q['tool']} would send this request:", "Let mcpx send exactly this?")
    document: dict[str, Any] = json.loads(exact)
    return document


async def confirm(http: aiohttp.ClientSession, q: dict[str, Any]) -> None:
    """The person accepts exactly the request shown: the digest the question carries goes back with the yes."""
    assert q["requestedSchema"]["properties"]["digest"]["enum"] == [q["confirms"]["request"]]
    status, body = await answer(http, q["id"], "accept", {"confirm": True, "digest": q["confirms"]["request"]})
    assert status == 200, body


async def reloaded(http: aiohttp.ClientSession) -> bool:
    """The daemon took up the second config (notes_rw no longer lists list_notes)."""
    return "list_notes" not in await tools(http, "notes_rw")


async def approve(http: aiohttp.ClientSession, eid: str, person: str) -> None:
    """`person` approves through their own link, as their phone would."""
    async with http.get(f"/v1/elicit/{eid}/link", params={"as": person}) as r:
        link = (await r.json())["url"]
    async with aiohttp.ClientSession() as phone, phone.post(
            link.replace(f"/inbox/q/{eid}", f"/inbox/q/{eid}/accept"), data="") as r:
        assert r.status == 200, await r.text()


def kept(keys: Keychain, server: str, name: str, value: str) -> bool:
    try:
        keys.store(server, name, value)
    except subprocess.CalledProcessError:
        return False
    return True


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[Keychain]:
    """A private keychain holding notes_rw's NOTES_TOKEN."""
    with private_keychain(tmp_path / "kc") as k:
        # the login collection may take a moment after the service first answers: wait until it keeps the token
        wait_for_sync(lambda: kept(k, "notes_rw", "NOTES_TOKEN", TOKEN), PATIENCE, 0.05)
        yield k


async def test_a_rest_service_reads_freely_and_each_write_is_sent_only_as_accepted(home: Path, keys: Keychain) -> None:
    people = {p: {} for p in ("alice", "bob", "carol")}
    with notes_service() as base:
        doc = f"{base}/openapi.json"
        headers = {"X-Api-Key": "${NOTES_KEY}"}
        config = {"servers": {
            "notes": {"openapi": doc, "headers": headers},
            "notes_rw": {"openapi": doc, "methods": "all", "operations": {"exclude": ["get_note"]},
                         "secrets": ["NOTES_TOKEN"], "headers": {**headers, "Authorization": "Bearer ${NOTES_TOKEN}"}},
        }, "people": people, "elicit": {"askTimeout": "10m", "approvals": [
            {"match": {"server": "notes_rw", "method": "DELETE"}, "approvers": ["alice", "bob", "carol"], "need": 2}]}}
        d = make_daemon(home, config, listen=f"127.0.0.1:{free_port()}", extra_env={"NOTES_KEY": KEY, **keys.env})
        d.start()
        try:
            async with d.session() as http:
                # read-only by default: the document's GETs are tools, its POST and DELETE are not
                read = await tools(http, "notes")
                assert set(read) == {"list_notes", "get_note", "note_text", "pixel", "export_note"}
                assert read["list_notes"]["annotations"]["readOnlyHint"] is True
                assert read["list_notes"]["description"] == "List the notes"
                assert set(read["list_notes"]["inputSchema"]["properties"]) == {"tag", "limit"}
                written = await tools(http, "notes_rw")
                # get_note excluded; upload_note's body is a file upload (multipart), which mcpx does not send
                assert set(written) == {"list_notes", "create_note", "delete_note", "create_note_from_form",
                                        "create_note_from_text", "note_text", "pixel", "export_note"}
                assert written["delete_note"]["annotations"]["destructiveHint"] is True
                assert written["create_note"]["inputSchema"]["properties"]["body"]["properties"]["title"] == {
                    "title": "Title", "type": "string"}  # FastAPI's $ref into components, resolved

                # a GET is answered at once: JSON as structured content and as text; the key went with it
                status, body, _ = await call(http, "notes", "list_notes", {"tag": "a", "limit": 5})
                assert status == 200, body
                got = body["result"]
                assert got["structuredContent"]["notes"][0]["title"] == "first"
                assert json.loads(got["content"][0]["text"]) == got["structuredContent"]
                [listed] = await received(base)
                assert (listed["method"], listed["path"], listed["query"]) == ("GET", "/notes", "tag=a&limit=5")
                assert listed["headers"]["x-api-key"] == KEY
                # an HTTP error is an error result: its status and the start of its body
                status, body, _ = await call(http, "notes", "get_note", {"note_id": 404})
                assert body["result"]["isError"] is True
                assert body["result"]["content"][0]["text"] == 'HTTP 404 Not Found: {"detail":"no note 404"}'

                # a POST is asked first, shown exactly (URL, headers, the body pretty-printed), the key masked
                note = {"title": "from mcpx; rm -rf /", "tags": ["x"]}
                q, task = await asked(http, "notes_rw", "create_note", {"body": note})
                assert q["audience"] == "human" and q["tool"] == "notes_rw.create_note"
                request = shown(q)
                assert (request["method"], request["url"], request["body"]) == ("POST", f"{base}/notes", note)
                assert request["headers"]["X-Api-Key"] == request["headers"]["Authorization"] == "[redacted]"
                assert KEY not in json.dumps(q) and TOKEN not in json.dumps(q)
                assert request["headers"]["Content-Type"] == "application/json"
                assert q["confirms"]["method"] == "POST" and len(q["confirms"]["request"]) == 64
                # declined: an error naming who and why, and the service received nothing
                async with http.post(f"/v1/elicit/{q['id']}/decline", json={"reason": "not that title"}) as r:
                    assert r.status == 200
                failed = await result(http, task)
                assert failed["state"] == "failed" and "was not run: mcpx asked first" in failed["error"]
                assert "said decline (not that title)" in failed["error"]
                assert [g for g in await received(base) if g["method"] == "POST"] == []

                # accepted: the service receives exactly the body that was shown, once
                q, task = await asked(http, "notes_rw", "create_note", {"body": note})
                await confirm(http, q)
                done = await result(http, task)
                assert done["state"] == "completed" and done["result"]["structuredContent"]["title"] == note["title"]
                [posted] = [g for g in await received(base) if g["method"] == "POST"]
                assert json.loads(posted["body"]) == shown(q)["body"] == note
                assert posted["headers"]["x-api-key"] == KEY
                assert posted["headers"]["authorization"] == f"Bearer {TOKEN}"  # from the keychain
                assert {k.lower(): v for k, v in shown(q)["headers"].items() if v != "[redacted]"}.items() <= \
                    posted["headers"].items()  # every header shown is the header sent

                # a different body is a different request: asked again, and cancelled, it is never sent
                other = {"title": "another"}
                q2, task = await asked(http, "notes_rw", "create_note", {"body": other})
                assert q2["id"] != q["id"] and q2["confirms"]["request"] != q["confirms"]["request"]
                await answer(http, q2["id"], "cancel")
                cancelled = await result(http, task)
                assert cancelled["state"] == "failed" and "said cancel" in cancelled["error"]
                assert len([g for g in await received(base) if g["method"] == "POST"]) == 1

                # accepted, but the config changed while the person read: what would go now is not what they
                # accepted, so it is asked again, and only the new request is sent, once
                q3, task = await asked(http, "notes_rw", "create_note", {"body": other})
                rw = config["servers"]["notes_rw"]
                d.write_config({**config, "servers": {**config["servers"], "notes_rw": {
                    **rw, "headers": {**rw["headers"], "X-Tenant": "b"},
                    "operations": {"exclude": ["get_note", "list_notes"]}}}})
                await wait_for(lambda: reloaded(http), what="the reloaded config")
                await confirm(http, q3)
                [q4] = await until_pending(http, 1, trace=q3["trace"])
                assert q4["id"] != q3["id"] and "X-Tenant" not in shown(q3)["headers"]
                assert shown(q4)["headers"]["X-Tenant"] == "b"
                assert len([g for g in await received(base) if g["method"] == "POST"]) == 1
                await confirm(http, q4)
                assert (await result(http, task))["state"] == "completed"
                [_, again] = [g for g in await received(base) if g["method"] == "POST"]
                assert json.loads(again["body"]) == other and again["headers"]["x-tenant"] == "b"

                # a DELETE on this service needs two of alice, bob and carol: one approval sends nothing
                q, task = await asked(http, "notes_rw", "delete_note", {"note_id": 1})
                assert q["approvals"]["need"] == 2 and q["confirms"]["method"] == "DELETE"
                assert (shown(q)["method"], shown(q)["url"]) == ("DELETE", f"{base}/notes/1")
                await approve(http, q["id"], "alice")
                async with http.get(f"/v1/elicit/{q['id']}") as r:
                    assert (await r.json())["elicitation"]["state"] == "pending"
                assert not [g for g in await received(base) if g["method"] == "DELETE"]
                await approve(http, q["id"], "carol")
                done = await result(http, task)
                assert done["state"] == "completed", done
                assert [g["path"] for g in await received(base) if g["method"] == "DELETE"] == ["/notes/1"]

                # a confirmation open when the daemon dies lets nothing go after the restart
                q, task = await asked(http, "notes_rw", "create_note", {"body": {"title": "never"}})
            d.kill9()
            d.start()
            async with d.session() as http:
                ended = await result(http, task)
                assert ended["state"] == "failed" and "was not sent" in ended["error"], ended
                async with http.get(f"/v1/elicit/{q['id']}") as r:
                    assert (await r.json())["elicitation"]["state"] == "abandoned"
                assert len([g for g in await received(base) if g["method"] == "POST"]) == 2  # as before it
        finally:
            d.stop()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A new git repository."""
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    return tmp_path / "repo"


TREE = {"openapi": "3.1.0", "info": {"title": "tree", "version": "1"}, "paths": {"/nodes/{id}": {
    "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
    "put": {"requestBody": {"required": True, "content": {"application/json": {"schema": {
        "$ref": "#/components/schemas/Node"}}}}, "responses": {"204": {"description": "kept"}}}}},
    "components": {"schemas": {"Node": {"type": "object", "properties": {
        "name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}}}}


async def test_commands_run_without_a_shell_and_mcp_tools_named_in_confirm_are_asked(home: Path, repo: Path) -> None:
    tree = repo.parent / "tree.json"  # a document of its own: no operationId, a schema that holds itself
    tree.write_text(json.dumps(TREE))
    git = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}
    digest = ("import hashlib, os; e = os.environ; "
              "print(hashlib.sha256(e['GIT_TOKEN'].encode()).hexdigest(), e['AUTH'] == 'Bearer ' + e['GIT_TOKEN']); "
              "print('echoed', e['GIT_TOKEN'])")
    config = {"servers": {
        "git": {"secrets": ["GIT_TOKEN"], "commands": {
            "token": {"argv": [sys.executable, "-c", digest], "env": {"AUTH": "Bearer ${GIT_TOKEN}"}},
            "log": {"argv": ["git", "log", "--format=%s", "-n", "{count}"], "cwd": str(repo), "readOnly": True,
                    "parameters": {"count": {"type": "integer", "description": "how many"}},
                    "description": "the last commits' subjects"},
            "show": {"argv": ["git", "show", "--stat", "{ref}"], "cwd": str(repo), "readOnly": True},
            "commit": {"argv": ["git", "commit", "-q", "--allow-empty", "-m", "{message}"], "cwd": str(repo),
                       "env": git},
        }},
        "demo": {**DEMO, "confirm": ["delete_*"]},
        "tree": {"openapi": str(tree), "methods": "all", "baseUrl": "http://127.0.0.1:9"},
    }}
    with private_keychain(repo.parent / "kc") as keys:
        wait_for_sync(lambda: kept(keys, "git", "GIT_TOKEN", TOKEN), PATIENCE, 0.05)
        d = make_daemon(home, config, extra_env=keys.env)
        d.start()
        try:
            await commands_and_confirmed_mcp_tools(d, repo, git)
        finally:
            d.stop()
    assert not [p for p in home.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]  # noqa: ASYNC240


async def commands_and_confirmed_mcp_tools(d: Daemon, repo: Path, git: dict[str, str]) -> None:
    """The commands test's body, with its daemon started."""
    async with d.session() as http:
        # a command's secret comes from the keychain into its process's environment (as itself, and where its
        # env names it), masked in the confirmation, and scrubbed from what the call gives back and keeps
        q, task = await asked(http, "git", "token", {})
        assert shown(q)["env"] == {"AUTH": "[redacted]", "GIT_TOKEN": "[redacted]"} and TOKEN not in json.dumps(q)
        await confirm(http, q)
        done = await result(http, task)
        # a command that prints its secret: the caller is given [redacted] in its place, as the audit is
        assert done["result"]["structuredContent"]["stdout"] == \
            f"{hashlib.sha256(TOKEN.encode()).hexdigest()} True\nechoed [redacted]\n", done
        assert TOKEN not in json.dumps(done)
        async with http.get("/v1/audit") as r:
            assert r.status == 200 and TOKEN not in await r.text()

        listed = await tools(http, "git")
        assert listed["log"]["inputSchema"]["properties"]["count"] == {"type": "integer", "description": "how many"}
        assert listed["log"]["annotations"]["readOnlyHint"] is True
        # a command not marked read-only is confirmed: the exact argv, shell-quoted, and its directory
        message = "x; touch pwned $(touch pwned2) `id` * 'q' \"dq\""
        q, task = await asked(http, "git", "commit", {"message": message})
        assert q["confirms"]["method"] == "RUN"
        assert shown(q) == {"argv": ["git", "commit", "-q", "--allow-empty", "-m", message], "cwd": str(repo),
                            "env": {**git, "GIT_TOKEN": "[redacted]"}}  # the entry's secret goes to each command
        await confirm(http, q)
        done = await result(http, task)
        assert done["state"] == "completed" and done["result"]["structuredContent"]["exitCode"] == 0, done
        # the read-only command runs unasked; the message arrived as one literal argument, nothing ran in a shell
        status, body, _ = await call(http, "git", "log", {"count": 5})
        assert status == 200 and body["result"]["structuredContent"]["stdout"] == message + "\n"
        assert not (repo / "pwned").exists() and not (repo / "pwned2").exists()
        # a failing run is an error result with its exit code and stderr; a wrong type is refused, unsent
        status, body, _ = await call(http, "git", "show", {"ref": "no-such-ref"})
        assert body["result"]["isError"] is True and body["result"]["structuredContent"]["exitCode"] == 128
        assert "no-such-ref" in body["result"]["structuredContent"]["stderr"]
        status, body, _ = await call(http, "git", "log", {"count": "5; id"})
        failed = await result(http, body["task"])
        assert failed["state"] == "failed" and "'count' must be an integer" in failed["error"]

        # the service's tools are served on /mcp; /mcp/git, a door to one MCP server as it is, says why not
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        async with http.post("/mcp/git", json=init, headers={"Accept": "application/json, text/event-stream"}) as r:
            refused = await r.json()
            assert r.status == 404 and "server 'git' is commands, not an MCP server: its tools are served on " \
                "/mcp as git_TOOL" in refused["error"]["message"], refused

        # an MCP server's tools named in its confirm are asked about before the call is forwarded
        q, task = await asked(http, "demo", "delete_branch", {})
        assert q["message"] == "demo.delete_branch is one its server's confirm names: let this call proceed?"
        await answer(http, q["id"], "decline")
        assert "was not run" in (await result(http, task))["error"]

        # a tool named by its method and path, its path-level parameter and its body's schema taken in; a schema
        # that holds itself is taken in once, and where it meets itself again it is any value
        [put] = (await tools(http, "tree")).values()
        assert put["name"] == "put_nodes_id" and put["annotations"]["idempotentHint"] is True
        node = put["inputSchema"]["properties"]["body"]
        assert put["inputSchema"]["required"] == ["id", "body"]
        assert node["properties"]["name"] == {"type": "string"}
        assert node["properties"]["children"]["items"] == {"description": "(the schema #/components/schemas/Node, "
                                                                         "again)"}


@contextmanager
def prism(document: Path) -> Iterator[str]:
    """Stoplight's Prism mocking `document` on a free loopback port, for the block: its base URL."""
    if not PRISM.exists():
        loud_skip(f"{PRISM} is missing: run `npm ci` (package.json's @stoplight/prism-cli)")
    port = free_port()
    argv = [str(PRISM), "mock", "-h", "127.0.0.1", "-p", str(port), str(document)]
    with process_serving(argv, port, "prism") as base:
        yield base


def styles_document(path: Path) -> Path:
    """A document of its own whose one operation takes a parameter in every style OpenAPI 3 defines for it, and one
    whose path parameter has a style a path cannot have."""
    def param(name: str, where: str, schema: dict[str, Any], **how: Any) -> dict[str, Any]:
        return {"name": name, "in": where, "required": where == "path", "schema": schema, **how}

    array, obj = {"type": "array", "items": {"type": "integer"}}, {"type": "object"}
    path.write_text(json.dumps({"openapi": "3.0.3", "info": {"title": "styles", "version": "1"}, "paths": {
        "/styles/{ids}/{lab}/{mat}": {"get": {"operationId": "styles", "parameters": [
            param("ids", "path", array), param("lab", "path", array, style="label", explode=True),
            param("mat", "path", obj, style="matrix"),
            param("tags", "query", {"type": "array", "items": {"type": "string"}}, explode=False),
            param("filter", "query", obj, style="deepObject", explode=True),
            param("sel", "query", array, style="pipeDelimited"), param("words", "query", array, style="spaceDelimited"),
            param("color", "query", obj), param("X-Ids", "header", array),
            {"name": "where", "in": "query", "content": {"application/json": {"schema": obj}}}],
            "responses": {"200": {"description": "ok"}}}},
        "/bad/{x}": {"get": {"operationId": "bad", "parameters": [param("x", "path", obj, style="deepObject")],
                             "responses": {"200": {"description": "ok"}}}},
        "/latin": {"post": {"operationId": "latin", "requestBody": {"required": True, "content": {
            "text/plain; charset=iso-8859-1": {"schema": {"type": "string"}}}},
            "responses": {"200": {"description": "ok"}}}},
        "/anything": {"post": {"operationId": "anything", "requestBody": {"content": {"text/plain": {"schema": True}}},
                               "responses": {"200": {"description": "ok"}}}},
        "/bad-form": {"post": {"operationId": "bad_form", "requestBody": {"required": True, "content": {
            "application/x-www-form-urlencoded": {"schema": obj, "encoding": {"x": {"style": "matrix"}}}}},
            "responses": {"200": {"description": "ok"}}}}}}))
    return path


async def test_a_published_document_against_its_mock_and_every_parameter_style_and_body_as_sent(
        home: Path, tmp_path: Path) -> None:
    document = PEERS / "petstore-expanded.yaml"  # OpenAPI's own example (YAML, 3.0), $refs between its schemas
    with prism(document) as base, notes_service() as notes:
        d = make_daemon(home, {"servers": {
            "pets": {"openapi": str(document), "baseUrl": base, "methods": "all", "confirm": ["DELETE"]},
            "notes": {"openapi": f"{notes}/openapi.json", "methods": "all"},
            "styles": {"openapi": str(styles_document(tmp_path / "styles.json")), "baseUrl": notes, "methods": "all",
                       "confirm": []}}})
        d.start()
        try:
            async with d.session() as http:
                # every style as OpenAPI 3's table writes it, delimiters as they are and values percent-encoded; the
                # header's unencoded; a style a path cannot have is no tool
                # (a body whose schema is `true` is any text; a form field whose style a form cannot have is no tool)
                assert set(await tools(http, "styles")) == {"styles", "latin", "anything"}
                status, body, _ = await call(http, "styles", "styles", {
                    "ids": [3, 4], "lab": [5, 6], "mat": {"R": 1, "G": 2}, "tags": ["a,b", "c d"],
                    "filter": {"role": "admin", "age": 3}, "sel": [1, 2], "words": [7, 8], "color": {"R": 100},
                    "where": {"a": [1]}, "X-Ids": [9, 10]})
                assert status == 200, body
                [got] = await received(notes)
                assert got["path"] == "/styles/3,4/.5.6/;mat=R,1,G,2", got
                assert got["query"] == ("tags=a%2Cb,c%20d&filter%5Brole%5D=admin&filter%5Bage%5D=3&sel=1%7C2"
                                        "&words=7%208&R=100&where=%7B%22a%22%3A%5B1%5D%7D"), got
                assert got["headers"]["x-ids"] == "9,10"
                # a text body in the charset its media type names (confirm: [], so sent unasked)
                await call(http, "styles", "latin", {"body": "été"})
                [_, latin] = await received(notes)
                assert latin["body"] == "été".encode("iso-8859-1")
                assert latin["headers"]["content-type"] == "text/plain; charset=iso-8859-1"
                status, body, _ = await call(http, "styles", "styles", {"ids": [1], "lab": [1], "mat": {},
                                                                        "filter": ["not", "an", "object"]})
                failed = await result(http, body["task"])
                assert "'filter' is a deepObject parameter, so its value must be an object" in failed["error"]

                # a form and a text body, each confirmed as the exact text sent, which the service receives as is
                listed = await tools(http, "notes")
                assert "upload_note" not in listed  # a file upload (multipart): not sent, so not a tool
                assert listed["create_note_from_text"]["inputSchema"]["properties"]["body"] == {
                    "type": "string", "description": "sent as text/plain"}
                q, task = await asked(http, "notes", "create_note_from_form", {
                    "body": {"title": "a b&c=d", "tags": ["x", "y"]}})
                assert shown(q)["body"] == "title=a%20b%26c%3Dd&tags=x&tags=y"
                assert shown(q)["headers"]["Content-Type"] == "application/x-www-form-urlencoded"
                await confirm(http, q)
                made = (await result(http, task))["result"]["structuredContent"]
                assert (made["title"], made["tags"]) == ("a b&c=d", ["x", "y"])
                q, task = await asked(http, "notes", "create_note_from_text", {"body": "plain, ünïcode"})
                assert shown(q)["body"] == "plain, ünïcode"
                await confirm(http, q)
                assert (await result(http, task))["result"]["structuredContent"]["title"] == "plain, ünïcode"
                posted = [g for g in await received(notes) if g["method"] == "POST" and g["path"] != "/latin"]
                assert [p["body"] for p in posted] == [b"title=a%20b%26c%3Dd&tags=x&tags=y",
                                                       "plain, ünïcode".encode()]
                assert posted[1]["headers"]["content-type"] == "text/plain; charset=utf-8"
                status, body, _ = await call(http, "notes", "create_note_from_form", {"body": "title=x"})
                failed = await result(http, body["task"])
                assert "its body is a form (application/x-www-form-urlencoded), so 'body' must be an object" in \
                    failed["error"]

                # responses that are not JSON: text as text, an image as an image, other bytes as a resource
                _, body, _ = await call(http, "notes", "note_text", {"note_id": 1})
                assert body["result"]["content"] == [{"type": "text", "text": "first (a)"}]
                assert "structuredContent" not in body["result"]
                _, body, _ = await call(http, "notes", "pixel")
                [image] = body["result"]["content"]
                assert image["type"] == "image" and image["mimeType"] == "image/png"
                assert base64.b64decode(image["data"]).startswith(b"\x89PNG")
                _, body, _ = await call(http, "notes", "export_note", {"note_id": 1})
                [blob] = body["result"]["content"]
                assert blob["type"] == "resource" and blob["resource"]["uri"] == f"{notes}/notes/1/export"
                assert base64.b64decode(blob["resource"]["blob"]) == b"\x00\x01first"


                pets = await tools(http, "pets")
                assert set(pets) == {"findPets", "addPet", "find_pet_by_id", "deletePet"}
                assert pets["addPet"]["inputSchema"]["properties"]["body"]["required"] == ["name"]
                assert pets["findPets"]["inputSchema"]["properties"]["tags"]["type"] == "array"
                # Prism answers from the document and checks each request against it: a query array as form
                status, body, _ = await call(http, "pets", "findPets", {"tags": ["a", "b"], "limit": 2})
                assert status == 200 and not body["result"].get("isError"), body
                assert isinstance(body["result"]["structuredContent"]["result"], list)
                # confirm: ["DELETE"] alone, so a POST goes unasked; the body it fails Prism's check on is an
                # error result with the status and the start of the body
                status, body, _ = await call(http, "pets", "addPet", {"body": {"tag": "no name"}})
                assert status == 200 and body["result"]["isError"] is True
                assert body["result"]["content"][0]["text"].startswith("HTTP 422 Unprocessable Entity: ")
                status, body, _ = await call(http, "pets", "addPet", {"body": {"name": "Rex"}})
                assert "id" in body["result"]["structuredContent"]
                q, task = await asked(http, "pets", "deletePet", {"id": 7})
                assert (shown(q)["method"], shown(q)["url"]) == ("DELETE", f"{base}/pets/7")
                await confirm(http, q)
                done = await result(http, task)
                assert done["result"]["content"][0]["text"] == "HTTP 204 No Content", done
        finally:
            d.stop()


def test_config_check_explains_a_service_entry_that_does_not_hold(home: Path, tmp_path: Path) -> None:
    swagger = tmp_path / "old.json"
    swagger.write_text(json.dumps({"swagger": "2.0", "info": {"title": "old"}, "paths": {}}))
    d = make_daemon(home, {"servers": {
        "a": {"openapi": str(swagger), "methods": ["GET", "FETCH"]},
        "b": {"commands": {"x": {"argv": ["{prog}", "run"]}}},
        "c": {"commands": {"y": {"argv": ["true"], "parameters": {"n": {"type": "integer"}}}}},
        "d": {"openapi": str(swagger), "auth": {}, "headers": {"authorization": "Bearer x"}},
        "e": {"commands": {"z": {"argv": ["true"], "env": {"TOK": "x"}}}, "secrets": ["TOK"]},
    }, "elicit": {"rules": [{"match": {"method": "fetch"}, "action": "decline"}]}})
    out = d.cli("config", "check")
    assert out.returncode != 0
    assert "servers.a: methods: 'FETCH' is not an HTTP method" in out.stderr, out.stderr
    assert "servers.b.commands.x: argv[0] is the program and cannot be a parameter" in out.stderr
    assert "servers.c.commands.y: parameters 'n' appear in no {slot} of argv" in out.stderr
    assert "elicit.rules[0].match: method 'fetch' is not an HTTP method" in out.stderr, out.stderr
    assert "servers.d: auth and an Authorization header: give one" in out.stderr
    assert "servers.e: commands.z.env: TOK is one of secrets too: give it one way" in out.stderr
    d.write_config({"servers": {"a": {"openapi": str(swagger)}, "b": {"commands": {"x": {"argv": ["no-such-program"]}}},
                                "c": {"commands": {"y": {"argv": ["true"], "cwd": "~/mcpx-no-such-directory"}}},
                                "f": {"openapi": str(swagger), "auth": {"clientId": "c", "clientSecret": "F_SECRET"}},
                                "g": {"commands": {"z": {"argv": ["true"]}}, "secrets": ["G_TOKEN"]}}})
    # the secrets a service's login and a commands entry name are the config's secrets too
    listed = json.loads(d.cli("secrets", "list", "--json").stdout)["secrets"]
    assert {(s["server"], s["name"]) for s in listed} == {("f", "F_SECRET"), ("g", "G_TOKEN")}, listed
    out = d.cli("config", "check")
    assert out.returncode != 0 and "is a Swagger 2.0 document; mcpx reads OpenAPI 3.0 and 3.1" in out.stderr, out
    assert "servers.b.commands.x.argv: command 'no-such-program' not found on its PATH" in out.stderr
    assert "servers.c.commands.y.cwd: " in out.stderr and "mcpx-no-such-directory' is not a directory" in out.stderr
