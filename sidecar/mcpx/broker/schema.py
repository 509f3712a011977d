"""The restricted flat schema of MCP form elicitation, read once into a `FlatSchema` of `Field`s.

A question's `requestedSchema` stays the dict the server sent (that is what is stored and sent on); every reader —
the broker's checks, routing, the credential rule, and each renderer (inbox, TUI, terminal prompt, dialogs) —
reads it through `FlatSchema.of`, which decides once what each field is: its kind, words, options, bounds and
default. The value rules live on the model: `Field.problem` (does a value fit), `Field.parse` (what a person
typed, as the field's JSON type), `FlatSchema.check_content` (an answer, with defaults filled).

Every problem is reported per field, so a person (or an agent) knows exactly what to fix.
"""

from __future__ import annotations

import copy
import json
import math
import re
from datetime import date, datetime
from functools import lru_cache
from typing import Any, Literal
from urllib.parse import urlsplit

import pydantic_core
from pydantic import BaseModel, ConfigDict, PrivateAttr

# the string formats an answer is checked against; any other (password, color, int32…) is taken as plain input,
# since servers send them and a question must not be refused for a hint
FORMATS = ("email", "uri", "date", "date-time")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")

Kind = Literal["string", "number", "integer", "boolean", "enum", "multi-enum"]
_SCALARS = ("string", "number", "integer", "boolean")
Option = tuple[Any, str]  # a choice's value, and its title as the server gave it (else the value as text)


class SchemaProblem(ValueError):
    """The requestedSchema itself is not the flat restricted schema."""


def _text(value: Any) -> str | None:
    """A title or description as text; None when the server gave none (or an empty one)."""
    return str(value) if value else None


def _count(value: Any) -> int | None:
    """A length or item bound: a whole number, else no bound at all (true is not 1)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> int | float | None:
    """A minimum or maximum: a number, else no bound at all."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _enum_options(prop: dict[str, Any]) -> list[Option] | None:
    """(value, title) pairs for a single-select enum, whichever of the spec's shapes it uses; None if it is none."""
    if isinstance(prop.get("enum"), list):
        names = prop.get("enumNames") if isinstance(prop.get("enumNames"), list) else None
        return [(v, str(names[i]) if names and i < len(names) else str(v)) for i, v in enumerate(prop["enum"])]
    for key in ("oneOf", "anyOf"):
        options = prop.get(key)
        if isinstance(options, list) and options and all(isinstance(o, dict) and "const" in o for o in options):
            return [(o["const"], str(o.get("title", o["const"]))) for o in options]
    return None


def _multi_options(prop: dict[str, Any]) -> list[Option] | None:
    if prop.get("type") != "array" or not isinstance(prop.get("items"), dict):
        return None
    return _enum_options(prop["items"])


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


def same(a: Any, b: Any) -> bool:
    """Equal and of one JSON type: 1 is not true, nor 1.0 the choice 1."""
    return a == b and type(a) is type(b)


