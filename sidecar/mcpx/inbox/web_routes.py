"""The web inbox's routes, on the daemon's TCP listener: pages for people, answers recorded as person:web.

Who may see what:
- a browser signed in with the inbox token (a cookie, set by opening the URL `mcpx inbox` prints) sees every
  page, and the daemon's own event stream (/v1/events) that keeps the list current, and a question's page
  (should the question end by another way while it is open, the page shows how, in place of its form);
- a question's link (`mcpx elicit link ID`) opens that one question, and nothing else, while it is pending;
- anyone else gets a 401 page that says how to sign in. The unix socket is no exception: what answers as
  person:web must hold the token or the link, which the daemon hands out only past the agent-shell guard.

Forms are posted with the cookie (SameSite=Strict) or with the link's secret in the query; a post whose Origin
is another site's is refused. Pages are sent with no-referrer, so neither a link nor the inbox's address leaks
to the page a url-mode question opens.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcpx.broker import passkeys
from mcpx.broker.broker import Broker
from mcpx.broker.models import ACTIONS, Answer, Elicitation, is_action
from mcpx.broker.refusals import BrokerError, InvalidContent
from mcpx.broker.store import QuestionFilter
from mcpx.inbox import pages
from mcpx.inbox.ceremony import Enrolments, enrolment_terms, passkey_base, relying_party
from mcpx.inbox.html_form import content_of_form
from mcpx.inbox.signing import InboxKeys
from mcpx.presentation.urlfacts import url_facts
from mcpx.shared.ids import is_id
from mcpx.shared.routes import Routes

log = logging.getLogger("mcpx.inbox")

BY = "person:web"
STATIC = {"inbox.css": "text/css", "inbox.js": "text/javascript", "passkey.js": "text/javascript"}
HEADERS = {
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; base-uri 'none'; frame-ancestors 'none'",
}
SIGN_IN = ("Run `mcpx inbox` in your own terminal: it opens this inbox signed in (or `mcpx inbox --print` prints "
           "the address to open). For one question on another device: `mcpx elicit link ID`.")


def html(text: str, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8",
                        headers={**HEADERS, **(headers or {})})


def refusal(status: int, title: str, text: str, hint: str | None = None) -> web.Response:
    return html(pages.message_page(title, text, hint), status)


@dataclass
class Access:
    """How a request reached a question: signed in (the whole inbox), or by that question's link."""

    signed_in: bool
    link: str | None = None
    person: str | None = None  # an approver's own link: who answers


class PasskeyAnswer(BaseModel):
    """What a page posts to accept a question with a passkey: the nonce its challenge was bound to, the content as
    the challenge was made for it, and the browser's assertion (PublicKeyCredential.toJSON())."""

    model_config = ConfigDict(extra="forbid")
    nonce: str = Field(min_length=1, max_length=200)
    content: dict[str, Any] | None = None
    credential: dict[str, Any]


class PasskeyEnrolment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    credential: dict[str, Any]


def _json(message: str, status: int = 200, **more: Any) -> web.Response:
    return web.json_response({"message": message, **more}, status=status, headers=HEADERS)


