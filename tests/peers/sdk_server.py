"""An upstream written with the official mcp SDK that asks with plain ctx.elicit (the legacy back-channel).

Each tool reports exactly what it received, so a test can check the upstream got the very answer given.
Run: `python sdk_server.py` (stdio) or `python sdk_server.py --http PORT` (Streamable HTTP).
"""

import asyncio
import json
import os
import signal
import sys
from typing import Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

app = MCPServer("sdk-peer")


class Repo(BaseModel):
    repo: str = Field(description="owner/name")


class Issue(BaseModel):
    title: str = Field(min_length=3)
    count: int = Field(ge=1, le=10)
    color: Literal["red", "green"] = "red"
    notify: bool = True


class Confirm(BaseModel):
    confirm: bool = Field(default=False, description="delete it?")


class Secret(BaseModel):
    api_token: str = Field(description="your API token")


class Release(BaseModel):
    """Four fields, one of each kind a person types or picks: free text, a number, one choice, several choices."""

    name: str = Field(min_length=2, description="what to call it")
    count: int = Field(ge=1, le=5, description="how many builds")
    channel: Literal["stable", "beta"] = "stable"
    targets: list[Literal["linux", "mac", "windows"]] = Field(default_factory=list, description="where it ships")


def report(result) -> str:
    data = getattr(result, "data", None)
    return json.dumps({"action": result.action, "data": data.model_dump() if data is not None else None})


@app.tool()
async def need_repo(ctx: Context) -> str:
    return report(await ctx.elicit("Which repository should this go in?", Repo))


@app.tool()
async def file_issue(ctx: Context) -> str:
    return report(await ctx.elicit("Describe the issue", Issue))


@app.tool()
async def delete_branch(ctx: Context) -> str:
    return report(await ctx.elicit("Really delete branch main?", Confirm))


@app.tool()
async def delete_branch_why(ctx: Context) -> str:
    """delete_branch, asked with the SDK's low-level elicit, so that the reason mcpx sends with a decline (its _meta,
    which the high-level result drops) is reported too."""
    result = await ctx.request_context.session.elicit_form("Really delete branch main?",
                                                           Confirm.model_json_schema(),
                                                           related_request_id=ctx.request_id)
    return json.dumps({"action": result.action, "content": result.content,
                       "reason": (result.meta or {}).get("io.mcpx/reason")})


@app.tool()
async def use_token(ctx: Context, echo: bool = True) -> str:
    """With echo false the result never names the token, only its length: a test can then look for it elsewhere."""
    result = await ctx.elicit("Paste your API token", Secret)
    data = getattr(result, "data", None)
    return json.dumps({"action": result.action, "token_length": len(data.api_token) if data else None,
                       "token_echo": (data.api_token if echo else "[not echoed]") if data else None})


@app.tool()
async def plan_release(ctx: Context) -> str:
    return report(await ctx.elicit("Plan the release", Release))


@app.tool()
async def ask_twice(ctx: Context) -> str:
    first = await ctx.elicit("First: which repository?", Repo)
    second = await ctx.elicit("Second: really delete?", Confirm)
    return json.dumps([json.loads(report(first)), json.loads(report(second))])


@app.tool()
async def login(ctx: Context, complete_after: float = -1) -> str:
    """url mode; with complete_after >= 0 the server reports completion by itself after that many seconds."""
    eid = "login-42"
    if complete_after >= 0:
        async def finish() -> None:
            await asyncio.sleep(complete_after)
            await ctx.request_context.session.send_elicit_complete(eid)
        asyncio.get_running_loop().create_task(finish())
    result = await ctx.elicit_url("Sign in to Example", "https://example.com/login?x=1", eid)
    return json.dumps({"action": result.action})


@app.tool()
async def slow_ask(ctx: Context, before: float = 0.0, after: float = 0.0) -> str:
    await asyncio.sleep(before)
    result = await ctx.elicit("Which repository should this go in?", Repo)
    await asyncio.sleep(after)
    return report(result)


@app.tool()
async def sleepy(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@app.tool()
async def hold(ctx: Context) -> str:
    """Runs until sent SIGUSR2, having first reported progress that names its pid: a test knows the call is in
    flight in this very process, and decides when it ends."""
    released = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, released.set)
    await ctx.report_progress(0, message=f"holding in pid {os.getpid()} until SIGUSR2")
    await released.wait()
    return "released"


async def until_exists(path: str) -> None:
    while not await anyio.Path(path).exists():  # noqa: ASYNC110 -- the event is a file another process makes
        await asyncio.sleep(0.02)


@app.tool()
async def gate(ctx: Context, path: str, ask: bool = False, ask_when: str = "", started: str = "") -> str:
    """Runs until the file `path` exists (the test decides when each call ends: many calls of it may be in flight
    on this process at once); with ask, it first asks for a repository (once the file `ask_when` exists, if
    given). With `started`, it first makes that file (the test knows the call is in flight). Reports its pid and
    the answer."""
    if started:
        await anyio.Path(started).write_text(str(os.getpid()))
    answer = None
    if ask:
        if ask_when:
            await until_exists(ask_when)
        answer = json.loads(report(await ctx.elicit(f"Which repository for {os.path.basename(path)}?", Repo)))
    await until_exists(path)
    return json.dumps({"pid": os.getpid(), "gate": os.path.basename(path), "answer": answer})


@app.tool()
async def die_while_asking(ctx: Context) -> str:
    """Asks, and dies with code 3 when sent SIGUSR1: a test sends it once the question is open (its elicit.open
    record carries this process's pid), so the death comes while the question waits, however loaded the machine."""
    signal.signal(signal.SIGUSR1, lambda *_: os._exit(3))
    return report(await ctx.elicit("Which repository should this go in?", Repo))


@app.tool()
async def repo_then_issue(ctx: Context) -> str:
    """Two questions one after the other, neither the person's alone: a repository, then an issue's form."""
    first = await ctx.elicit("Which repository?", Repo)
    second = await ctx.elicit("Describe the issue", Issue)
    return json.dumps([json.loads(report(first)), json.loads(report(second))])


@app.tool()
async def roots(ctx: Context) -> str:
    listed = await ctx.request_context.session.list_roots()
    return json.dumps([str(r.uri) for r in listed.roots])


@app.tool()
async def declared(ctx: Context) -> str:
    """The capabilities the client declared to this server (their names)."""
    caps = ctx.client_capabilities
    return json.dumps(sorted(k for k, v in (caps.model_dump() if caps else {}).items() if v is not None))


@app.tool()
def echo(text: str = "") -> str:
    """Says the text back.

    Nothing more (a description in two paragraphs, as many servers write them)."""
    return f"echo: {text}"


@app.tool()
def pid() -> str:
    return str(os.getpid())


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
