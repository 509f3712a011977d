"""An OpenAPI document read, its `$ref`s resolved, and its operations as tools.

The document's references are resolved by jsonschema-path (docs/choices.md: what FastMCP's OpenAPI support
uses; `SchemaPath` follows a `$ref` wherever it is stepped through, in the document or in a file or URL it
names). This module only walks what it resolves: an operation's parameters and its body (JSON, a form or text:
BODY_MEDIA) become the tool's input schema, with every reference replaced by what it names (a schema that names
itself, directly or not, stops there as any value). OpenAPI 3.0 and 3.1, JSON or YAML; a Swagger 2.0 document
is refused, saying so.

jsonschema-path (with referencing and requests under it) and PyYAML are imported when a document is read, not with
this module: a daemon with no `openapi` entry never needs them.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import BaseModel, ConfigDict

from mcpx.services import styles
from mcpx.shared.errors import McpxError
from mcpx.shared.masking import shown_url

if TYPE_CHECKING:
    from jsonschema_path import SchemaPath

Location = Literal["path", "query", "header", "cookie"]
READ_LIMIT = 20 * 1024 * 1024  # a document larger than this is not an API description mcpx should load
FETCH_TIMEOUT = 30.0


class DocumentError(McpxError):
    """The document could not be read, is not OpenAPI 3, or does not hold; the message says which and where."""


class Parameter(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str  # as the service names it
    location: Location
    argument: str  # as the tool's input names it (the name, unless two places share it)
    required: bool
    style: str  # as OpenAPI 3 serializes it (services/styles.py); the location's default when not given
    explode: bool | None = None  # None: the style's default
    as_json: bool = False  # described by `content: application/json`: the value is sent as its JSON text


class Operation(BaseModel):
    """One operation of the document, as one tool."""

    model_config = ConfigDict(frozen=True)

    name: str
    method: str  # upper-case
    path: str  # the template, as the document writes it: /pets/{petId}
    operation_id: str | None
    summary: str | None
    description: str | None
    tags: list[str]
    parameters: list[Parameter]
    body: bool  # takes a body, as the argument "body"
    body_media: str | None = None  # its media type: JSON, form-urlencoded or text (BODY_MEDIA)
    body_encoding: dict[str, tuple[str, bool | None]] = {}  # a form's properties' style and explode, where given
    body_required: bool
    input_schema: dict[str, Any]

    def annotations(self) -> dict[str, Any]:
        """MCP's hints from the method: reading ones are read-only, DELETE destroys, PUT and DELETE repeat safely."""
        out: dict[str, Any] = {"title": self.summary} if self.summary else {}
        if self.method in ("GET", "HEAD", "OPTIONS"):
            return {**out, "readOnlyHint": True}
        out["readOnlyHint"] = False
        out["destructiveHint"] = self.method == "DELETE"
        out["idempotentHint"] = self.method in ("PUT", "DELETE")
        return out

    def tool(self) -> dict[str, Any]:
        words = [w for w in (self.summary, self.description) if w]
        text = "\n\n".join(dict.fromkeys(words)) or f"{self.method} {self.path}"
        return {"name": self.name, "description": text, "inputSchema": self.input_schema,
                "annotations": self.annotations()}

    def named_by(self, names: list[str]) -> bool:
        """Whether an include/exclude list names this operation: by operationId, tool name or a tag."""
        return any(n in (self.operation_id, self.name) or n in self.tags for n in names)


class Document(BaseModel):
    title: str
    version: str  # the OpenAPI version it declares
    servers: list[str]
    operations: list[Operation]
    skipped: list[str]  # operations that cannot be tools, and why


async def read(source: str, base: Path) -> dict[str, Any]:
    """The document at `source` (an http(s) URL, or a path relative to `base`) as data."""
    if re.match(r"^https?://", source):
        import aiohttp  # here: only a document fetched over HTTP needs it (`mcpx config check` reads a file's)

        try:
            timeout = aiohttp.ClientTimeout(total=FETCH_TIMEOUT)
            async with aiohttp.ClientSession(timeout=timeout) as http, http.get(source) as r:
                if r.status != 200:
                    raise DocumentError(f"{shown_url(source)} answered HTTP {r.status}")
                text = (await r.content.read(READ_LIMIT + 1)).decode("utf-8", errors="replace")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise DocumentError(f"{shown_url(source)} could not be fetched: {exc or type(exc).__name__}") from None
    else:
        path = base / source
        try:
            text = await asyncio.to_thread(lambda: path.expanduser().read_text("utf-8"))
        except OSError as exc:
            raise DocumentError(f"{path} cannot be read: {exc.strerror}") from None
    if len(text) > READ_LIMIT:
        raise DocumentError(f"{shown_url(source)} is larger than {READ_LIMIT // (1024 * 1024)} MiB")
    return parse_text(text, shown_url(source))


