"""Who a question is for, over real-world question shapes: the audience and a reason a person can read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpx.broker.credentials import secret_fields
from mcpx.broker.models import Elicitation
from mcpx.broker.routing import route


def form(**props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props}


S = {"type": "string"}
N = {"type": "number"}
I = {"type": "integer"}  # noqa: E741 -- S, N, I, B: the four scalar schemas, one letter each as in the tables
B = {"type": "boolean"}


def enum(*values: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


# (name, mode, schema, message, meta, expected audience, words the reason must contain)
CASES: list[tuple[str, str, dict[str, Any] | None, str, dict[str, Any] | None, str, str]] = [
    # credentials, tokens, secrets, logins -> the person
    ("github personal access token", "form", form(token=S), "GitHub needs a token to push", None, "human",
     "credential"),
    ("github pat by description", "form", form(value={**S, "description": "a personal access token with repo scope"}),
     "Authenticate", None, "human", "credential"),
    ("slack bot token camelCase", "form", form(botToken=S), "Connect Slack", None, "human", "credential"),
    ("aws secret access key", "form", form(aws_access_key_id=S, aws_secret_access_key=S), "AWS credentials", None,
     "human", "credential"),
    ("openai api key", "form", form(apiKey=S), "Paste your OpenAI key", None, "human", "credential"),
    ("api key with a space in the title", "form", form(key={**S, "title": "API key"}), "Configure", None, "human",
     "credential"),
    ("database password", "form", form(host=S, port=I, user=S, password=S), "Connect to Postgres", None, "human",
     "credential"),
    ("format password", "form", form(pin={**S, "format": "password"}), "Unlock", None, "human", "credential"),
    ("ssh private key", "form", form(private_key=S), "Deploy key", None, "human", "credential"),
    ("gpg passphrase", "form", form(passphrase=S), "Sign the release", None, "human", "credential"),
    ("oauth client secret", "form", form(client_id=S, client_secret=S), "Register the app", None, "human",
     "credential"),
    ("stripe card via url", "url", None, "Add a payment method", None, "human", "url mode"),
    ("github oauth via url", "url", None, "Connect your GitHub account", None, "human", "url mode"),
    ("generic credential field", "form", form(credentials=S), "Sign in", None, "human", "credential"),
    # consent, confirmation, approval -> the person
    ("delete branch confirm", "form", form(confirm={**B, "default": False}), "Really delete branch main?", None,
     "human", "consent"),
    ("deploy approve", "form", form(approve=B), "Approve the production deploy?", None, "human", "consent"),
    ("ci approval consent", "form", form(consent=B), "Allow the pipeline to publish?", None, "human", "consent"),
    ("fastmcp bool for drop table", "form", form(value=B), "Really drop table users?", None, "human", "consent"),
    ("proceed with payment", "form", form(proceed=B), "Charge $49 to the saved card?", None, "human", "consent"),
    ("empty form acknowledgement", "form", form(), "Acknowledge the maintenance window", None, "human",
     "no fields"),
    ("server hints the person", "form", form(repo=S), "Which repository?", {"io.mcpx/audience": "user"}, "human",
     "asked for the person"),
    # fixed choices -> the agent
    ("github pick a repo", "form", form(repo=enum("octo/a", "octo/b", "octo/c")), "Three repositories match",
     None, "agent", "fixed choices"),
    ("slack pick a channel titled", "form", form(channel={"type": "string", "oneOf": [
        {"const": "C1", "title": "#general"}, {"const": "C2", "title": "#deploys"}]}), "Post where?", None, "agent",
     "fixed choices"),
    ("cloud region", "form", form(region=enum("us-east-1", "eu-west-1")), "Deploy to which region?", None, "agent",
     "fixed choices"),
    ("labels multi-select", "form", form(labels={"type": "array", "items": {"type": "string",
                                                                           "enum": ["bug", "docs"]}}),
     "Which labels?", None, "agent", "fixed choices"),
    ("a non-consent flag with a choice", "form", form(dry_run=B, env=enum("staging", "prod")), "Run options", None,
     "agent", "fixed choices"),
    # a lone yes/no is a confirmation whatever its name (issue 25: `ok`, `yes`, `deploy_now` went to the agent)
    ("lone bool named ok", "form", form(ok=B), "Is that fine?", None, "human", "confirmation"),
    ("lone bool named yes", "form", form(yes=B), "Go on?", None, "human", "confirmation"),
    ("lone bool named deploy_now", "form", form(deploy_now=B), "Ship it?", None, "human", "confirmation"),
    ("lone bool that is no consent word", "form", form(verbose=B), "Verbose output?", None, "human",
     "confirmation"),
    # a choice between yes and no spelt as a fixed choice is one
    ("a yes/no spelt as an enum", "form", form(answer=enum("yes", "no")), "Which?", None, "agent", "fixed choices"),
    ("agent hint is ignored", "form", form(password=S), "Your password", {"io.mcpx/audience": "agent"}, "human",
     "credential"),
    # free text and numbers -> the agent first, then the person
    ("github issue title and body", "form", form(title=S, body=S), "Describe the issue", None, "agent-then-human",
     "free input"),
    ("which repository free text", "form", form(repo={**S, "description": "owner/name"}), "Which repository?", None,
     "agent-then-human", "free input"),
    ("llm max tokens is not a token", "form", form(max_tokens=I, temperature=N), "Generation settings", None,
     "agent-then-human", "free input"),
    ("tokenizer is not a token", "form", form(tokenizer=S), "Which tokenizer?", None, "agent-then-human",
     "free input"),
    ("tokens count is not a credential", "form", form(tokens=I), "How many tokens to spend?", None,
     "agent-then-human", "free input"),
    ("replica count", "form", form(replicas={**I, "minimum": 1, "maximum": 10}), "How many replicas?", None,
     "agent-then-human", "free input"),
    ("contact email", "form", form(name=S, email={**S, "format": "email"}), "Who should be notified?", None,
     "agent-then-human", "free input"),
    ("due date", "form", form(due={**S, "format": "date"}), "When is it due?", None, "agent-then-human",
     "free input"),
    ("keyboard shortcut key is not a credential", "form", form(key=S), "Which key triggers it?", None,
     "agent-then-human", "free input"),
]


@pytest.mark.parametrize("name, mode, schema, message, meta, audience, words", CASES, ids=[c[0] for c in CASES])
def test_routing(name: str, mode: str, schema: dict[str, Any] | None, message: str, meta: dict[str, Any] | None,
                 audience: str, words: str) -> None:
    decided = route(mode, schema, message, meta)  # type: ignore[arg-type]
    assert decided.audience == audience, decided.reason
    assert words in decided.reason
    if meta and meta.get("io.mcpx/audience") == "agent":
        assert decided.hint_ignored and "ignored" in decided.hint_ignored


def test_there_are_at_least_thirty_real_world_shapes() -> None:
    assert len(CASES) >= 30


def test_secret_fields_are_exactly_the_credentials() -> None:
    schema = form(user=S, password=S, apiKey=S, max_tokens=I, tokenizer=S, pin={**S, "format": "password"},
                  note={**S, "description": "anything"})
    assert secret_fields(schema) == {"password", "apiKey", "pin"}


def test_a_question_stored_before_questions_named_their_credentials_names_them_when_read() -> None:
    """Redaction reads the question's secret_fields: one an older mcpx stored without them must not read as having
    none. One that has them keeps them as stored (it was decided at its open)."""
    doc = {"id": "elc-0123456789abcdef", "session": "s", "sessionSource": "fallback", "server": "srv", "tool": "t",
           "mode": "form", "message": "Log in", "requestedSchema": form(user=S, password=S), "audience": "human",
           "reason": "r", "created": "2026-12-01T00:00:00Z", "expiresAt": "2026-12-01T00:10:00Z", "state": "pending"}
    assert Elicitation.model_validate(doc).secret_fields == ["password"]
    assert Elicitation.model_validate_json(json.dumps(doc)).secret_fields == ["password"]
    assert Elicitation.model_validate({**doc, "secretFields": []}).secret_fields == []
    assert Elicitation.model_validate({**doc, "requestedSchema": None}).secret_fields == []


def test_a_floor_can_only_make_a_question_more_human() -> None:
    assert route("form", form(region=enum("a", "b")), "Where?", None, "human").audience == "human"
    assert route("form", form(password=S), "Pw?", None, "agent").audience == "human"
