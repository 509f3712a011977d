"""mcpx's upstream client as the client under test of the official MCP conformance suite.

The suite (`conformance client --command "<python> tests/conformance/mcpx_client.py"`) starts a
mock MCP server, appends its URL as the last argument and runs this script under /bin/sh -c,
with MCP_CONFORMANCE_SCENARIO naming the scenario (the 0.2 alphas also set
MCP_CONFORMANCE_PROTOCOL_VERSION). Nothing here speaks MCP: it starts a real `mcpx daemon` in a
throw-away MCPX_HOME whose only server is {"under_test": {"url": <URL>}} and drives it over its
/v1 REST API on the unix socket, exactly as a person or a script would. Every byte the mock sees
comes from mcpx's own upstream client (sidecar/mcpx/upstream/connection.py and
sidecar/mcpx/mcp/http_client.py).

    GET  /v1/tools/under_test                  -> the tools (forces the handshake: era probe, initialize)
    POST /v1/call/under_test/<tool>            -> 200 {result} | 202 {elicitation, task}
    POST /v1/elicit/<id>/accept {"content"}    -> answer a question (the broker fills schema defaults)
    GET  /v1/tasks/<task>/result?timeout=30    -> the call's result

Exit 0 when the scenario was driven to its end, 1 with a message on stderr (and the daemon log
tail) otherwise, 2 on usage errors. Env knobs:
    MCPX_CONFORMANCE_KEEP=1   keep the temporary MCPX_HOME (its path is printed on stderr)
    MCPX_CONFORMANCE_DEBUG=1  run the daemon with MCPX_LOG_LEVEL=debug (if the daemon honours it)
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/harness.py, however the suite runs us
from harness import Daemon, scratch_daemon

SERVER = "under_test"
START_TIMEOUT = 20.0
CALL_WAIT = 3.0
# The whole scenario, daemon start to stop, must end before the suite's client timeout (30 s by
# default), or the suite kills us without showing our stderr.
DEADLINE = float(os.environ.get("MCPX_CONFORMANCE_DEADLINE", "25"))


class ScenarioFailed(Exception):
    """The scenario could not be driven through mcpx; the message says at which step and why."""


def log(msg: str) -> None:
    print(f"mcpx_client: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the REST calls


class Rest:
    def __init__(self, http: aiohttp.ClientSession) -> None:
        self.http = http
        self.step = "starting"  # what we wait for now, for the message when the deadline passes

    async def _json(self, resp: aiohttp.ClientResponse) -> Any:
        text = await resp.text()
        try:
            return json.loads(text) if text else None
        except json.JSONDecodeError:
            return text

    async def tools(self) -> list[dict[str, Any]]:
        self.step = f"GET /v1/tools/{SERVER} (mcpx connecting to the server and listing its tools)"
        async with self.http.get(f"/v1/tools/{SERVER}") as r:
            body = await self._json(r)
            if r.status != 200:
                raise ScenarioFailed(f"GET /v1/tools/{SERVER} -> HTTP {r.status}: {body}")
        tools = (body.get("servers") or {}).get(SERVER)
        if not isinstance(tools, list):
            raise ScenarioFailed(f"GET /v1/tools/{SERVER}: no tool list in {body}")
        log(f"tools: {[t.get('name') for t in tools]}")
        return tools

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        self.step = f"POST /v1/call/{SERVER}/{tool} (the call to complete or ask a question)"
        # ?wait: a call that neither completes nor asks within CALL_WAIT s answers 202 "running"
        async with self.http.post(f"/v1/call/{SERVER}/{tool}", json={"arguments": arguments or {}},
                                  params={"wait": str(CALL_WAIT)}) as r:
            body = await self._json(r)
            log(f"POST /v1/call/{SERVER}/{tool} -> {r.status}")
            if r.status not in (200, 202):
                raise ScenarioFailed(f"POST /v1/call/{SERVER}/{tool} -> HTTP {r.status}: {body}")
            return r.status, body

    async def question(self, tool: str, status: int, body: dict[str, Any]) -> dict[str, Any]:
        """The call's open question; waits for one if the call said only `running`."""
        if status != 202:
            raise ScenarioFailed(f"{tool}: expected the call to wait for input (202), it answered {status}: {body}")
        self.step = (f"{tool}: the call (task {body.get('task')}) to open a question; it is "
                     f"{body.get('status')!r} and no question has reached mcpx")
        deadline = time.monotonic() + 20
        while not body.get("elicitation"):
            if time.monotonic() > deadline:
                raise ScenarioFailed(f"{tool}: the call is {body.get('status')!r} but no question opened: {body}")
            await asyncio.sleep(0.1)
            async with self.http.get(f"/v1/tasks/{body['task']}") as r:
                doc = await self._json(r)
            if doc.get("state") in ("completed", "failed", "cancelled"):
                raise ScenarioFailed(f"{tool}: the call ended {doc.get('state')} without asking: {doc}")
            async with self.http.get(f"/v1/tasks/{body['task']}/result", params={"timeout": "0"}) as r:
                body = {**body, **(await self._json(r) or {})}
        q = body["elicitation"]
        log(f"{tool}: question {q.get('id')} ({q.get('mode')}, audience {q.get('audience')}): {q.get('message')!r} "
            f"schema={json.dumps(q.get('requestedSchema'))}")
        return q

    async def accept(self, eid: str, content: dict[str, Any]) -> dict[str, Any]:
        self.step = f"POST /v1/elicit/{eid}/accept"
        async with self.http.post(f"/v1/elicit/{eid}/accept", json={"content": content}) as r:
            body = await self._json(r)
            if r.status != 200:
                raise ScenarioFailed(f"POST /v1/elicit/{eid}/accept {json.dumps(content)} -> HTTP {r.status}: {body}")
        stored = (body.get("answer") or {}).get("content")
        log(f"accepted {eid} with {json.dumps(content)} -> stored answer {json.dumps(stored)}")
        return body

    async def result(self, task: str, timeout: float = 30) -> dict[str, Any]:
        self.step = f"GET /v1/tasks/{task}/result (the call's result)"
        async with self.http.get(f"/v1/tasks/{task}/result", params={"timeout": str(timeout)}) as r:
            body = await self._json(r)
            if r.status != 200:
                raise ScenarioFailed(f"GET /v1/tasks/{task}/result -> HTTP {r.status} (still waiting): {body}")
        if body.get("state") != "completed":
            raise ScenarioFailed(f"task {task} ended {body.get('state')}: {body.get('error')} ({body})")
        return body["result"]

    async def completed(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """A call expected to complete without a question."""
        status, body = await self.call(tool, arguments)
        if status != 200:
            raise ScenarioFailed(f"{tool}: expected a result (200), the call waits (202): {body}")
        return body["result"]


def text_of(result: dict[str, Any]) -> str:
    return " ".join(c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict))


