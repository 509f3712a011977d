"""The restricted flat schema: every field type validated, every problem named, k=v typed by the schema."""

import pytest

from mcpx.broker.schema import SchemaProblem, check_schema, parse_assignments, validate_content

FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date"},
        "when": {"type": "string", "format": "date-time"},
        "age": {"type": "integer", "minimum": 18, "maximum": 99},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "ok": {"type": "boolean", "default": False},
        "color": {"type": "string", "enum": ["red", "green"]},
        "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
        "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "enum": ["a", "b", "c"]}},
        "level": {"type": "string", "default": "info"},
    },
    "required": ["name", "age"],
}
GOOD = {"name": "ann", "email": "a@b.co", "site": "https://x.org", "day": "2026-12-02",
        "when": "2026-12-02T10:00:00Z", "age": 30, "score": 0.5, "color": "red", "size": "l", "tags": ["a", "c"]}


def test_valid_answer_gets_defaults_filled():
    filled, problems = validate_content(FORM, GOOD)
    assert problems == {}
    assert filled["ok"] is False and filled["level"] == "info"


@pytest.mark.parametrize("field,value,problem", [
    ("name", "a", "at least 2"),
    ("name", "abcdef", "at most 5"),
    ("name", 3, "must be a string"),
    ("email", "nope", "email"),
    ("site", "not a uri", "URI"),
    ("day", "2026-13-01", "date"),
    ("day", "12/02/2026", "date"),
    ("when", "2026-12-02 10:00", "date-time"),
    ("age", 17, "at least 18"),
    ("age", 100, "at most 99"),
    ("age", 30.5, "whole number"),
    ("age", True, "integer"),
    ("score", "0.5", "number"),
    ("score", 2, "at most 1"),
    ("ok", "yes", "true or false"),
    ("color", "blue", "not one of"),
    ("size", "Small", "not one of"),
    ("tags", ["d"], "not among"),
    ("tags", [], "at least 1"),
    ("tags", ["a", "b", "c"], "at most 2"),
    ("tags", ["a", "a"], "repeat"),
    ("tags", "a", "list"),
])
def test_each_problem_is_named_by_field(field, value, problem):
    _, problems = validate_content(FORM, {**GOOD, field: value})
    assert list(problems) == [field]
    assert problem in problems[field]


def test_missing_required_and_unknown_fields_are_named_together():
    _, problems = validate_content(FORM, {"nickname": "x"})
    assert problems["name"] == "is required" and problems["age"] == "is required"
    assert "not a field" in problems["nickname"]


def test_integer_given_as_whole_float_is_delivered_as_int():
    filled, problems = validate_content(FORM, {**GOOD, "age": 30.0})
    assert problems == {} and filled["age"] == 30 and isinstance(filled["age"], int)


def test_kv_pairs_are_typed_by_the_schema():
    got = parse_assignments(FORM, ["name=ann", "age=30", "score=0.25", "ok=yes", "size=Large", "tags=a,c",
                                   "color=red", "level=debug"])
    assert got == {"name": "ann", "age": 30, "score": 0.25, "ok": True, "size": "l", "tags": ["a", "c"],
                   "color": "red", "level": "debug"}
    assert parse_assignments(FORM, ['tags=["b"]']) == {"tags": ["b"]}
    # a value the schema cannot type stays a string, and validation then names it
    assert parse_assignments(FORM, ["age=old"]) == {"age": "old"}
    # a number reads as JSON reads it: 1 is a whole number in a number field too; nan and inf are no JSON numbers
    got = parse_assignments(FORM, ["score=1", "age=3.0"])
    assert got == {"score": 1, "age": 3} and isinstance(got["score"], int) and isinstance(got["age"], int)
    assert parse_assignments(FORM, ["score=nan", "age=inf"]) == {"score": "nan", "age": "inf"}
    with pytest.raises(ValueError, match="key=value"):
        parse_assignments(FORM, ["justaword"])


@pytest.mark.parametrize("schema,problem", [
    ({"type": "object", "properties": {"x": {"type": "object"}}}, "not allowed"),
    ({"type": "object", "properties": {"x": {"type": "array", "items": {"type": "string"}}}}, "multi-select"),
    ({"type": "object", "properties": {}, "required": ["y"]}, "not a property"),
    ({"type": "array"}, "must be 'object'"),
])
def test_schemas_outside_the_flat_subset_are_refused(schema, problem):
    with pytest.raises(SchemaProblem, match=problem):
        check_schema(schema)


def test_formats_mcpx_does_not_check_are_taken_as_plain_input():
    # servers send these (password is the spec's own example): a hint must not cost the question
    schema = {"type": "object", "properties": {
        "pin": {"type": "string", "format": "password"}, "shade": {"type": "string", "format": "color"},
        "host": {"type": "string", "format": "hostname"}, "n": {"type": "integer", "format": "int32"}}}
    check_schema(schema)
    filled, problems = validate_content(schema, {"pin": "hunter2", "shade": "not really a colour", "host": "x y",
                                                 "n": 3})
    assert problems == {} and filled["shade"] == "not really a colour"
    _, problems = validate_content(schema, {"pin": 1234})
    assert problems == {"pin": "must be a string"}
