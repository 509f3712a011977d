"""The restricted flat schema of MCP form elicitation: checking schemas, validating answers, typing k=v.

Every problem is reported per field, so a person (or an agent) knows exactly what to fix.
"""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime
from typing import Any
from urllib.parse import urlsplit

# the string formats an answer is checked against; any other (password, color, int32…) is taken as plain input,
# since servers send them and a question must not be refused for a hint
FORMATS = ("email", "uri", "date", "date-time")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class SchemaProblem(ValueError):
    """The requestedSchema itself is not the flat restricted schema."""


def properties(schema: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    if not schema:
        return {}
    props = schema.get("properties") or {}
    return {k: v for k, v in props.items() if isinstance(v, dict)}


def required(schema: dict[str, Any] | None) -> list[str]:
    if not schema:
        return []
    req = schema.get("required") or []
    return [r for r in req if isinstance(r, str)]


def enum_options(prop: dict[str, Any]) -> list[tuple[Any, str]] | None:
    """(value, title) pairs for a single-select enum, whichever of the spec's shapes it uses."""
    if isinstance(prop.get("enum"), list):
        names = prop.get("enumNames") if isinstance(prop.get("enumNames"), list) else None
        return [(v, str(names[i]) if names and i < len(names) else str(v)) for i, v in enumerate(prop["enum"])]
    for key in ("oneOf", "anyOf"):
        options = prop.get(key)
        if isinstance(options, list) and options and all(isinstance(o, dict) and "const" in o for o in options):
            return [(o["const"], str(o.get("title", o["const"]))) for o in options]
    return None


def multi_options(prop: dict[str, Any]) -> list[tuple[Any, str]] | None:
    if prop.get("type") != "array" or not isinstance(prop.get("items"), dict):
        return None
    return enum_options(prop["items"])


def kind_of(prop: dict[str, Any]) -> str:
    """One word for a field: string, number, integer, boolean, enum, multi-enum."""
    if multi_options(prop) is not None:
        return "multi-enum"
    if enum_options(prop) is not None:
        return "enum"
    return str(prop.get("type", "string"))


def check_schema(schema: Any) -> None:
    """Raise SchemaProblem unless `schema` is a flat object of the spec's primitive fields."""
    if not isinstance(schema, dict):
        raise SchemaProblem("requestedSchema must be a JSON object")
    if schema.get("type", "object") != "object":
        raise SchemaProblem("requestedSchema.type must be 'object'")
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise SchemaProblem("requestedSchema.properties must be an object")
    problems: list[str] = []
    for name, prop in props.items():
        if not isinstance(prop, dict):
            problems.append(f"{name}: must be an object")
            continue
        kind = prop.get("type")
        if kind == "array":
            if multi_options(prop) is None:
                problems.append(f"{name}: an array field must be a multi-select enum (items with enum or anyOf consts)")
        elif kind in ("string", "number", "integer", "boolean") or (kind is None and enum_options(prop) is not None):
            pass
        else:
            problems.append(f"{name}: type {kind!r} is not allowed (string, number, integer, boolean, or an enum "
                            "array)")
    req = schema.get("required", [])
    if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
        problems.append("required must be a list of field names")
    else:
        for r in req:
            if r not in props:
                problems.append(f"required names {r!r}, which is not a property")
    if problems:
        raise SchemaProblem("; ".join(problems))


def _check_format(fmt: str, value: str) -> str | None:
    """Why `value` is not of format `fmt`; None when it is, or when `fmt` is not one of FORMATS."""
    if fmt not in FORMATS:
        return None
    if fmt == "email":
        return None if _EMAIL.match(value) else "is not an email address"
    if fmt == "uri":
        parts = urlsplit(value)
        return None if parts.scheme and (parts.netloc or parts.path) else "is not a URI (it needs a scheme, like https://)"
    if fmt == "date":
        try:
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
                raise ValueError
            date.fromisoformat(value)
            return None
        except ValueError:
            return "is not a date (YYYY-MM-DD)"
    if fmt == "date-time":
        try:
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", value):
                raise ValueError
            datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
            return None
        except ValueError:
            return "is not an RFC 3339 date-time (e.g. 2026-12-02T15:04:05Z)"
    return None


def field_problem(prop: dict[str, Any], value: Any) -> str | None:
    """Why `value` does not fit the field, or None when it does."""
    multi = multi_options(prop)
    if multi is not None:
        if not isinstance(value, list):
            return "must be a list of choices"
        allowed = [v for v, _ in multi]
        bad = [v for v in value if v not in allowed]
        if bad:
            return f"{json.dumps(bad)} not among the choices {json.dumps(allowed)}"
        if len(set(map(json.dumps, value))) != len(value):
            return "choices must not repeat"
        if isinstance(prop.get("minItems"), int) and len(value) < prop["minItems"]:
            return f"choose at least {prop['minItems']}"
        if isinstance(prop.get("maxItems"), int) and len(value) > prop["maxItems"]:
            return f"choose at most {prop['maxItems']}"
        return None
    options = enum_options(prop)
    if options is not None:
        allowed = [v for v, _ in options]
        return None if value in allowed and type(value) is type(allowed[allowed.index(value)]) else (
            f"{json.dumps(value)} is not one of {json.dumps(allowed)}"
        )
    kind = prop.get("type", "string")
    if kind == "boolean":
        return None if isinstance(value, bool) else "must be true or false"
    if kind in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be a{'n integer' if kind == 'integer' else ' number'}"
        if kind == "integer" and not (isinstance(value, int) or float(value).is_integer()):
            return "must be a whole number"
        if isinstance(prop.get("minimum"), int | float) and value < prop["minimum"]:
            return f"must be at least {prop['minimum']}"
        if isinstance(prop.get("maximum"), int | float) and value > prop["maximum"]:
            return f"must be at most {prop['maximum']}"
        return None
    if kind == "string":
        if not isinstance(value, str):
            return "must be a string"
        if isinstance(prop.get("minLength"), int) and len(value) < prop["minLength"]:
            return f"must be at least {prop['minLength']} characters"
        if isinstance(prop.get("maxLength"), int) and len(value) > prop["maxLength"]:
            return f"must be at most {prop['maxLength']} characters"
        if isinstance(prop.get("format"), str):
            return _check_format(prop["format"], value)
        return None
    return None


def validate_content(schema: dict[str, Any] | None, content: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """Check an accepted answer; returns (content with defaults filled, {field: problem})."""
    if content is None:
        content = {}
    if not isinstance(content, dict):
        return {}, {"content": "must be a JSON object of field values"}
    props = properties(schema)
    problems: dict[str, str] = {}
    filled = dict(content)
    for name in content:
        if name not in props:
            problems[name] = "is not a field of this question" + (f" (fields: {', '.join(props)})" if props else "")
    for name, prop in props.items():
        if name in content:
            problem = field_problem(prop, content[name])
            if problem:
                problems[name] = problem
        elif name in required(schema):
            problems[name] = "is required"
        elif "default" in prop:
            filled[name] = prop["default"]
    if problems:
        return content, problems
    for name, prop in props.items():
        if kind_of(prop) == "integer" and isinstance(filled.get(name), float):
            filled[name] = int(filled[name])  # 3.0 is a valid integer; hand the asker 3
    return filled, {}


def type_value(prop: dict[str, Any] | None, text: str) -> Any:
    """Turn what a person typed into the field's JSON type (k=v answers, terminal prompts)."""
    if prop is None:
        return text
    kind = kind_of(prop)
    if kind == "multi-enum":
        options = multi_options(prop) or []
        items = [t.strip() for t in text.split(",") if t.strip()] if text.strip() else []
        return [_pick_option(options, item) for item in items]
    if kind == "enum":
        return _pick_option(enum_options(prop) or [], text)
    if kind == "boolean":
        lowered = text.strip().lower()
        if lowered in ("true", "yes", "y", "1", "on"):
            return True
        if lowered in ("false", "no", "n", "0", "off"):
            return False
        return text
    if kind in ("number", "integer"):
        try:
            number = float(text)
        except ValueError:
            return text
        if not math.isfinite(number):
            return text  # nan and inf are no JSON numbers: left as typed, validation names the field
        return int(number) if number.is_integer() else number  # "3" is 3 in JSON, not 3.0
    return text


def _pick_option(options: list[tuple[Any, str]], text: str) -> Any:
    for value, _title in options:
        if str(value) == text:
            return value
    for value, title in options:
        if title.lower() == text.strip().lower():
            return value
    return text


def parse_assignments(schema: dict[str, Any] | None, pairs: list[str]) -> dict[str, Any]:
    """`key=value …` typed by the schema. A value that is JSON for a non-string field is taken as JSON."""
    props = properties(schema)
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(f"{pair!r} is not key=value")
        key, text = pair.split("=", 1)
        key = key.strip()
        if not key:
            raise ValueError(f"{pair!r} has no field name before '='")
        if key in out:
            raise ValueError(f"{key} is given twice ({key}={json.dumps(out[key], ensure_ascii=False)} and {pair}); "
                             f"give each field once (several choices go in one JSON list: {key}='[\"a\",\"b\"]')")
        prop = props.get(key)
        if prop is not None and kind_of(prop) == "multi-enum" and text.startswith("["):
            try:
                out[key] = json.loads(text)
                continue
            except json.JSONDecodeError:
                pass
        out[key] = type_value(prop, text)
    return out


def describe_field(name: str, prop: dict[str, Any], is_required: bool) -> str:
    """One line for a field: name, type, constraints, default — for terminals and models alike."""
    title = prop.get("title")
    desc = prop.get("description")
    label = " — ".join(str(x) for x in (title, desc) if x and str(x) != name)
    return f"{name} ({field_constraints(prop, is_required)})" + (f": {label}" if label else "")


def field_constraints(prop: dict[str, Any], is_required: bool) -> str:
    """A field's type, constraints, whether it is required, and its default, in one line."""
    kind = kind_of(prop)
    bits: list[str] = []
    if kind == "enum":
        bits.append("one of " + ", ".join(_option_text(v, t) for v, t in enum_options(prop) or []))
    elif kind == "multi-enum":
        bits.append("any of " + ", ".join(_option_text(v, t) for v, t in multi_options(prop) or []))
        if isinstance(prop.get("minItems"), int):
            bits.append(f"at least {prop['minItems']}")
        if isinstance(prop.get("maxItems"), int):
            bits.append(f"at most {prop['maxItems']}")
    else:
        bits.append(kind)
        if isinstance(prop.get("format"), str):
            bits.append(f"format {prop['format']}")
        for key, label in (("minLength", "min length"), ("maxLength", "max length"), ("minimum", "min"),
                           ("maximum", "max")):
            if key in prop:
                bits.append(f"{label} {prop[key]}")
    bits.append("required" if is_required else "optional")
    if "default" in prop:
        bits.append(f"default {json.dumps(prop['default'], ensure_ascii=False)}")
    return "; ".join(bits)


def _option_text(value: Any, title: str) -> str:
    shown = json.dumps(value, ensure_ascii=False)  # a value is shown as it reads; plain() escapes what must be
    return shown if title == str(value) else f"{shown} ({title})"


def example_content(schema: dict[str, Any] | None) -> dict[str, Any]:
    """A placeholder answer showing the shape; strings are '...' so nothing looks like a real value."""
    out: dict[str, Any] = {}
    props = properties(schema)
    for name, prop in props.items():
        if name not in required(schema) and "default" in prop and len(props) > 1:
            continue
        kind = kind_of(prop)
        if kind == "enum":
            out[name] = (enum_options(prop) or [("...", "")])[0][0]
        elif kind == "multi-enum":
            out[name] = [(multi_options(prop) or [("...", "")])[0][0]]
        elif kind == "boolean":
            out[name] = True
        elif kind in ("number", "integer"):
            out[name] = prop.get("minimum", 0)
        else:
            out[name] = "..."
    return out