def expect_text(tool: str, result: dict[str, Any], needle: str) -> None:
    text = text_of(result)
    log(f"{tool}: result text {text!r}")
    if result.get("isError"):
        raise ScenarioFailed(f"{tool}: the server answered with an error result: {result}")
    if needle not in text:
        raise ScenarioFailed(f"{tool}: expected {needle!r} in the result, got {result}")


def need_tools(tools: list[dict[str, Any]], *names: str) -> None:
    have = {t.get("name") for t in tools}
    missing = [n for n in names if n not in have]
    if missing:
        raise ScenarioFailed(f"the server's tools, as listed through mcpx, lack {missing} (have {sorted(have)})")


# ---------------------------------------------------------------- the scenarios


async def scenario_initialize(rest: Rest) -> None:
    # Listing tools makes mcpx reach the server: era probe (server/discover), then initialize.
    await rest.tools()


async def scenario_tools_call(rest: Rest) -> None:
    tools = await rest.tools()
    need_tools(tools, "add_numbers")
    result = await rest.completed("add_numbers", {"a": 2, "b": 3})
    expect_text("add_numbers", result, "5")


async def scenario_sep1034_defaults(rest: Rest) -> None:
    tool = "test_client_elicitation_defaults"
    need_tools(await rest.tools(), tool)
    status, body = await rest.call(tool, {})
    q = await rest.question(tool, status, body)
    schema = q.get("requestedSchema") or {}
    # The person accepts without typing anything: only required fields (there are none here);
    # every default must come from mcpx (SEP-1034: the client applies schema defaults).
    content = {k: schema["properties"][k]["default"] for k in schema.get("required") or []
               if "default" in schema["properties"].get(k, {})}
    await rest.accept(q["id"], content)
    result = await rest.result(body["task"])
    expect_text(tool, result, "Elicitation completed")


