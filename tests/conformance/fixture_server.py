"""Our own conformance fixture server: the official MCP conformance suite's SERVER scenarios, served by
the `mcp` SDK (2.3.0 `MCPServer`) on Streamable HTTP, both eras.

It mirrors the suite's reference "everything server" (examples/servers/typescript in
github.com/modelcontextprotocol/conformance, not shipped in the npm package) closely enough for the
scenarios to pass when run against it directly; that run is the baseline
(tests/conformance/test_conformance_server_direct.py) to compare with the same scenarios run through mcpx's
own /mcp endpoint, with this server behind mcpx.

  2025-11-25 (initialize, sessions, server->client requests mid-call):
    tools-*          test_simple_text, test_image_content, test_audio_content, test_embedded_resource,
                     test_multiple_content_types, test_tool_with_logging, test_tool_with_progress,
                     test_error_handling, test_sampling, test_elicitation, test_reconnection (SSE polling)
    json-schema-2020-12            json_schema_2020_12_tool (raw 2020-12 inputSchema in tools/list)
    elicitation-sep1034-defaults   test_elicitation_sep1034_defaults
    elicitation-sep1330-enums      test_elicitation_sep1330_enums
    resources-*      test://static-text, test://static-binary, test://template/{id}/data,
                     test://watched-resource, resources/subscribe + unsubscribe
    prompts-*        test_simple_prompt, test_prompt_with_arguments, test_prompt_with_embedded_resource,
                     test_prompt_with_image
    logging-set-level, completion-complete, ping, dns-rebinding-protection (SDK TransportSecurity,
                     automatic for host 127.0.0.1)
  2026-07-28 (stateless; InputRequiredResult, SEP-2322):
    input-required-result-*        test_input_required_result_* tools and the
                                   test_input_required_result_prompt prompt

Run:  python tests/conformance/fixture_server.py PORT      (binds 127.0.0.1; endpoint /mcp)
"""

from __future__ import annotations

import base64
import itertools
import json
import sys
from typing import Annotated, Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.mcpserver import Context, MCPServer, UserMessage
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPError
from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY, InputRequiredResult
from pydantic import Field

# 1x1 red PNG and a minimal WAV, the reference server's test payloads
TEST_IMAGE_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
TEST_AUDIO_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

# SEP-1613 ($schema, $defs, additionalProperties) plus the SEP-2106 vocabulary the 0.2 suite checks
# ($anchor, allOf/anyOf, if/then/else), as in the reference server
JSON_SCHEMA_2020_12_INPUT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

mcp = MCPServer(name="mcpx-conformance-fixture", version="1.0.0")


def text(t: str) -> types.TextContent:
    return types.TextContent(type="text", text=t)


def image() -> types.ImageContent:
    return types.ImageContent(type="image", data=TEST_IMAGE_BASE64, mime_type="image/png")


