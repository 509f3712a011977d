"""The inbox's side of a passkey ceremony (docs/presence.md): enrolment links, and where a passkey page lives.

An enrolment link names the person and who asked for it. A person who has no passkey yet is trusted on first use;
one who has, adds another only once an enrolled passkey (theirs, or the daemon's owner's) has signed exactly the
new one: the link then holds the new passkey, created but not enrolled, until that assertion comes.

A passkey is bound to a name, never to an address: a browser refuses `127.0.0.1` as a relying party, so every
page that asks for a passkey is served, and linked to, as `localhost` (the same listener). Enrolment links are
single-use and held in memory: a link outlives neither its first use, nor its time, nor the daemon.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from mcpx.broker.models import Passkey
from mcpx.broker.refusals import Forbidden

ENROL_TTL = 900.0  # a link printed in a terminal, opened in the browser beside it
LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def passkey_base(base: str) -> str:
    """The inbox's address as a passkey page must be reached: by name (`localhost` for a loopback listener)."""
    parts = urlsplit(base)
    if parts.hostname in LOOPBACK:
        return urlunsplit((parts.scheme, f"localhost:{parts.port}", "", "", ""))
    return base


def relying_party(base: str) -> tuple[str, str]:
    """The relying party id and the origin a passkey page at `base` is checked against: the inbox's own address,
    never what a browser says it is."""
    origin = passkey_base(base)
    return urlsplit(origin).hostname or "localhost", origin


@dataclass
class Enrolment:
    person: str
    by: str  # who asked for the link (person:cli, person:rest): the audit's "who enrolled whom"
    challenge: bytes
    expires: float
    held: Passkey | None = None  # created through this link, enrolled once an enrolled passkey vouches for it


@dataclass
class Enrolments:
    """The enrolment links handed out: each names a person, carries its registration challenge, and is used once."""

    _open: dict[str, Enrolment] = field(default_factory=dict)

    def issue(self, person: str, by: str, now: float | None = None) -> str:
        now = time.time() if now is None else now
        self._open = {t: e for t, e in self._open.items() if e.expires > now}
        token = secrets.token_urlsafe(24)
        self._open[token] = Enrolment(person, by, secrets.token_bytes(32), now + ENROL_TTL)
        return token

    def get(self, token: str, now: float | None = None) -> Enrolment:
        found = self._open.get(token)
        if found is None or found.expires <= (time.time() if now is None else now):
            raise Forbidden("this enrolment link was used already, or it expired, or the daemon restarted since: "
                            "run `mcpx person enroll NAME` for a fresh one")
        return found

    def take(self, token: str) -> None:
        self._open.pop(token, None)


def enrolment_terms(person: str, vouchers: list[str] | None) -> str:
    """What an enrolment link says of how its passkey comes to be trusted: `vouchers` None when it is trusted on
    first use (Broker.vouchers), else whose passkeys may vouch for it."""
    if vouchers is None:
        return (f"{person} has no passkey: this one is trusted on first use. Whoever opens the link and creates a "
                f"passkey becomes {person} to mcpx, so open it yourself, and check `mcpx person list` after.")
    return (f"{person} has had a passkey: the new one is enrolled only once a passkey of {' or '.join(vouchers)} "
            "signs it, on the same page.")
