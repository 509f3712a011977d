"""The form model every reader shares (broker/schema.py): a requestedSchema read once into `FlatSchema`'s `Field`s —
each kind, the spec's three spellings of a choice, bounds, defaults, required — and the value rules on it."""

from __future__ import annotations

from typing import Any

import pytest

from mcpx.broker.credentials import is_secret, secret_fields
from mcpx.broker.schema import Field, FlatSchema, SchemaProblem, check_schema


def form(required: tuple[str, ...] = (), /, **props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required)}


ALL = form(
    ("name", "age"),
    name={"type": "string", "title": "Name", "description": "as on the passport", "minLength": 2, "maxLength": 5},
    email={"type": "string", "format": "email"},
    age={"type": "integer", "minimum": 18, "maximum": 99, "default": 30},
    score={"type": "number", "minimum": 0.5},
    ok={"type": "boolean", "default": False},
    color={"type": "string", "enum": ["red", "green"], "enumNames": ["Red"]},
    size={"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l"}]},
    level={"anyOf": [{"const": 1, "title": "One"}, {"const": 2, "title": "Two"}]},
    tags={"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "enum": ["a", "b", "c"]}},
    pin={"type": "string", "format": "password", "writeOnly": True},
)


def test_every_kind_is_read_in_the_servers_order_with_its_words_bounds_and_default() -> None:
    flat = check_schema(ALL)
    assert flat.names == list(ALL["properties"])
    assert {f.name: f.kind for f in flat.fields} == {
        "name": "string", "email": "string", "age": "integer", "score": "number", "ok": "boolean", "color": "enum",
        "size": "enum", "level": "enum", "tags": "multi-enum", "pin": "string"}
    name = flat.get("name")
    assert name == Field(name="name", kind="string", title="Name", description="as on the passport", required=True,
                         min_length=2, max_length=5)
    age = flat.get("age")
    assert age is not None and (age.required, age.has_default, age.default, age.minimum, age.maximum) == (
        True, True, 30, 18, 99)
    assert flat.get("email") == Field(name="email", kind="string", format="email")
    assert flat.get("ok") == Field(name="ok", kind="boolean", has_default=True, default=False)
    assert flat.get("pin") == Field(name="pin", kind="string", format="password", write_only=True)
    assert flat.get("nope") is None


def test_a_choice_is_read_from_enum_and_enum_names_one_of_and_any_of_its_title_else_its_value() -> None:
    flat = FlatSchema.of(ALL)
    options = {f.name: f.options for f in flat.fields if f.choices}
    assert options == {"color": (("red", "Red"), ("green", "green")),  # enumNames shorter than enum: the value
                       "size": (("s", "Small"), ("l", "l")),
                       "level": ((1, "One"), (2, "Two")),
                       "tags": (("a", "a"), ("b", "b"), ("c", "c"))}
    tags = flat.get("tags")
    assert tags is not None and (tags.min_items, tags.max_items) == (1, 2)


def test_a_bound_that_is_no_number_is_no_bound() -> None:
    f = Field.of("x", {"type": "string", "minLength": True, "maxLength": "5"})
    assert (f.min_length, f.max_length) == (None, None) and f.problem("") is None
    n = Field.of("n", {"type": "number", "minimum": "1", "maximum": False})
    assert (n.minimum, n.maximum) == (None, None)


def test_a_default_may_be_null_and_is_still_a_default() -> None:
    f = Field.of("x", {"type": "string", "default": None})
    assert f.has_default and f.default is None
    assert FlatSchema.of(form(x={"type": "string", "default": None})).check_content({}) == ({"x": None}, {})


@pytest.mark.parametrize("schema,problem", [
    (None, "requestedSchema must be a JSON object"),
    ({"type": "array"}, "requestedSchema.type must be 'object'"),
    ({"properties": []}, "requestedSchema.properties must be an object"),
    (form(x={"type": "object"}), "x: type 'object' is not allowed (string, number, integer, boolean, or an enum"),
    (form(x={}), "x: type None is not allowed"),
    (form(x={"type": "array", "items": {"type": "string"}}), "x: an array field must be a multi-select enum"),
    (form(x=1), "x: must be an object"),  # type: ignore[arg-type]
    (form(("y",)), "required names 'y', which is not a property"),
    ({"properties": {}, "required": "y"}, "required must be a list of field names"),
])
def test_a_schema_outside_the_flat_subset_is_refused_naming_what_is_wrong(schema: Any, problem: str) -> None:
    with pytest.raises(SchemaProblem) as refused:
        FlatSchema.checked(schema)
    assert problem in str(refused.value)


