"""The opencode plugin's side of mcpx's contract, generated: the /v1 bodies' types and the names both sides share.

`/v1/openapi.json` comes from the one route table (api/table.py and its pydantic models); this module turns
its component schemas into TypeScript types, and writes beside them the names Python keeps (the id pattern,
the tool names, the plugin's levels, the `_meta` keys, the headers), into one checked-in file the plugin
imports. Regenerating must change nothing: `./dev test` and tests/unit/test_layers.py check it.

    python -m mcpx.daemon.typescript          # in a checkout: write plugin/opencode/lib/shared/generated.ts
    python -m mcpx.daemon.typescript --check  # exit 1, naming the command, when it is out of date
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, get_args

from mcpx.config.models import PluginLevel
from mcpx.daemon.app import build_api
from mcpx.presentation.rendering import ASK_TOOL
from mcpx.shared import ids
from mcpx.shared import names as keys
from mcpx.surface.own_tools import MCPX_TOOLS, SESSION_ARG

TARGET = Path("plugin/opencode/lib/shared/generated.ts")
COMMAND = ".venv/bin/python -m mcpx.daemon.typescript"
_NAME = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


def literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _key(name: str) -> str:
    return name if _NAME.match(name) else literal(name)


def _doc(text: str, indent: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("*/", "*\u2215").splitlines() if line.strip()]
    if len(lines) == 1:
        return [f"{indent}/** {lines[0]} */"]
    return [f"{indent}/**", *(f"{indent} * {line}" for line in lines), f"{indent} */"]


def ts_type(schema: dict[str, Any] | bool, indent: str = "") -> str:
    """One JSON Schema (as pydantic writes them for openapi.json) as a TypeScript type."""
    if schema is True or schema == {}:
        return "unknown"
    if schema is False:
        return "never"
    assert isinstance(schema, dict)
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "const" in schema:
        return literal(schema["const"])
    if "enum" in schema:
        return " | ".join(literal(v) for v in schema["enum"])
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return _union([ts_type(s, indent) for s in schema[union]])
    if "allOf" in schema:
        parts = [ts_type(s, indent) for s in schema["allOf"]]
        return parts[0] if len(parts) == 1 else " & ".join(f"({p})" for p in parts)
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([ts_type({**schema, "type": k}, indent) for k in kind])
    if kind == "string":
        return "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    if kind == "array":
        if "prefixItems" in schema:
            return "[" + ", ".join(ts_type(s, indent) for s in schema["prefixItems"]) + "]"
        item = ts_type(schema.get("items", {}), indent)
        return f"({item})[]" if " " in item else f"{item}[]"
    if kind == "object" or "properties" in schema:
        return _object(schema, indent)
    return "unknown"


def _union(parts: list[str]) -> str:
    out: list[str] = []
    for p in parts:
        if p not in out:
            out.append(p)
    return "unknown" if "unknown" in out else " | ".join(out)


def _object(schema: dict[str, Any], indent: str) -> str:
    props: dict[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    if not props:
        if extra is False:
            return "Record<string, never>"
        return f"Record<string, {ts_type(extra if isinstance(extra, dict) else True, indent)}>"
    required = set(schema.get("required", []))
    inner = indent + "  "
    lines = ["{"]
    for name, prop in props.items():
        if isinstance(prop, dict) and prop.get("description"):
            lines += _doc(str(prop["description"]), inner)
        optional = "" if name in required else "?"
        lines.append(f"{inner}{_key(name)}{optional}: {ts_type(prop, inner)}")
    if isinstance(extra, dict) or extra is True:
        lines.append(f"{inner}[key: string]: unknown")
    lines.append(indent + "}")
    return "\n".join(lines)


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(w.capitalize() for w in rest)


def _base(schema: dict[str, Any], others: dict[str, Any]) -> str | None:
    """The component `schema` extends (a pydantic subclass: all of its fields, as they are, and more), if any: the
    one with the most fields."""
    props, required = schema.get("properties", {}), set(schema.get("required", []))
    best: tuple[int, str] | None = None
    for name, other in others.items():
        theirs = other.get("properties", {}) if isinstance(other, dict) else {}
        if other is schema or len(theirs) < 2 or len(theirs) >= len(props):
            continue
        theirs_required = set(other.get("required", []))
        same = all(props.get(k) == v and (k in required) == (k in theirs_required) for k, v in theirs.items())
        if same and (best is None or len(theirs) > best[0]):
            best = (len(theirs), name)
    return best[1] if best else None


def types(document: dict[str, Any]) -> list[str]:
    """Every component schema of an OpenAPI document as an exported type, in the document's order; one that
    extends another is written as that one and its own fields."""
    out: list[str] = []
    schemas: dict[str, Any] = document.get("components", {}).get("schemas", {})
    for name, schema in schemas.items():
        if schema.get("description"):
            out += _doc(str(schema["description"]), "")
        base = _base(schema, schemas) if "properties" in schema else None
        if base is None:
            out.append(f"export type {name} = {ts_type(schema)}")
        else:
            inherited = schemas[base]["properties"]
            own = {**schema, "properties": {k: v for k, v in schema["properties"].items() if k not in inherited},
                   "required": [k for k in schema.get("required", []) if k not in inherited]}
            out.append(f"export type {name} = {base} & {ts_type(own)}")
        out.append("")
    return out


def names() -> list[str]:
    """The names Python keeps and the plugin uses: spelt once, in Python."""
    tools = list(MCPX_TOOLS)
    return [
        "/** A question's id anywhere in a text (elc- and 16 lowercase hex), and each kind of id alone. */",
        f"export const ID_PATTERN = /{ids.pattern('elc').strip('^$')}/",
        f"export const ID_PATTERNS = {literal({p: ids.pattern(p) for p in ('elc', 'tsk', 'cal')})} as const",
        "/** mcpx's own tools on its MCP surface (unprefixed: opencode names them <entry>_<name>). */",
        f"export const MCPX_TOOLS = {literal(tools)} as const",
        f"export const MCPX_TOOL = {literal({_camel(t.removeprefix('mcpx_')): t for t in tools})} as const",
        "/** The plugin's own tool: it puts a person's question to them in opencode's dialog. */",
        f"export const ASK_TOOL = {literal(ASK_TOOL)}",
        "/** The argument that carries opencode's session into mcpx's MCP entry (stripped before forwarding). */",
        f"export const SESSION_ARG = {literal(SESSION_ARG)}",
        "/** The plugin's levels, as mcpx's config takes them (plugin.elicit) and MCPX_PLUGIN_ELICIT. */",
        f"export const LEVELS = {literal(list(get_args(PluginLevel)))} as const",
        "/** The `_meta` keys of mcpx's tool results the plugin reads. */",
        f"export const META = {literal(keys.RESULT_META)} as const",
        "/** The /v1 request headers the plugin sends. */",
        f"export const HEADERS = {literal({'session': keys.SESSION_HEADER, 'answerer': keys.ANSWERER_HEADER})}"
        " as const",
        "",
    ]


def generate(document: dict[str, Any] | None = None) -> str:
    document = document if document is not None else build_api().openapi()
    head = [
        f"// Generated by `{COMMAND}` (sidecar/mcpx/daemon/typescript.py): do not edit.",
        "// The /v1 bodies' types come from the daemon's /v1/openapi.json (its route table and pydantic models); the",
        "// names below them from the Python modules that keep them. Regenerate after changing either.",
        "/* eslint-disable */",
        "",
    ]
    return "\n".join([*head, *names(), *types(document)]).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[3]
    target = root / TARGET
    text = generate()
    if "--check" in argv:
        if not target.exists() or target.read_text() != text:
            print(f"{TARGET} is out of date with /v1/openapi.json or mcpx's names: run `{COMMAND}` and commit it",
                  file=sys.stderr)
            return 1
        return 0
    target.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