def embedded(uri: str, mime: str, body: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(type="resource",
                                  resource=types.TextResourceContents(uri=uri, mime_type=mime, text=body))


# ─── tools (2025-11-25) ─────────────────────────────────────────────────────


@mcp.tool(description="Tests simple text content response")
def test_simple_text() -> list[types.ContentBlock]:
    return [text("This is a simple text response for testing.")]


@mcp.tool(description="Tests image content response")
def test_image_content() -> list[types.ContentBlock]:
    return [image()]


@mcp.tool(description="Tests audio content response")
def test_audio_content() -> list[types.ContentBlock]:
    return [types.AudioContent(type="audio", data=TEST_AUDIO_BASE64, mime_type="audio/wav")]


@mcp.tool(description="Tests embedded resource content response")
def test_embedded_resource() -> list[types.ContentBlock]:
    return [embedded("test://embedded-resource", "text/plain", "This is an embedded resource content.")]


@mcp.tool(description="Tests response with multiple content types (text, image, resource)")
def test_multiple_content_types() -> list[types.ContentBlock]:
    return [
        text("Multiple content types test:"),
        image(),
        embedded("test://mixed-content-resource", "application/json", json.dumps({"test": "data", "value": 123})),
    ]


@mcp.tool(description="Tests tool that emits log messages during execution")
async def test_tool_with_logging(ctx: Context) -> list[types.ContentBlock]:
    await ctx.info("Tool execution started")
    await anyio.sleep(0.05)
    await ctx.info("Tool processing data")
    await anyio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return [text("Tool with logging executed successfully")]


@mcp.tool(description="Tests tool that reports progress notifications")
async def test_tool_with_progress(ctx: Context) -> list[types.ContentBlock]:
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        if step != 100:
            await anyio.sleep(0.05)
    meta = ctx.request_context.meta if ctx.request_context is not None else None
    token = getattr(meta, "progress_token", None) if meta is not None else None
    return [text(str(token if token is not None else 0))]


@mcp.tool(description="Tests error response handling")
def test_error_handling() -> str:
    raise RuntimeError("This tool intentionally returns an error for testing")


@mcp.tool(description="Tests SSE stream disconnection and client reconnection (SEP-1699). Server will close the "
                      "stream mid-call and send the result after client reconnects.")
async def test_reconnection(ctx: Context) -> list[types.ContentBlock]:
    await ctx.close_sse_stream()
    await anyio.sleep(0.1)
    return [text("Reconnection test completed successfully. If you received this, the client properly reconnected "
                 "after stream closure.")]


@mcp.tool(description="Tests server-initiated sampling (LLM completion request)")
async def test_sampling(prompt: str, ctx: Context) -> list[types.ContentBlock]:
    try:
        r = await ctx.session.create_message(
            messages=[types.SamplingMessage(role="user", content=text(prompt))], max_tokens=100,
            related_request_id=ctx.request_id)
    except Exception as exc:
        return [text(f"Sampling not supported or error: {exc}")]
    content = r.content if not isinstance(r.content, list) else (r.content[0] if r.content else None)
    return [text(f"LLM response: {getattr(content, 'text', None) or 'No response'}")]


async def _elicit(ctx: Context, message: str, schema: dict[str, Any]) -> types.ElicitResult:
    return await ctx.session.elicit_form(message=message, requested_schema=schema, related_request_id=ctx.request_id)


@mcp.tool(description="Tests server-initiated elicitation (user input request)")
async def test_elicitation(message: str, ctx: Context) -> str:
    r = await _elicit(ctx, message, {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    })
    return f"User response: action={r.action}, content={json.dumps(r.content or {})}"


@mcp.tool(description="Tests elicitation with default values per SEP-1034")
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    r = await _elicit(ctx, "Please review and update the form fields with defaults", {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
                       "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    })
    return f"Elicitation completed: action={r.action}, content={json.dumps(r.content or {})}"


@mcp.tool(description="Tests elicitation with enum schema improvements per SEP-1330")
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    r = await _elicit(ctx, "Please select options from the enum fields", {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "description": "Select one option",
                               "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}]},
            "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                           "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1,
                              "maxItems": 3, "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1,
                            "maxItems": 3, "items": {"anyOf": [
                                {"const": "value1", "title": "First Choice"},
                                {"const": "value2", "title": "Second Choice"},
                                {"const": "value3", "title": "Third Choice"}]}},
        },
        "required": [],
    })
    return f"Elicitation completed: action={r.action}, content={json.dumps(r.content or {})}"


@mcp.tool(description="Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)")
def json_schema_2020_12_tool(name: str | None = None, address: dict[str, Any] | None = None,
                             contactMethod: str | None = None, phone: str | None = None,
                             email: str | None = None) -> str:
    args = {"name": name, "address": address, "contactMethod": contactMethod, "phone": phone, "email": email}
    return f"JSON Schema 2020-12 tool called with: {json.dumps({k: v for k, v in args.items() if v is not None})}"


@mcp.tool(description="SEP-2243: its region argument is mirrored in the Mcp-Param-Region header")
def test_header_params(
        region: Annotated[str, Field(description="Region", json_schema_extra={"x-mcp-header": "Region"})],
        query: str = "") -> str:
    return f"region={region} query={query}"


@mcp.tool(description="Test tool requiring sampling")
async def test_missing_capability(ctx: Context) -> str:
    """server-stateless (SEP-2575): a client that did not declare sampling gets -32021 (HTTP 400)."""
    caps = ctx.client_capabilities
    if caps is None or caps.sampling is None:
        raise MCPError(code=MISSING_REQUIRED_CLIENT_CAPABILITY, message="MissingRequiredClientCapabilityError",
                       data={"requiredCapabilities": {"sampling": {}}})
    return "Success"


# tools/list: the SDK's list, except that the SEP-1613 tool shows its raw 2020-12 schema
_base_list_tools = mcp._lowlevel_server.get_request_handler("tools/list")
assert _base_list_tools is not None


async def _list_tools(ctx: Any, params: Any) -> Any:
    result = await _base_list_tools.handler(ctx, params)
    for tool in result.tools:
        if tool.name == "json_schema_2020_12_tool":
            tool.input_schema = JSON_SCHEMA_2020_12_INPUT_SCHEMA
    return result


mcp._lowlevel_server.add_request_handler("tools/list", _base_list_tools.params_type, _list_tools)


# ─── resources, prompts, logging, completion (2025-11-25) ───────────────────


@mcp.resource("test://static-text", name="static-text", title="Static Text Resource",
              description="A static text resource for testing", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", name="static-binary", title="Static Binary Resource",
              description="A static binary resource (image) for testing", mime_type="image/png")
def static_binary() -> bytes:
    return base64.b64decode(TEST_IMAGE_BASE64)


@mcp.resource("test://template/{id}/data", name="template", title="Resource Template",
              description="A resource template with parameter substitution", mime_type="application/json")
def template(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@mcp.resource("test://watched-resource", name="watched-resource", title="Watched Resource",
              description="A resource that auto-updates every 3 seconds", mime_type="text/plain")
def watched_resource() -> str:
    return "Watched resource content"


SUBSCRIPTIONS: set[str] = set()


async def _subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIPTIONS.add(str(params.uri))
    return types.EmptyResult()


async def _unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIPTIONS.discard(str(params.uri))
    return types.EmptyResult()


async def _set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


mcp._lowlevel_server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, _subscribe)
mcp._lowlevel_server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, _unsubscribe)
mcp._lowlevel_server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _set_level)