def test_every_problem_of_a_schema_is_named_at_once() -> None:
    with pytest.raises(SchemaProblem) as refused:
        check_schema(form(("zz",), a={"type": "object"}, b={"type": "array"}))
    assert str(refused.value) == (
        "a: type 'object' is not allowed (string, number, integer, boolean, or an enum array); b: an array field "
        "must be a multi-select enum (items with enum or anyOf consts); required names 'zz', which is not a property")


def test_a_schema_read_without_checking_keeps_what_it_can() -> None:
    # a stored question's schema was checked when it opened; anything else (a credential check on a raw dict) is
    # read as best it can: properties that are no objects passed over, a type not allowed read as a string
    flat = FlatSchema.of({"properties": {"a": 1, "b": {"type": "object", "title": "Password"}}, "required": "b"})
    assert [(f.name, f.kind, f.required) for f in flat.fields] == [("b", "string", False)]
    assert FlatSchema.of(None).fields == () and FlatSchema.of({"properties": []}).fields == ()
    assert secret_fields({"properties": {"b": {"type": "object", "title": "Password"}}}) == {"b"}


def test_the_same_schema_is_read_once_and_a_changed_one_afresh() -> None:
    schema = form(x={"type": "integer"})
    first = FlatSchema.of(schema)
    assert FlatSchema.of(dict(schema)) is first  # another copy of the same form: the same reading
    assert FlatSchema.of(first) is first
    schema["properties"]["x"] = {"type": "boolean"}
    assert FlatSchema.of(schema).fields[0].kind == "boolean"
    # one JSON type is not another: a default of true is not a default of 1
    assert FlatSchema.of(form(x={"type": "integer", "default": 1})).fields[0].default is not True


@pytest.mark.parametrize("prop,value,problem", [
    ({"type": "string", "minLength": 2}, "a", "must be at least 2 characters"),
    ({"type": "string", "maxLength": 2}, "abc", "must be at most 2 characters"),
    ({"type": "string"}, 3, "must be a string"),
    ({"type": "string", "format": "email"}, "nope", "is not an email address"),
    ({"type": "string", "format": "date"}, "2026-13-01", "is not a date (YYYY-MM-DD)"),
    ({"type": "integer"}, True, "must be an integer"),
    ({"type": "integer"}, 1.5, "must be a whole number"),
    ({"type": "number", "minimum": 1}, 0.5, "must be at least 1"),
    ({"type": "number", "maximum": 1}, 2, "must be at most 1"),
    ({"type": "boolean"}, "yes", "must be true or false"),
    ({"enum": [1, 2]}, True, 'true is not one of [1, 2]'),
    ({"enum": ["a"]}, "b", '"b" is not one of ["a"]'),
    ({"type": "array", "items": {"enum": ["a", "b"]}}, "a", "must be a list of choices"),
    ({"type": "array", "items": {"enum": ["a", "b"]}}, ["c"], '["c"] not among the choices ["a", "b"]'),
    ({"type": "array", "items": {"enum": ["a", "b"]}}, ["a", "a"], "choices must not repeat"),
    ({"type": "array", "minItems": 1, "items": {"enum": ["a"]}}, [], "choose at least 1"),
    ({"type": "array", "maxItems": 1, "items": {"enum": ["a", "b"]}}, ["a", "b"], "choose at most 1"),
])
def test_a_value_that_does_not_fit_is_told_why(prop: dict[str, Any], value: Any, problem: str) -> None:
    assert Field.of("x", prop).problem(value) == problem


@pytest.mark.parametrize("prop,value", [
    ({"type": "string", "format": "color"}, "not a colour"),  # a format mcpx does not check is a hint
    ({"type": "integer", "minimum": 1}, 3.0),
    ({"type": "number"}, 1),
    ({"enum": [1, 2]}, 2),
    ({"type": "array", "items": {"anyOf": [{"const": "a"}, {"const": "b"}]}}, ["b", "a"]),
])
def test_a_value_that_fits_has_no_problem(prop: dict[str, Any], value: Any) -> None:
    assert Field.of("x", prop).problem(value) is None


@pytest.mark.parametrize("prop,text,value", [
    ({"type": "integer"}, "3", 3),
    ({"type": "number"}, "3.0", 3),
    ({"type": "number"}, "0.25", 0.25),
    ({"type": "number"}, "nan", "nan"),
    ({"type": "integer"}, "many", "many"),
    ({"type": "boolean"}, " Yes ", True),
    ({"type": "boolean"}, "off", False),
    ({"type": "boolean"}, "maybe", "maybe"),
    ({"oneOf": [{"const": "s", "title": "Small"}]}, "small", "s"),
    ({"enum": [1, 2]}, "2", 2),
    ({"type": "array", "items": {"enum": ["a", "b"]}}, "a, B, c", ["a", "b", "c"]),
    ({"type": "array", "items": {"anyOf": [{"const": "a", "title": "Alpha"}]}}, "alpha,", ["a"]),
    ({"type": "array", "items": {"enum": ["a"]}}, " ", []),
    ({"type": "string"}, " as typed ", " as typed "),
])
def test_what_a_person_types_is_read_as_the_fields_type(prop: dict[str, Any], text: str, value: Any) -> None:
    assert Field.of("x", prop).parse(text) == value