@dataclass
class Inbox:
    broker: Broker
    keys: InboxKeys
    base: str = ""  # http://host:port, once the listener is up
    enrolments: Enrolments = field(default_factory=Enrolments)

    @property
    def cookie(self) -> str:
        # one cookie jar serves every port of a host: each daemon's inbox names its cookie after its port
        return f"mcpx_inbox_{urlsplit(self.base).port or 0}"

    # ---- addresses

    def login_url(self) -> str:
        return f"{self.base}/inbox/login?token={self.keys.token}"

    def page_url(self, eid: str) -> str:
        """A question's page in the inbox: it opens for a browser signed in, and for nobody else."""
        return f"{self.base}/inbox/q/{eid}"

    def link_url(self, eid: str) -> str:
        """A question's link: it opens that one question, with no other credential, while it is pending."""
        return self.base + pages.question_href(eid, self.keys.link_secret(eid))

    def presence_url(self, eid: str) -> str:
        """A question's link where a passkey can sign it: the link, reached by name (docs/presence.md)."""
        return passkey_base(self.base) + pages.question_href(eid, self.keys.link_secret(eid))

    def enrol_url(self, person: str, by: str) -> str:
        """A single-use link where `person` creates a passkey (`by`: who asked for it)."""
        return passkey_base(self.base) + f"/inbox/enroll/{self.enrolments.issue(person, by)}"

    def approver_url(self, eid: str, person: str, action: str | None = None, *, by_name: bool = False) -> str:
        """An approver's own link (their page, or with `action` the POST that answers as them); `by_name`: reached
        by name, where a passkey can sign."""
        base = passkey_base(self.base) if by_name else self.base
        return base + pages.question_href(eid, self.keys.approver_link(eid, person), action)

    # ---- who is asking

    def signed_in(self, request: web.Request) -> bool:
        return self.keys.token_ok(request.cookies.get(self.cookie))

    def admits(self, request: web.Request) -> bool:
        """For the daemon's TCP guard: the inbox checks its own routes; the event stream is open to a browser
        signed in."""
        if request.path == "/inbox" or request.path.startswith("/inbox/"):
            return True
        return request.path == "/v1/events" and request.method == "GET" and self.signed_in(request)

    def _access(self, request: web.Request, eid: str) -> Access | web.Response:
        if self.signed_in(request):
            return Access(True)
        link = request.query.get("link")
        if link is None:
            return refusal(401, "Sign in to the inbox", "This page is for the person signed in to this inbox.",
                           SIGN_IN)
        person = self.keys.approver_of(eid, link) if is_id(eid, "elc") else None
        if person is not None:
            return Access(False, link, person)
        if not is_id(eid, "elc") or not self.keys.link_ok(eid, link):
            return refusal(403, "This link does not open anything",
                           "The link is not one mcpx made for this question: it may be mistyped or cut short.",
                           "Ask for a fresh one: mcpx elicit link ID")
        return Access(False, link)

    @staticmethod
    def _cross_site(request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        return origin is not None and origin != "null" and urlsplit(origin).netloc != request.host

    # ---- routes

    def install(self, routes: Routes) -> None:
        routes.add_get("/inbox", self.list_page)
        routes.add_get("/inbox/login", self.login)
        routes.add_get("/inbox/rows", self.rows)
        routes.add_get("/inbox/static/{name}", self.static)
        routes.add_get("/inbox/q/{id}", self.question)
        routes.add_get("/inbox/q/{id}/outcome", self.outcome)
        routes.add_post("/inbox/q/{id}/{action}", self.post)
        routes.add_post("/inbox/passkey/{id}/challenge", self.passkey_challenge)
        routes.add_post("/inbox/passkey/{id}/accept", self.passkey_accept)
        routes.add_get("/inbox/enroll/{token}", self.enrol_page)
        routes.add_post("/inbox/enroll/{token}/options", self.enrol_options)
        routes.add_post("/inbox/enroll/{token}", self.enrol)
        routes.add_post("/inbox/enroll/{token}/vouch", self.enrol_vouch)
        routes.add_route("*", "/inbox/{tail:.*}", self.unknown)

    async def login(self, request: web.Request) -> web.StreamResponse:
        if not self.keys.token_ok(request.query.get("token")):
            return refusal(401, "Sign in to the inbox", "This sign-in address is not this inbox's.", SIGN_IN)
        filters = {k: request.query[k] for k in ("session", "server") if request.query.get(k)}
        where = "/inbox" + ("?" + urlencode(filters) if filters else "")  # the token stays out of the address bar
        response = web.Response(status=303, headers={**HEADERS, "Location": where})
        response.set_cookie(self.cookie, self.keys.token, httponly=True, samesite="Strict", path="/")
        return response

    async def static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in STATIC:
            return refusal(404, "Not found", "No such file in the inbox.")
        return web.Response(text=pages.asset(f"static/{name}"), content_type=STATIC[name],
                            headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"})

    async def unknown(self, request: web.Request) -> web.StreamResponse:
        return refusal(404, "Not found", "The inbox has no such page.", "The list of waiting questions is at /inbox.")

    async def _pending(self, request: web.Request) -> list[Elicitation]:
        session = request.query.get("session") or None
        server = request.query.get("server") or None
        return await self.broker.questions(QuestionFilter(state="pending", session=session, server=server))

    async def list_page(self, request: web.Request) -> web.StreamResponse:
        if not self.signed_in(request):
            return refusal(401, "Sign in to the inbox", "This inbox is for the person signed in to it.", SIGN_IN)
        questions = await self._pending(request)
        return html(pages.list_page(questions, request.query.get("session"), request.query.get("server")))

    async def rows(self, request: web.Request) -> web.StreamResponse:
        if not self.signed_in(request):
            return html("", 401)
        return html(pages.rows(await self._pending(request)))

    async def _question(self, eid: str) -> tuple[Elicitation, Answer | None] | web.Response:
        try:
            return await self.broker.get(eid)
        except BrokerError as exc:
            return refusal(exc.status, "No such question", str(exc),
                           "It may have been removed, or the address is mistyped.")

    async def _follow(self, access: Access) -> int | None:
        """For a page about to read its question: where the audit log stands now, so that the page's script,
        following the event stream from there, misses no transition that came after the read. Only a browser
        signed in may open the stream."""
        return await self.broker.last_seq() if access.signed_in else None

    async def question(self, request: web.Request) -> web.StreamResponse:
        eid = request.match_info["id"]
        access = self._access(request, eid)
        if isinstance(access, web.Response):
            return access
        follow = await self._follow(access)
        found = await self._question(eid)
        if isinstance(found, web.Response):
            return found
        q, answer = found
        # a link lives as long as its question: afterwards it shows what became of it, and a 410
        status = 410 if access.link is not None and q.state != "pending" else 200
        # a passkey signs only on a page reached by name: from the address here, the person is sent there
        elsewhere = (self.presence_url(eid) if q.presence and q.state == "pending"
                     and request.url.host != relying_party(self.base)[0] else None)
        return html(pages.question_page(q, answer, link=access.link, follow=follow, passkey_page=elsewhere), status)

    async def outcome(self, request: web.Request) -> web.StreamResponse:
        """What became of a question, as the card its open page puts in place of the form once it ended by another
        way; 409 while it is still pending."""
        eid = request.match_info["id"]
        access = self._access(request, eid)
        if isinstance(access, web.Response):
            return access
        found = await self._question(eid)
        if isinstance(found, web.Response):
            return found
        q, answer = found
        if q.state == "pending":
            return html("", 409)
        return html(pages.outcome(q, answer, elsewhere=True))

    async def post(self, request: web.Request) -> web.StreamResponse:
        eid, action = request.match_info["id"], request.match_info["action"]
        if self._cross_site(request):
            return refusal(403, "Refused", "An answer posted from another site is not taken.")
        access = self._access(request, eid)
        if isinstance(access, web.Response):
            return access
        if not is_action(action) and action not in ("open", "refuse"):
            return refusal(404, "Not found", f"A question is answered with {', '.join(ACTIONS)}.")
        follow = await self._follow(access)
        found = await self._question(eid)
        if isinstance(found, web.Response):
            return found
        q, answer = found
        form = await request.post()
        if not is_action(action):  # open or refuse
            return await self._consent(q, answer, access, action == "open", follow)
        content: dict[str, Any] | None = None
        if action == "accept" and q.mode == "form" and access.person is None:  # an approval's content is a yes
            content = content_of_form(q.requested_schema, form)
        reason = str(form.get("reason") or "").strip() if action == "decline" else ""
        by = BY if access.person is None else f"person:{access.person}"
        try:
            if access.person is not None:
                q, answer = await self.broker.approve(eid, access.person, action, reason or None)
            else:
                q, answer = await self.broker.answer(eid, action, content, by=BY, reason=reason or None)
        except InvalidContent as exc:
            return html(pages.question_page(q, None, link=access.link, values=content, problems=exc.fields,
                                            error="The answer does not fit the question; see each field.",
                                            follow=follow), 422)
        except BrokerError as exc:
            now, prior = await self.broker.get(eid)
            return html(pages.question_page(now, prior, link=access.link, error=str(exc)), exc.status)
        return html(pages.question_page(q, answer, link=access.link, notice=f"Recorded: {action} by {by}."))

    async def _consent(self, q: Elicitation, answer: Answer | None, access: Access, yes: bool,
                       follow: int | None) -> web.StreamResponse:
        """The person's yes or no to opening a url-mode question's page, audited; only a yes leads there."""
        if q.mode != "url" or q.state != "pending" or not q.url:
            return html(pages.question_page(q, answer, link=access.link,
                                            error="There is no page to open for this question now."), 409)
        facts = url_facts(q.url)
        await self.broker.record_consent(q, yes, BY, facts.domain)
        if not yes:
            return html(pages.question_page(q, None, link=access.link, consent=False, follow=follow))
        raise web.HTTPSeeOther(q.url, headers=HEADERS)

    # ---- passkeys (docs/presence.md): every check is the broker's, through py_webauthn

    async def _passkey_question(self, request: web.Request) -> tuple[Elicitation, Access] | web.Response:
        eid = request.match_info["id"]
        if self._cross_site(request):
            return _json("An answer posted from another site is not taken.", 403)
        access = self._access(request, eid)
        if isinstance(access, web.Response):
            return _json("This page is for the person signed in, or the question's link.", access.status)
        try:
            q, _ = await self.broker.get(eid)
        except BrokerError as exc:
            return _json(str(exc), exc.status)
        return q, access

    async def passkey_challenge(self, request: web.Request) -> web.StreamResponse:
        """The options a passkey signs to accept this question with what the form holds: bound to its id, to a
        hash of what was shown and what is accepted, and to a nonce used once."""
        found = await self._passkey_question(request)
        if isinstance(found, web.Response):
            return found
        q, _ = found
        form = await request.post()
        content = content_of_form(q.requested_schema, form) if q.mode == "form" and q.approvals is None else None
        try:
            options, nonce, clean = await self.broker.presence_challenge(q.id, content, relying_party(self.base)[0])
        except InvalidContent as exc:
            return _json(str(exc), exc.status, fields=exc.fields)
        except BrokerError as exc:
            return _json(str(exc), exc.status)
        return web.json_response({"options": json.loads(options), "nonce": nonce, "content": clean},
                                 headers=HEADERS)

    async def passkey_accept(self, request: web.Request) -> web.StreamResponse:
        """An accept signed by a passkey: an approver's vote if the question needs approvals, else the answer."""
        found = await self._passkey_question(request)
        if isinstance(found, web.Response):
            return found
        q, access = found
        try:
            body = PasskeyAnswer.model_validate_json(await request.read())
        except ValidationError as exc:
            return _json(f"not a passkey answer: {exc.errors()[0]['msg']}", 400)
        rp_id, origin = relying_party(self.base)
        proof = passkeys.Proof(body.nonce, body.credential, origin, rp_id)
        try:
            if q.approvals is not None:
                q, answer = await self.broker.approve(q.id, access.person, "accept", proof=proof)
            else:
                q, answer = await self.broker.answer(q.id, "accept", body.content, by=BY, proof=proof)
        except BrokerError as exc:
            return _json(str(exc), exc.status)
        if answer is None:
            return _json(f"Counted: {q.approvals.status if q.approvals else 'approved'}, verified by passkey.")
        return _json(f"Recorded: accept by {answer.by}, verified by passkey.")

    async def enrol_page(self, request: web.Request) -> web.StreamResponse:
        token = request.match_info["token"]
        try:
            enrolment = self.enrolments.get(token)
        except BrokerError as exc:
            return refusal(410, "This enrolment link is spent", str(exc))
        terms = enrolment_terms(enrolment.person, await self.broker.vouchers(enrolment.person))
        return html(pages.enrol_page(enrolment.person, f"/inbox/enroll/{token}", terms))

    async def enrol_options(self, request: web.Request) -> web.StreamResponse:
        if self._cross_site(request):
            return _json("Refused from another site.", 403)
        try:
            enrolment = self.enrolments.get(request.match_info["token"])
        except BrokerError as exc:
            return _json(str(exc), 410)
        existing = [key.id for key in await self.broker.passkeys(enrolment.person)]
        options = passkeys.registration_options(enrolment.person, enrolment.challenge, relying_party(self.base)[0],
                                                existing)
        return web.json_response({"options": json.loads(options)}, headers=HEADERS)

    async def enrol(self, request: web.Request) -> web.StreamResponse:
        """The passkey the page created: enrolled now if it is the person's first (trusted on first use), else held
        until an enrolled passkey vouches for it (the answer carries the options that assertion signs)."""
        token = request.match_info["token"]
        if self._cross_site(request):
            return _json("Refused from another site.", 403)
        try:
            enrolment = self.enrolments.get(token)
            body = PasskeyEnrolment.model_validate_json(await request.read())
            rp_id, origin = relying_party(self.base)
            key = passkeys.verify_registration(enrolment.person, body.credential, enrolment.challenge, rp_id,
                                               origin, datetime.fromtimestamp(time.time(), UTC))
            vouchers = await self.broker.vouchers(enrolment.person)
            if vouchers is None:
                await self.broker.enroll(key, enrolment.by)
        except ValidationError as exc:
            return _json(f"not a passkey: {exc.errors()[0]['msg']}", 400)
        except BrokerError as exc:
            return _json(str(exc), exc.status)
        if vouchers is None:
            self.enrolments.take(token)
            return _json(f"{enrolment.person}'s passkey is enrolled ({key.id}), trusted on first use. You may close "
                         "this page.", id=key.id)
        enrolment.held = key
        allowed = [k.id for k in await self.broker.passkeys() if k.person in vouchers]
        options = passkeys.vouch_options(passkeys.vouch_challenge(token, key), rp_id, allowed)
        return _json(f"The new passkey ({key.id}) is not enrolled yet: {enrolment.person} has had one, so sign "
                     f"with a passkey of {' or '.join(vouchers)} to add it.", 202, id=key.id,
                     vouch=json.loads(options))

    async def enrol_vouch(self, request: web.Request) -> web.StreamResponse:
        """An enrolled passkey's assertion of exactly the new passkey this link holds: then it is enrolled."""
        token = request.match_info["token"]
        if self._cross_site(request):
            return _json("Refused from another site.", 403)
        try:
            enrolment = self.enrolments.get(token)
            if enrolment.held is None:
                return _json("No passkey waits here for another to vouch for it: create it first.", 409)
            body = PasskeyEnrolment.model_validate_json(await request.read())
            rp_id, origin = relying_party(self.base)
            key = enrolment.held
            record = await self.broker.enroll(key, enrolment.by, passkeys.Vouch(
                body.credential, passkeys.vouch_challenge(token, key), origin, rp_id))
        except ValidationError as exc:
            return _json(f"not a passkey: {exc.errors()[0]['msg']}", 400)
        except BrokerError as exc:
            return _json(str(exc), exc.status)
        self.enrolments.take(token)
        return _json(f"{enrolment.person}'s passkey is enrolled ({key.id}), vouched for by "
                     f"{record.data['vouchedBy']}'s passkey. You may close this page.", id=key.id)