def parse_text(text: str, where: str) -> dict[str, Any]:
    import yaml

    try:
        data = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise DocumentError(f"{where} is neither JSON nor YAML: {exc}") from None
    if not isinstance(data, dict):
        raise DocumentError(f"{where} is not an OpenAPI document (its top level is not an object)")
    return data


def document(raw: dict[str, Any], where: str) -> Document:
    """The document's operations as tools; DocumentError when it is not OpenAPI 3.0 or 3.1."""
    from jsonschema_path import SchemaPath

    if "swagger" in raw:
        raise DocumentError(f"{where} is a Swagger {raw.get('swagger')} document; mcpx reads OpenAPI 3.0 and 3.1 "
                            "(convert it first, e.g. with swagger2openapi or editor.swagger.io)")
    version = str(raw.get("openapi", ""))
    if not re.match(r"^3\.[01]\.", version):
        raise DocumentError(f"{where} is not an OpenAPI 3.0 or 3.1 document "
                            f"(its 'openapi' is {version or 'missing'!r})")
    spec = SchemaPath.from_dict(raw)
    info = raw.get("info")
    title = info.get("title") if isinstance(info, dict) else None
    servers = [s["url"] for s in raw.get("servers") or [] if isinstance(s, dict) and isinstance(s.get("url"), str)]
    operations: list[Operation] = []
    skipped: list[str] = []
    taken: set[str] = set()
    if "paths" in spec:
        for template, item in (spec / "paths").str_items():
            shared = _parameters(item)
            for method in ("get", "head", "options", "post", "put", "patch", "delete", "trace"):
                if method not in item:
                    continue
                try:
                    op = _operation(template, method.upper(), item / method, shared, taken)
                except (DocumentError, KeyError, TypeError, ValueError) as exc:
                    skipped.append(f"{method.upper()} {template}: {exc}")
                    continue
                taken.add(op.name)
                operations.append(op)
    return Document(title=str(title or where), version=version, servers=servers, operations=operations,
                    skipped=skipped)


def _parameters(at: SchemaPath) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    if "parameters" not in at:
        return out
    for i in range(len(list((at / "parameters").keys()))):
        p = at / "parameters" / i
        value = p.read_value()
        media = [m for m in value.get("content") or {} if _is_json(m)]
        entry = {"name": value["name"], "in": value["in"], "required": bool(value.get("required")),
                 "description": value.get("description"), "style": value.get("style"),
                 "explode": value.get("explode"), "as_json": bool(media),
                 "schema": (schema_at(p / "content" / media[0]) if media else schema_at(p)) or {"type": "string"}}
        out[(entry["name"], entry["in"])] = entry
    return out


def _tool_name(operation_id: str | None, method: str, template: str, taken: set[str]) -> str:
    base = operation_id or f"{method.lower()}_{template}"
    name = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_-]", "_", base)).strip("_")[:60] or method.lower()
    out, n = name, 2
    while out in taken:
        out, n = f"{name}_{n}", n + 1
    return out