def test_a_field_describes_itself_in_one_line() -> None:
    flat = FlatSchema.of(ALL)
    lines = [f.describe() for f in flat.fields]
    assert lines == [
        "name (string; min length 2; max length 5; required): Name — as on the passport",
        "email (string; format email; optional)",
        "age (integer; min 18; max 99; required; default 30)",
        "score (number; min 0.5; optional)",
        "ok (boolean; optional; default false)",
        'color (one of "red" (Red), "green"; optional)',
        'size (one of "s" (Small), "l"; optional)',
        "level (one of 1 (One), 2 (Two); optional)",
        'tags (any of "a", "b", "c"; at least 1; at most 2; optional)',
        "pin (string; format password; optional)",
    ]
    assert Field.of("note", {"type": "string", "title": "note", "description": "note"}).words == []


def test_an_answer_is_checked_field_by_field_and_its_defaults_filled() -> None:
    flat = FlatSchema.of(ALL)
    filled, problems = flat.check_content({"name": "ann", "age": 30.0, "tags": ["a"]})
    assert problems == {} and filled == {"name": "ann", "age": 30, "tags": ["a"], "ok": False}
    assert isinstance(filled["age"], int)
    _, problems = flat.check_content({"nick": "x", "age": 3})
    assert list(problems) == ["nick", "name", "age"]
    assert problems["nick"].startswith("is not a field of this question (fields: name, email, age")
    assert problems["name"] == "is required" and problems["age"] == "must be at least 18"
    assert flat.check_content([1]) == ({}, {"content": "must be a JSON object of field values"})
    assert FlatSchema.of(form()).check_content({"x": 1})[1] == {"x": "is not a field of this question"}


def test_a_default_filled_in_is_the_answers_own() -> None:
    flat = FlatSchema.of(form(tags={"type": "array", "items": {"enum": ["a", "b"]}, "default": ["a"]}))
    first, _ = flat.check_content({})
    first["tags"].append("b")
    assert flat.check_content({})[0] == {"tags": ["a"]}


def test_key_value_pairs_are_typed_by_their_fields() -> None:
    flat = FlatSchema.of(ALL)
    assert flat.parse_assignments(["age=31", "ok=yes", "size=Small", "tags=a,c", 'level=2', "other=1"]) == {
        "age": 31, "ok": True, "size": "s", "tags": ["a", "c"], "level": 2, "other": "1"}
    assert flat.parse_assignments(['tags=["b"]']) == {"tags": ["b"]}
    with pytest.raises(ValueError, match="given twice"):
        flat.parse_assignments(["age=1", "age=2"])
    with pytest.raises(ValueError, match="no field name"):
        flat.parse_assignments(["=1"])


def test_an_example_answer_has_the_shape_and_no_real_value() -> None:
    assert FlatSchema.of(ALL).example() == {"name": "...", "email": "...", "age": 18, "score": 0.5,
                                            "color": "red", "size": "s", "level": 1, "tags": ["a"], "pin": "..."}
    # a lone optional field with a default is still shown
    assert FlatSchema.of(form(ok={"type": "boolean", "default": False})).example() == {"ok": True}


def test_a_credential_is_known_by_its_format_name_title_words_or_write_only() -> None:
    flat = FlatSchema.of(form(pin={"type": "string", "format": "password"}, apiKey={"type": "string"},
                              value={"type": "string", "title": "Secret key"},
                              pat={"type": "string", "description": "a personal access token"},
                              code={"type": "string", "writeOnly": True}, max_tokens={"type": "integer"}))
    assert [f.name for f in flat.fields if is_secret(f)] == ["pin", "apiKey", "value", "pat", "code"]


def test_only_the_fields_asked_for_are_kept_and_an_answer_of_nothing_else_is_kept_as_it_is() -> None:
    flat = FlatSchema.of(form(repo={"type": "string"}, depth={"type": "integer"}))
    given = {"repo": "a/b", "depth": 2}
    assert flat.asked_only(given) is given
    assert flat.asked_only({"repo": "a/b", "extra": 1, "depth": 2}) == {"repo": "a/b", "depth": 2}
    assert FlatSchema.of(None).asked_only({"x": 1}) == {}