class Field(BaseModel):
    """One property of a form: what it is, in the server's words, and the rules its value follows."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Kind  # enum: one of `options`; multi-enum: a list of them; else the property's JSON type
    title: str | None = None
    description: str | None = None
    required: bool = False
    has_default: bool = False
    default: Any = None  # only with has_default: a default may be null
    options: tuple[Option, ...] = ()  # enum and multi-enum (the items' choices), in the server's order
    format: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_items: int | None = None
    max_items: int | None = None
    write_only: bool = False

    @classmethod
    def of(cls, name: str, prop: dict[str, Any], required: bool = False) -> Field:
        """The field a property describes. A type the flat schema does not allow (which `FlatSchema.checked`
        refuses) reads as a string."""
        multi = _multi_options(prop)
        options = multi if multi is not None else _enum_options(prop)
        kind: Kind
        if multi is not None:
            kind = "multi-enum"
        elif options is not None:
            kind = "enum"
        else:
            declared = prop.get("type", "string")
            kind = declared if declared in _SCALARS else "string"
        fmt = prop.get("format")
        return cls(
            name=name, kind=kind, title=_text(prop.get("title")), description=_text(prop.get("description")),
            required=required, has_default="default" in prop, default=prop.get("default"),
            options=tuple(options or ()), format=fmt if isinstance(fmt, str) else None,
            min_length=_count(prop.get("minLength")), max_length=_count(prop.get("maxLength")),
            minimum=_number(prop.get("minimum")), maximum=_number(prop.get("maximum")),
            min_items=_count(prop.get("minItems")), max_items=_count(prop.get("maxItems")),
            write_only=prop.get("writeOnly") is True,
        )

    @property
    def choices(self) -> bool:
        """Whether the field is picked from options (one, or any number) rather than typed."""
        return self.kind in ("enum", "multi-enum")

    @property
    def words(self) -> list[str]:
        """The server's title and description, those that say more than the field's name."""
        return [x for x in (self.title, self.description) if x and x != self.name]

    def problem(self, value: Any) -> str | None:
        """Why `value` does not fit the field, or None when it does."""
        if self.kind == "multi-enum":
            allowed = [v for v, _ in self.options]
            if not isinstance(value, list):
                return "must be a list of choices"
            bad = [v for v in value if v not in allowed]
            if bad:
                return f"{json.dumps(bad)} not among the choices {json.dumps(allowed)}"
            if len(set(map(json.dumps, value))) != len(value):
                return "choices must not repeat"
            if self.min_items is not None and len(value) < self.min_items:
                return f"choose at least {self.min_items}"
            if self.max_items is not None and len(value) > self.max_items:
                return f"choose at most {self.max_items}"
            return None
        if self.kind == "enum":
            allowed = [v for v, _ in self.options]
            return None if value in allowed and type(value) is type(allowed[allowed.index(value)]) else (
                f"{json.dumps(value)} is not one of {json.dumps(allowed)}"
            )
        if self.kind == "boolean":
            return None if isinstance(value, bool) else "must be true or false"
        if self.kind in ("number", "integer"):
            if isinstance(value, bool) or not isinstance(value, int | float):
                return f"must be a{'n integer' if self.kind == 'integer' else ' number'}"
            if self.kind == "integer" and not (isinstance(value, int) or float(value).is_integer()):
                return "must be a whole number"
            if self.minimum is not None and value < self.minimum:
                return f"must be at least {self.minimum}"
            if self.maximum is not None and value > self.maximum:
                return f"must be at most {self.maximum}"
            return None
        if not isinstance(value, str):
            return "must be a string"
        if self.min_length is not None and len(value) < self.min_length:
            return f"must be at least {self.min_length} characters"
        if self.max_length is not None and len(value) > self.max_length:
            return f"must be at most {self.max_length} characters"
        return _check_format(self.format, value) if self.format is not None else None

    def pick(self, text: str) -> Any:
        """The choice `text` names, by its value as text or (any case) its title; else `text` as it is, so that
        validation names the field."""
        for value, _title in self.options:
            if str(value) == text:
                return value
        for value, title in self.options:
            if title.lower() == text.strip().lower():
                return value
        return text

    def parse(self, text: str) -> Any:
        """What a person typed, as the field's JSON type (k=v answers, prompts, forms); what does not read as that
        type is left as typed, so that validation names the field. A multi-select takes choices split by commas."""
        if self.kind == "multi-enum":
            return [self.pick(item) for item in (t.strip() for t in text.split(",")) if item]
        if self.kind == "enum":
            return self.pick(text)
        if self.kind == "boolean":
            lowered = text.strip().lower()
            if lowered in ("true", "yes", "y", "1", "on"):
                return True
            if lowered in ("false", "no", "n", "0", "off"):
                return False
            return text
        if self.kind in ("number", "integer"):
            try:
                number = float(text)
            except ValueError:
                return text
            if not math.isfinite(number):
                return text  # nan and inf are no JSON numbers: left as typed, validation names the field
            return int(number) if number.is_integer() else number  # "3" is 3 in JSON, not 3.0
        return text

    def constraints(self) -> str:
        """The field's type, constraints, whether it is required, and its default, in one line."""
        bits: list[str] = []
        if self.kind == "enum":
            bits.append("one of " + ", ".join(_option_text(v, t) for v, t in self.options))
        elif self.kind == "multi-enum":
            bits.append("any of " + ", ".join(_option_text(v, t) for v, t in self.options))
            if self.min_items is not None:
                bits.append(f"at least {self.min_items}")
            if self.max_items is not None:
                bits.append(f"at most {self.max_items}")
        else:
            bits.append(self.kind)
            if self.format is not None:
                bits.append(f"format {self.format}")
            for bound, label in ((self.min_length, "min length"), (self.max_length, "max length"),
                                 (self.minimum, "min"), (self.maximum, "max")):
                if bound is not None:
                    bits.append(f"{label} {bound}")
        bits.append("required" if self.required else "optional")
        if self.has_default:
            bits.append(f"default {json.dumps(self.default, ensure_ascii=False)}")
        return "; ".join(bits)

    def describe(self) -> str:
        """One line for the field: name, type, constraints, default — for terminals and models alike."""
        label = " — ".join(self.words)
        return f"{self.name} ({self.constraints()})" + (f": {label}" if label else "")

    def example(self) -> Any:
        """A placeholder of the field's shape; a string is '...' so that nothing looks like a real value."""
        if self.kind == "enum":
            return self.options[0][0] if self.options else "..."
        if self.kind == "multi-enum":
            return [self.options[0][0] if self.options else "..."]
        if self.kind == "boolean":
            return True
        if self.kind in ("number", "integer"):
            return self.minimum if self.minimum is not None else 0
        return "..."


