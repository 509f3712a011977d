"""The demo server's tools: each asks one or two questions, then says what it would have done.

Nothing here touches anything real; the point is to see questions travel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DemoQuestion:
    message: str
    schema: dict[str, Any] | None = None  # form mode
    url: str | None = None  # url mode

    def params(self) -> dict[str, Any]:
        if self.url is not None:
            return {"mode": "url", "message": self.message, "url": self.url}
        return {"mode": "form", "message": self.message, "requestedSchema": self.schema}


Answers = list[dict[str, Any]]  # ElicitResults, in the order asked


@dataclass(frozen=True)
class DemoTool:
    name: str
    description: str
    questions: Callable[[dict[str, Any], Answers], DemoQuestion | None]  # the next question, or None when done
    finish: Callable[[dict[str, Any], Answers], str]
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    annotations: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema,
                "annotations": self.annotations}


def _not_accepted(answers: Answers) -> str | None:
    last = answers[-1] if answers else None
    if last and last["action"] == "decline":
        return "You said no, so nothing was done."
    if last and last["action"] == "cancel":
        return "Nobody chose (cancelled), so nothing was done; ask again later."
    return None


def _one(question: DemoQuestion) -> Callable[[dict[str, Any], Answers], DemoQuestion | None]:
    return lambda _args, answers: question if not answers else None


REPO = DemoQuestion("Which repository should the notes go in?", {
    "type": "object", "required": ["repo"],
    "properties": {"repo": {"type": "string", "title": "Repository", "description": "owner/name, e.g. octo/hello"}},
})

DELETE = DemoQuestion("Really delete branch 'main'? This cannot be undone.", {
    "type": "object", "properties": {"confirm": {"type": "boolean", "default": False, "title": "Delete it"}},
})

LOGIN = DemoQuestion("Sign in to the demo service to continue.", url="https://example.com/mcpx-demo/login")

ISSUE = DemoQuestion("Describe the issue to file.", {
    "type": "object", "required": ["title", "priority"],
    "properties": {
        "title": {"type": "string", "minLength": 3, "maxLength": 80},
        "priority": {"type": "string", "title": "Priority",
                     "oneOf": [{"const": "p0", "title": "Urgent"}, {"const": "p1", "title": "Soon"},
                               {"const": "p2", "title": "Someday"}]},
        "labels": {"type": "array", "items": {"type": "string", "enum": ["bug", "docs", "ui", "api"]},
                   "maxItems": 3},
        "due": {"type": "string", "format": "date", "description": "YYYY-MM-DD"},
        "notify": {"type": "boolean", "default": True},
    },
})

ENVIRONMENT = DemoQuestion("Deploy where?", {
    "type": "object", "required": ["environment"],
    "properties": {"environment": {"type": "string", "enum": ["staging", "production"]}},
})


def _deploy_next(_args: dict[str, Any], answers: Answers) -> DemoQuestion | None:
    if not answers:
        return ENVIRONMENT
    if len(answers) == 1 and answers[0]["action"] == "accept":
        env = answers[0]["content"]["environment"]
        return DemoQuestion(f"Deploy build 417 to {env} now?", {
            "type": "object", "properties": {"confirm": {"type": "boolean", "default": False}}})
    return None


def _deploy_finish(_args: dict[str, Any], answers: Answers) -> str:
    refused = _not_accepted(answers)
    if refused:
        return refused
    if not answers[1].get("content", {}).get("confirm"):
        return "Not confirmed, so nothing was deployed."
    return f"Build 417 would now be deploying to {answers[0]['content']['environment']} (demo: nothing happened)."


TOOLS: dict[str, DemoTool] = {t.name: t for t in [
    DemoTool("choose_repository", "Saves notes to a repository it asks you to name (a form question).",
             _one(REPO),
             lambda _a, ans: _not_accepted(ans) or f"Notes would be saved to {ans[0]['content']['repo']} (demo).",
             annotations={"readOnlyHint": False, "destructiveHint": False}),
    DemoTool("delete_branch", "Deletes branch main after asking you to confirm (a lone yes/no).",
             _one(DELETE),
             lambda _a, ans: _not_accepted(ans) or ("Branch main would be deleted now (demo: nothing happened)."
                                                    if ans[0]["content"].get("confirm") else "Not confirmed; kept."),
             annotations={"destructiveHint": True}),
    DemoTool("login", "Signs you in to a service through its web page (a url-mode question).",
             _one(LOGIN),
             lambda _a, ans: _not_accepted(ans) or "Thanks: you consented to sign in (demo: no real service).",
             annotations={"readOnlyHint": True}),
    DemoTool("create_issue", "Files an issue from a form with choices, dates and labels.",
             _one(ISSUE),
             lambda _a, ans: _not_accepted(ans) or f"Issue would be filed: {ans[0]['content']} (demo).",
             annotations={"destructiveHint": False}),
    DemoTool("deploy", "Deploys a build, asking twice: where, then whether.",
             _deploy_next, _deploy_finish, annotations={"destructiveHint": True}),
]}