def _operation(template: str, method: str, at: SchemaPath, shared: dict[tuple[str, str], dict[str, Any]],
               taken: set[str]) -> Operation:
    value = at.read_value()
    params = {**shared, **_parameters(at)}
    properties: dict[str, Any] = {}
    required: list[str] = []
    parameters: list[Parameter] = []
    names = [name for name, _ in params]
    for (name, where), p in params.items():
        if where not in ("path", "query", "header", "cookie"):
            raise DocumentError(f"parameter {name!r} is in {where!r}, not path, query, header or cookie")
        argument = name if names.count(name) == 1 and name != "body" else f"{where}_{name}"
        schema = dict(p["schema"])
        if p["description"] and "description" not in schema:
            schema["description"] = p["description"]
        properties[argument] = schema
        must = where == "path" or p["required"]
        if must:
            required.append(argument)
        style = p["style"] or styles.DEFAULT[where]
        if not styles.ok(where, style):
            raise DocumentError(f"its {where} parameter {name!r} has style {style!r}, which mcpx does not send (a "
                                f"{where} parameter's styles: {', '.join(styles.STYLES[where])})")
        parameters.append(Parameter(name=name, location=cast(Location, where), argument=argument, required=must,
                                    style=style, explode=p["explode"], as_json=p["as_json"]))
    body = body_required = False
    body_media: str | None = None
    encoding: dict[str, tuple[str, bool | None]] = {}
    if "requestBody" in at:
        rb = at / "requestBody"
        content = rb / "content" if "content" in rb else None
        offered = content.str_keys() if content is not None else []
        media = next((m for kind in BODY_MEDIA for m in offered if _media_kind(m) == kind), None)
        body_required = bool((rb.read_value() or {}).get("required"))
        if media is None and body_required:
            raise DocumentError(f"its request body is {' or '.join(offered) or 'of no media type'}, which mcpx does "
                                f"not send (it sends {', '.join(BODY_MEDIA)})")
        if media is not None and content is not None:
            body, body_media = True, media
            m = content / media
            kind = _media_kind(media)
            properties["body"] = schema_at(m) or ({"type": "string"} if kind == "text/*" else {})
            if kind != "application/json" and isinstance(properties["body"], dict):  # as the service reads it
                properties["body"].setdefault("description", f"sent as {media}")
            if kind == "application/x-www-form-urlencoded":
                for prop, how in ((m.read_value() or {}).get("encoding") or {}).items():
                    if isinstance(how, dict) and (how.get("style") or how.get("explode") is not None):
                        encoding[prop] = (how.get("style") or "form", how.get("explode"))
                        if not styles.ok("query", encoding[prop][0]):
                            raise DocumentError(f"its form field {prop!r} has style {encoding[prop][0]!r}, which "
                                                f"mcpx does not send (a form's styles: "
                                                f"{', '.join(styles.STYLES['query'])})")
            if body_required:
                required.append("body")
    inputs: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        inputs["required"] = required
    operation_id = value.get("operationId") if isinstance(value.get("operationId"), str) else None
    return Operation(name=_tool_name(operation_id, method, template, taken), method=method, path=template,
                     operation_id=operation_id, summary=value.get("summary"), description=value.get("description"),
                     tags=[t for t in value.get("tags") or [] if isinstance(t, str)], parameters=parameters,
                     body=body, body_media=body_media, body_encoding=encoding, body_required=body_required,
                     input_schema=inputs)


# the request bodies mcpx sends, in the order it prefers them when an operation offers several
BODY_MEDIA = ("application/json", "application/x-www-form-urlencoded", "text/*")


def _is_json(media: str) -> bool:
    base = media.split(";")[0].strip().lower()
    return base == "application/json" or base.endswith("+json")


def _media_kind(media: str) -> str | None:
    """Which of BODY_MEDIA a media type is (JSON and +json; a form; any text/ type), or None."""
    base = media.split(";")[0].strip().lower()
    if _is_json(base):
        return "application/json"
    if base == "application/x-www-form-urlencoded":
        return base
    return "text/*" if base.startswith("text/") else None


def schema_at(at: SchemaPath) -> Any:
    """The `schema` of a parameter or media type, resolved (None when it has none)."""
    value = at.read_value()
    return _child(at / "schema", value["schema"], frozenset()) if "schema" in value else None


def resolved(at: SchemaPath, seen: frozenset[str] = frozenset()) -> Any:
    """The value at `at` with each `$ref` in it replaced by what jsonschema-path resolves it to. A reference met
    again inside itself (a tree's node holding nodes) is not followed a second time: it stands as any value."""
    value = at.read_value()
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, child in value.items():
            out[key] = _child(at / key, child, seen)
        return out
    if isinstance(value, list):
        return [_child(at / i, child, seen) for i, child in enumerate(value)]
    return value


def _child(at: SchemaPath, raw: Any, seen: frozenset[str]) -> Any:
    if isinstance(raw, dict) and isinstance(raw.get("$ref"), str):
        ref = raw["$ref"]
        if ref in seen:
            return {"description": f"(the schema {ref}, again)"}
        return resolved(at, seen | {ref})
    if isinstance(raw, (dict, list)):
        return resolved(at, seen)
    return raw
