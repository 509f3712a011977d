"""The /v1 routes that hand out the inbox's addresses: the one that signs a browser in, and a question's link.

Each is a credential to answer as the person (person:web), so each is refused, as a person's answer is, to a
process in an agent's shell (api/peers.py: refuse_agent_as_person); docs/choices.md says why.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from mcpx.api.peers import answerer_of, refuse_agent_as_person
from mcpx.api.schemas import QuestionPath
from mcpx.api.state import BROKER
from mcpx.api.table import Api, Reply, RouteCall, RouteError, json_reply
from mcpx.broker import approvals
from mcpx.broker.models import Passkey, WireModel
from mcpx.broker.refusals import Gone
from mcpx.inbox.ceremony import enrolment_terms
from mcpx.inbox.notify import Notifier
from mcpx.inbox.web_routes import BY, Inbox
from mcpx.shared.routes import Routes

api = Api()
# what else may come in over TCP without the bearer token: each says yes to the requests it checks itself
TCP_GUESTS: web.AppKey[list[Callable[[web.Request], bool]]] = web.AppKey("tcp_guests", list)
INBOX: web.AppKey[Inbox] = web.AppKey("inbox", Inbox)
NOTIFIER: web.AppKey[Notifier] = web.AppKey("notifier", Notifier)
_AGENT = Reply("asked from an agent's shell: these addresses answer as the person")


class InboxAddress(WireModel):
    url: str


class LinkQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    as_: str | None = Field(default=None, alias="as", min_length=1, max_length=64,
                            description="an approver of the question: their own link, which answers as them")


def page_of(app: web.Application) -> Callable[[str], str | None]:
    """A question's page in the inbox, for the texts that say how to answer it: it opens only in a browser signed
    in, so it may be shown to an agent (a question's link may not)."""
    inbox = app.get(INBOX)
    return lambda eid: inbox.page_url(eid) if inbox is not None and inbox.base else None


def inbox_of(call: RouteCall) -> Inbox:
    inbox = call.app.get(INBOX)
    if inbox is None or not inbox.base:
        raise RouteError(503, "no_inbox", "this daemon serves no web inbox (it has no TCP listener)")
    return inbox


@api.route("GET", "/v1/inbox", "The address that opens the web inbox signed in (it carries the inbox's token)",
           tag="inbox", replies={200: Reply("the address", InboxAddress), 403: _AGENT,
                                 503: Reply("no web inbox on this daemon")})
async def inbox_address(call: RouteCall) -> web.StreamResponse:
    refuse_agent_as_person(call.request, BY)
    return web.json_response({"url": inbox_of(call).login_url()})


@api.route("GET", "/v1/elicit/{id}/link", "A question's link: it opens that one question, for one answer, while "
           "it is pending", params=QuestionPath, query=LinkQuery, tag="inbox",
           replies={200: Reply("the link", InboxAddress), 403: _AGENT, 404: Reply("no such question"),
                    410: Reply("the question has ended: its link is dead"), 503: Reply("no web inbox on this daemon")})
async def question_link(call: RouteCall) -> web.StreamResponse:
    refuse_agent_as_person(call.request, BY)
    inbox = inbox_of(call)
    q, _ = await inbox.broker.get(call.path["id"])
    if q.state != "pending":
        raise Gone(f"{q.id} is {q.state}: its link is dead, and no new one opens it", state=q.state)
    person = call.query.as_
    if person is None:
        return web.json_response({"url": inbox.presence_url(q.id) if q.presence else inbox.link_url(q.id)})
    a = q.approvals
    # a link for someone whose approval would be refused is not made: the asker's never counts, as an outsider's
    where = approvals.standing(a, person) if a is not None else "outsider"
    if a is None or where == "outsider":
        raise RouteError(400, "bad_query", f"{person} is not an approver of {q.id}", fields={"as": "not an approver"})
    if where == "asker":
        raise RouteError(400, "bad_query", f"{approvals.own_request(a, person)}; no link is made for them "
                         f"(mcpx elicit cancel {q.id} withdraws the question)", fields={"as": "the asker"})
    return web.json_response({"url": inbox.approver_url(q.id, person, by_name=q.presence)})


class PersonPath(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$", description="a person's name")


class PasskeyPath(PersonPath):
    passkey: str = Field(min_length=1, max_length=400, description="the passkey's credential id")


class PasskeyList(BaseModel):
    passkeys: list[Passkey]


class EnrolLink(WireModel):
    url: str
    terms: str = Field(description="how the passkey comes to be trusted: on first use (the person has none yet), or "
                       "once a passkey of theirs or of the daemon's owner signs it")


@api.route("POST", "/v1/people/{name}/enroll", "A single-use link where the person creates a passkey "
           "(docs/presence.md)", params=PersonPath, tag="inbox",
           replies={200: Reply("the link", EnrolLink), 403: _AGENT, 503: Reply("no web inbox on this daemon")})
async def enrol_link(call: RouteCall) -> web.StreamResponse:
    refuse_agent_as_person(call.request, BY)
    inbox, name = inbox_of(call), call.path["name"]
    terms = enrolment_terms(name, await inbox.broker.vouchers(name))
    return json_reply(EnrolLink(url=inbox.enrol_url(name, answerer_of(call.request)), terms=terms))


@api.route("GET", "/v1/people/passkeys", "Every person's passkeys", tag="inbox",
           replies={200: Reply("the passkeys", PasskeyList)})
async def passkey_list(call: RouteCall) -> web.StreamResponse:
    keys = await call.app[BROKER].passkeys()
    return web.json_response({"passkeys": [key.wire() for key in keys]})


@api.route("DELETE", "/v1/people/{name}/passkeys/{passkey}", "Revoke a person's passkey: it signs nothing from "
           "now on", params=PasskeyPath, tag="inbox",
           replies={200: Reply("revoked"), 403: _AGENT, 404: Reply("no such passkey")})
async def passkey_revoke(call: RouteCall) -> web.StreamResponse:
    refuse_agent_as_person(call.request, BY)
    await call.app[BROKER].revoke(call.path["name"], call.path["passkey"])
    return web.json_response({"revoked": call.path["passkey"], "person": call.path["name"]})


def install(app: web.Application, inbox: Inbox, routes: Routes) -> None:
    """The inbox's narrow hook into the daemon's app: its pages (added through `routes`), and what it admits on TCP
    without the bearer."""
    app[INBOX] = inbox
    inbox.install(routes)
    app[TCP_GUESTS].append(inbox.admits)