async def scenario_sep2322(rest: Rest) -> None:
    need_tools(await rest.tools(), "test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state",
               "test_mrtr_no_result_type")
    # 1) echo-state: round 1 comes back input_required with a requestState; while its question
    #    waits, an unrelated call must carry neither inputResponses nor requestState.
    status, echo = await rest.call("test_mrtr_echo_state", {})
    q = await rest.question("test_mrtr_echo_state", status, echo)
    expect_text("test_mrtr_unrelated", await rest.completed("test_mrtr_unrelated", {}), "unrelated-ok")
    await rest.accept(q["id"], {"confirmed": True})
    expect_text("test_mrtr_echo_state", await rest.result(echo["task"]), "echo-state-ok")
    # 2) no-state: the retry must not invent a requestState.
    status, nostate = await rest.call("test_mrtr_no_state", {})
    q = await rest.question("test_mrtr_no_state", status, nostate)
    await rest.accept(q["id"], {"confirmed": True})
    expect_text("test_mrtr_no_state", await rest.result(nostate["task"]), "no-state-ok")
    # 3) a result without resultType is complete.
    expect_text("test_mrtr_no_result_type", await rest.completed("test_mrtr_no_result_type", {}),
                "no-result-type-test-ok")


def context() -> dict[str, Any]:
    """MCP_CONFORMANCE_CONTEXT: scenario data some scenarios hand the client (e.g. the calls to make)."""
    try:
        value = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def sample_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Some valid-looking value for every required property (for tools the suite only wants called)."""
    props = schema.get("properties") or {}
    samples = {"string": "x", "integer": 1, "number": 1.5, "boolean": True, "null": None, "object": {}, "array": []}
    return {k: samples.get((props.get(k) or {}).get("type"), "x") for k in schema.get("required") or []}


async def scenario_standard_headers(rest: Rest) -> None:
    # SEP-2243 Mcp-Method / Mcp-Name on every POST (resources and prompts are not on mcpx's /v1 API)
    tools = await rest.tools()
    for t in tools:
        await rest.completed(t["name"], sample_arguments(t.get("inputSchema") or {}))


async def scenario_custom_headers(rest: Rest) -> None:
    # SEP-2243 x-mcp-header -> Mcp-Param-*: the suite names the calls to make in its context
    await rest.tools()
    calls = context().get("toolCalls") or []
    if not calls:
        raise ScenarioFailed(f"MCP_CONFORMANCE_CONTEXT has no toolCalls: {os.environ.get('MCP_CONFORMANCE_CONTEXT')}")
    for c in calls:
        await rest.completed(c["name"], c.get("arguments") or {})


async def scenario_invalid_tool_headers(rest: Rest) -> None:
    # Call every tool mcpx exposes: mcpx must have dropped those with an invalid x-mcp-header.
    for t in await rest.tools():
        args = {"region": "us-west1"} if t["name"] == "valid_tool" else sample_arguments(t.get("inputSchema") or {})
        await rest.call(t["name"], args)


async def scenario_schema_preservation(rest: Rest) -> None:
    # The focal tool's inputSchema, as mcpx lists it, goes back verbatim as an argument.
    tools = await rest.tools()
    need_tools(tools, "json_schema_2020_12_tool", "json_schema_echo")
    focal = next(t for t in tools if t["name"] == "json_schema_2020_12_tool")
    await rest.completed("json_schema_echo", {"schema": focal.get("inputSchema")})


async def scenario_sse_retry(rest: Rest) -> None:
    # The server closes the tools/call SSE stream after a priming event (retry: 500); the client must
    # reconnect with GET (Last-Event-ID) after 500 ms and read the result there (SEP-1699).
    need_tools(await rest.tools(), "test_reconnection")
    status, body = await rest.call("test_reconnection", {})
    result = body["result"] if status == 200 else await rest.result(body["task"], timeout=10)
    expect_text("test_reconnection", result, "Reconnection test completed")


async def scenario_generic(rest: Rest) -> None:
    await rest.tools()


SCENARIOS = {
    "initialize": scenario_initialize,
    "tools_call": scenario_tools_call,
    "elicitation-sep1034-client-defaults": scenario_sep1034_defaults,
    "sep-2322-client-request-state": scenario_sep2322,
    "http-standard-headers": scenario_standard_headers,
    "http-custom-headers": scenario_custom_headers,
    "http-invalid-tool-headers": scenario_invalid_tool_headers,
    "json-schema-2020-12-preservation": scenario_schema_preservation,
    "sse-retry": scenario_sse_retry,
    # request-metadata, json-schema-ref-no-deref: listing tools is the whole exercise
}


class Terminated(Exception):
    pass


def on_signal(signum: int, _frame: Any) -> None:
    raise Terminated(f"terminated by signal {signum}")


async def orphaned(parent: int) -> None:
    """Return once our parent is gone: the suite runs us under /bin/sh -c and, on its --timeout,
    kills only the shell; we then stop the daemon and exit instead of lingering."""
    while os.getppid() == parent:  # noqa: ASYNC110 -- no event tells a process its parent died (short of pidfd)
        await asyncio.sleep(0.2)


async def run(daemon: Daemon, scenario: str, budget: float, parent: int) -> None:
    async with daemon.session() as http:
        rest = Rest(http)
        work = asyncio.ensure_future(asyncio.wait_for(SCENARIOS.get(scenario, scenario_generic)(rest), budget))
        watch = asyncio.ensure_future(orphaned(parent))
        try:
            await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                work.cancel()
                raise Terminated(f"the process that ran us ({parent}) went away, the suite's client timeout? "
                                 f"We were waiting for {rest.step}")
            try:
                work.result()
            except TimeoutError:
                raise ScenarioFailed(f"the scenario did not finish within {DEADLINE:.0f}s "
                                     f"(MCPX_CONFORMANCE_DEADLINE); still waiting for {rest.step}") from None
        finally:
            watch.cancel()
            if not work.done():
                work.cancel()
            await asyncio.gather(work, watch, return_exceptions=True)


def daemon_for(url: str) -> Daemon:
    """A daemon (not started) in a throw-away MCPX_HOME whose one server is the suite's mock at `url`."""
    debug = {"MCPX_LOG_LEVEL": "debug"} if os.environ.get("MCPX_CONFORMANCE_DEBUG") == "1" else {}
    daemon = scratch_daemon("mcpx-conformance-", {"servers": {SERVER: {"url": url}}}, extra_env=debug)
    daemon.keep = os.environ.get("MCPX_CONFORMANCE_KEEP") == "1"
    if daemon.keep:
        log(f"keeping MCPX_HOME {daemon.home}")
    return daemon