def _option_text(value: Any, title: str) -> str:
    shown = json.dumps(value, ensure_ascii=False)  # a value is shown as it reads; plain() escapes what must be
    return shown if title == str(value) else f"{shown} ({title})"


class FlatSchema(BaseModel):
    """A form's fields, in the server's order, read once from its requestedSchema."""

    model_config = ConfigDict(frozen=True)

    fields: tuple[Field, ...] = ()
    _by_name: dict[str, Field] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        self._by_name = {f.name: f for f in self.fields}

    @classmethod
    def of(cls, schema: dict[str, Any] | FlatSchema | None) -> FlatSchema:
        """The fields of a schema as it stands: one checked when its question opened, or any other (what is not
        a property is passed over; see `checked` for what a question may carry). Read once per schema: the
        broker, routing and every renderer ask again for the same question's, each with its own copy of the dict."""
        if isinstance(schema, FlatSchema):
            return schema
        if not schema:
            return _NONE
        key = schema_key(schema)
        return cls._read(schema) if key is None else _read_key(key)

    @classmethod
    def _read(cls, schema: dict[str, Any]) -> FlatSchema:
        props = schema.get("properties") or {}
        if not isinstance(props, dict):
            return _NONE
        req = schema.get("required") or []
        names = {r for r in req if isinstance(r, str)} if isinstance(req, list) else set()
        return cls(fields=tuple(Field.of(name, prop, name in names) for name, prop in props.items()
                                if isinstance(prop, dict)))

    @classmethod
    def checked(cls, schema: Any, key: bytes | None = None) -> FlatSchema:
        """The fields of `schema`, or SchemaProblem naming every way it is not a flat object of the spec's
        primitive fields. Checked once per schema's text: a server asks the same few forms again and again.
        `key`: the schema's `schema_key`, if the caller has it already."""
        if key is None:
            key = schema_key(schema) if isinstance(schema, dict) else None
            if key is None:
                return cls._check(schema)
        flat = checked_key(key)
        if isinstance(flat, SchemaProblem):
            raise SchemaProblem(str(flat))  # a new one each time: a raised exception keeps its traceback
        return flat

    @classmethod
    def _check(cls, schema: Any) -> FlatSchema:
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
                if _multi_options(prop) is None:
                    problems.append(f"{name}: an array field must be a multi-select enum (items with enum or anyOf "
                                    "consts)")
            elif kind not in _SCALARS and not (kind is None and _enum_options(prop) is not None):
                problems.append(f"{name}: type {kind!r} is not allowed (string, number, integer, boolean, or an enum "
                                "array)")
        req = schema.get("required", [])
        if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
            problems.append("required must be a list of field names")
        else:
            problems += [f"required names {r!r}, which is not a property" for r in req if r not in props]
        if problems:
            raise SchemaProblem("; ".join(problems))
        return cls.of(schema)

    @property
    def names(self) -> list[str]:
        return list(_by_name(self))

    def get(self, name: str) -> Field | None:
        return _by_name(self).get(name)

    def asked_only(self, content: dict[str, Any]) -> dict[str, Any]:
        """`content` less the keys that name none of the form's fields: `content` itself when it has none such (every
        answer of a client that built its form from the schema), not a copy."""
        by_name = _by_name(self)
        for key in content:
            if key not in by_name:
                return {k: v for k, v in content.items() if k in by_name}
        return content

    def check_content(self, content: Any) -> tuple[dict[str, Any], dict[str, str]]:
        """Check an accepted answer; returns (content with defaults filled, {field: problem})."""
        if content is None:
            content = {}
        if not isinstance(content, dict):
            return {}, {"content": "must be a JSON object of field values"}
        problems: dict[str, str] = {}
        filled = dict(content)
        by_name = _by_name(self)
        for name in content:
            if name not in by_name:
                problems[name] = "is not a field of this question" + (
                    f" (fields: {', '.join(by_name)})" if self.fields else "")
        for f in self.fields:
            if f.name in content:
                problem = f.problem(content[f.name])
                if problem:
                    problems[f.name] = problem
            elif f.required:
                problems[f.name] = "is required"
            elif f.has_default:
                # the form is shared by every answer to it: an answer gets its own copy of a list or an object
                filled[f.name] = copy.deepcopy(f.default) if isinstance(f.default, list | dict) else f.default
        if problems:
            return content, problems
        for f in self.fields:
            if f.kind == "integer" and isinstance(filled.get(f.name), float):
                filled[f.name] = int(filled[f.name])  # 3.0 is a valid integer; hand the asker 3
        return filled, {}

    def parse_assignments(self, pairs: list[str]) -> dict[str, Any]:
        """`key=value …` typed by the fields. A value that is JSON for a multi-select is taken as JSON."""
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
            f = self.get(key)
            if f is not None and f.kind == "multi-enum" and text.startswith("["):
                try:
                    out[key] = json.loads(text)
                    continue
                except json.JSONDecodeError:
                    pass
            out[key] = f.parse(text) if f is not None else text
        return out

    def example(self) -> dict[str, Any]:
        """A placeholder answer showing the shape: every field but optional ones with a default (unless the form
        has just one)."""
        return {f.name: f.example() for f in self.fields
                if f.required or not f.has_default or len(self.fields) <= 1}