@mcp.completion()
async def complete(ref: Any, argument: Any, context: Any) -> types.Completion:
    return types.Completion(values=[], total=0, has_more=False)


@mcp.prompt(title="Simple Test Prompt", description="A simple prompt without arguments")
def test_simple_prompt() -> list[UserMessage]:
    return [UserMessage(text("This is a simple prompt for testing."))]


@mcp.prompt(title="Prompt With Arguments", description="A prompt with required arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    return [UserMessage(text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]


@mcp.prompt(title="Prompt With Embedded Resource", description="A prompt that includes an embedded resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    return [
        UserMessage(embedded(resourceUri, "text/plain",
                                                          "Embedded resource content for testing.")),
        UserMessage(text("Please process the embedded resource above.")),
    ]


@mcp.prompt(title="Prompt With Image", description="A prompt that includes image content")
def test_prompt_with_image() -> list[UserMessage]:
    return [
        UserMessage(image()),
        UserMessage(text("Please analyze the image above.")),
    ]


# ─── 2026-07-28 InputRequiredResult (SEP-2322) ──────────────────────────────


def _elicit_req(message: str, props: dict[str, Any], required: list[str]) -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(
        message=message, requested_schema={"type": "object", "properties": props, "required": required}))


def _sample_req(prompt: str, max_tokens: int) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(params=types.CreateMessageRequestParams(
        messages=[types.SamplingMessage(role="user", content=text(prompt))], max_tokens=max_tokens))


def _roots_req() -> types.ListRootsRequest:
    return types.ListRootsRequest()


def _need(**reqs: Any) -> InputRequiredResult:
    state = reqs.pop("_state", None)
    return InputRequiredResult(input_requests=reqs, request_state=state)


def _accepted(ctx: Context, key: str) -> dict[str, Any] | None:
    """Content of an accepted elicitation response under `key`, else None."""
    r = (ctx.input_responses or {}).get(key)
    if r is None:
        return None
    if hasattr(r, "model_dump"):
        r = r.model_dump(by_alias=True, exclude_none=True)
    if isinstance(r, dict) and r.get("action") == "accept" and isinstance(r.get("content"), dict):
        return r["content"]
    return None


def _has(ctx: Context, key: str) -> bool:
    return key in (ctx.input_responses or {})


def _user_name() -> types.ElicitRequest:
    return _elicit_req("What is your name?", {"name": {"type": "string"}}, ["name"])


@mcp.tool(description="SEP-2322: asks for the user's name with an InputRequiredResult (elicitation)")
async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
    content = _accepted(ctx, "user_name")
    if content is None or not isinstance(content.get("name"), str):
        return _need(user_name=_user_name())
    return f"Hello, {content['name']}!"


@mcp.tool(description='SEP-2322: asks the client for a sampling completion with an InputRequiredResult')
async def test_input_required_result_sampling(ctx: Context) -> str | InputRequiredResult:
    if not _has(ctx, "capital_question"):
        return _need(capital_question=_sample_req("What is the capital of France?", 100))
    r = ctx.input_responses["capital_question"]
    said = getattr(getattr(r, "content", None), "text", None) or str(r)
    return f"Sampling said: {said}"