def main() -> int:
    if len(sys.argv) < 2 or not sys.argv[-1].startswith(("http://", "https://")):
        print("usage: mcpx_client.py [...] <server-url>   (MCP_CONFORMANCE_SCENARIO names the scenario)",
              file=sys.stderr)
        return 2
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    log(f"scenario={scenario!r} protocol={os.environ.get('MCP_CONFORMANCE_PROTOCOL_VERSION')!r} url={url}")
    if scenario not in SCENARIOS:
        log(f"no script for scenario {scenario!r}: only listing tools")
    started = time.monotonic()
    parent = os.getppid()
    signal.signal(signal.SIGTERM, on_signal)
    daemon = daemon_for(url)
    failure: str | None = None
    try:
        daemon.start(START_TIMEOUT)
        log(f"daemon pid {daemon.pid} on {daemon.socket}")
        asyncio.run(run(daemon, scenario, max(1.0, DEADLINE - (time.monotonic() - started)), parent))
    except (ScenarioFailed, Terminated) as exc:
        failure = str(exc)
    except Exception as exc:
        failure = f"{type(exc).__name__}: {exc}"
    finally:
        rc = daemon.stop()
        if rc not in (None, 0) and failure is None:
            failure = f"the mcpx daemon exited with {rc} on SIGTERM"
    if failure is not None:
        log(f"FAILED ({scenario}): {failure}")
        print(f"--- daemon.stderr (the end) ---\n{daemon.tail()}", file=sys.stderr)
    else:
        log(f"OK ({scenario})")
    daemon.cleanup()
    return 1 if failure is not None else 0


if __name__ == "__main__":
    sys.exit(main())