_NONE = FlatSchema()


def _by_name(flat: FlatSchema) -> dict[str, Field]:
    """A form's fields by name, from its private attributes' own dict: pydantic's __getattr__ for a private attribute
    is several Python calls, and an answer's path looks its fields up twice (surface/answers.py, check_content)."""
    private = flat.__pydantic_private__
    assert private is not None  # a FlatSchema always has its private attributes
    by_name: dict[str, Field] = private["_by_name"]
    return by_name


def schema_key(schema: dict[str, Any]) -> bytes | None:
    """A schema's JSON text, its key in the caches below (order kept: it is the form's); None if it has no such text
    (a lone surrogate, which no question may hold, or what is no JSON at all, which only a caller in-process can hand
    over): it is then read uncached. pydantic's encoder: a third of the standard library's cost (a question's
    schema is keyed as it opens), and the text is read back to make the form, so a form is always its key's."""
    try:
        return pydantic_core.to_json(schema)
    except pydantic_core.PydanticSerializationError:
        return None


@lru_cache(maxsize=512)
def _read_key(key: bytes) -> FlatSchema:
    """A schema read from its JSON text: the same text is the same form, whoever holds a copy of it."""
    schema = json.loads(key)
    return FlatSchema._read(schema) if isinstance(schema, dict) else _NONE


@lru_cache(maxsize=512)
def checked_key(key: bytes) -> FlatSchema | SchemaProblem:
    """A schema checked from its JSON text (`schema_key`): its form, or what is wrong with it (the same text, the
    same verdict)."""
    try:
        return FlatSchema._check(json.loads(key))
    except SchemaProblem as exc:
        return exc


# The functions below take the requestedSchema as it travels (a dict), for callers that hold nothing else.

def check_schema(schema: Any) -> FlatSchema:
    """The fields of a question's schema; SchemaProblem unless it is a flat object of the spec's primitive fields."""
    return FlatSchema.checked(schema)


def validate_content(schema: dict[str, Any] | None, content: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """Check an accepted answer; returns (content with defaults filled, {field: problem})."""
    return FlatSchema.of(schema).check_content(content)


def parse_assignments(schema: dict[str, Any] | None, pairs: list[str]) -> dict[str, Any]:
    """`key=value …` typed by the schema. A value that is JSON for a multi-select is taken as JSON."""
    return FlatSchema.of(schema).parse_assignments(pairs)


def example_content(schema: dict[str, Any] | None) -> dict[str, Any]:
    """A placeholder answer showing the shape; strings are '...' so nothing looks like a real value."""
    return FlatSchema.of(schema).example()