@mcp.tool(description='SEP-2322: asks the client for its roots with an InputRequiredResult')
async def test_input_required_result_list_roots(ctx: Context) -> str | InputRequiredResult:
    if not _has(ctx, "client_roots"):
        return _need(client_roots=_roots_req())
    roots = getattr(ctx.input_responses["client_roots"], "roots", None) or []
    return "Roots: " + ", ".join(str(x.uri) for x in roots)


@mcp.tool(description='SEP-2322: round-trips an opaque requestState')
async def test_input_required_result_request_state(ctx: Context) -> str | InputRequiredResult:
    if ctx.request_state != "awaiting-confirm" or _accepted(ctx, "confirm") is None:
        return _need(confirm=_elicit_req("Please confirm", {"ok": {"type": "boolean"}}, ["ok"]),
                     _state="awaiting-confirm")
    return "state-ok: confirmed"


@mcp.tool(description='SEP-2322: elicitation, sampling and roots in one InputRequiredResult')
async def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequiredResult:
    keys = ("user_name", "greeting", "client_roots")
    if ctx.request_state != "multi-1" or not all(_has(ctx, k) for k in keys):
        return _need(user_name=_user_name(), greeting=_sample_req("Generate a greeting", 50),
                     client_roots=_roots_req(), _state="multi-1")
    return "all inputs received"


@mcp.tool(description='SEP-2322: two rounds of input, each with its own requestState')
async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
    if ctx.request_state == "round-2" and _accepted(ctx, "step2") is not None:
        return "multi-round complete"
    if ctx.request_state == "round-1" and _accepted(ctx, "step1") is not None:
        return _need(step2=_elicit_req("Step 2: What is your favorite color?", {"color": {"type": "string"}},
                                       ["color"]), _state="round-2")
    return _need(step1=_elicit_req("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"]),
                 _state="round-1")


@mcp.tool(description='SEP-2322: rejects a modified requestState (sealed by the SDK)')
async def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequiredResult:
    # Integrity comes from the SDK's RequestStateBoundary (sealed tokens): a modified
    # requestState never reaches this body.
    if ctx.request_state == "tamper-check" and _accepted(ctx, "confirm") is not None:
        return "state verified"
    return _need(confirm=_elicit_req("Please confirm", {"ok": {"type": "boolean"}}, ["ok"]), _state="tamper-check")


@mcp.tool(description='SEP-2322: asks only for what the client declared it can do')
async def test_input_required_result_capabilities(ctx: Context) -> str | InputRequiredResult:
    caps = ctx.client_capabilities
    if ctx.input_responses:
        return "capabilities flow complete"
    reqs: dict[str, Any] = {}
    if caps is not None and caps.sampling is not None:
        reqs["sample"] = _sample_req("Say hi", 20)
    if caps is not None and caps.elicitation is not None:
        reqs["ask"] = _user_name()
    if caps is not None and caps.roots is not None:
        reqs["roots"] = _roots_req()
    if not reqs:
        return "client declared no input capabilities"
    return _need(**reqs)


@mcp.prompt(description='SEP-2322: a prompt that needs input before it can be rendered')
async def test_input_required_result_prompt(ctx: Context) -> Any:
    content = _accepted(ctx, "user_context")
    if content is None:
        return _need(user_context=_elicit_req("What context should the prompt use?", {"context": {"type": "string"}},
                                              ["context"]))
    return f"Prompt with context: {content.get('context')}"


# ─── transport ──────────────────────────────────────────────────────────────


class MemoryEventStore(EventStore):
    """Resumability (SEP-1699) for test_reconnection: every event kept, replayed after Last-Event-ID."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, Any]] = []  # (event id, stream id, message or None)
        self._n = itertools.count(1)

    async def store_event(self, stream_id: str, message: Any) -> str:
        eid = f"{stream_id}::{next(self._n):08d}"
        self._events.append((eid, stream_id, message))
        return eid

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream = next((s for e, s, _ in self._events if e == last_event_id), None)
        if stream is None:
            return None
        after = False
        for eid, sid, msg in self._events:
            if eid == last_event_id:
                after = True
                continue
            if after and sid == stream and msg is not None:
                await send_callback(EventMessage(msg, eid))
        return stream


def app() -> Any:
    # host=127.0.0.1 makes the SDK enable DNS-rebinding protection (Host/Origin: 127.0.0.1,
    # localhost, [::1], any port).
    return mcp.streamable_http_app(host="127.0.0.1", event_store=MemoryEventStore(), retry_interval=500)


def main() -> None:
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        print("usage: fixture_server.py PORT", file=sys.stderr)
        sys.exit(2)
    uvicorn.run(app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")


if __name__ == "__main__":
    main()
