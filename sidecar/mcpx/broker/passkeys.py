"""Passkeys: a person's WebAuthn credentials, and the proof that the person was there (docs/presence.md).

Every check of a registration or an assertion is py_webauthn's (docs/choices.md): nothing here reads CBOR or a
signature. What is mcpx's own is what an assertion must sign: a challenge derived from the question's id, a hash
of exactly what was shown and what is being accepted, and a single-use nonce this daemon issued for it. So an
assertion made for one question, or for other content, or used once already, proves nothing.

py_webauthn is imported in the functions that call it: with cryptography, pyOpenSSL and pyasn1 under it, it is the
largest import of a daemon's start, and a daemon whose people never enrol a passkey never needs it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mcpx.broker.models import Elicitation, Passkey
from mcpx.broker.refusals import Forbidden
from mcpx.broker.store import Tx

RP_NAME = "mcpx"
# how long a challenge the daemon issued may be answered: the time to read a prompt and touch a key
CHALLENGE_TTL = 300.0
PERSON = r"^[A-Za-z0-9_-]{1,64}$"  # a person's name, as the config's `people` names them


def shown_hash(q: Elicitation, content: dict[str, Any] | None) -> str:
    """A hash of exactly what the person was shown and is accepting: the question's words, its schema or url, the
    content accepted, and for a confirmed write the exact request. Canonical JSON, so the same question and content
    hash alike wherever they are hashed."""
    what = {"id": q.id, "server": q.server, "tool": q.tool, "mode": q.mode, "message": q.message,
            "requestedSchema": q.requested_schema, "url": q.url, "action": "accept", "content": content,
            # mcpx's own confirmation of a write: the hash of exactly the request the accept lets go
            "confirms": q.confirms.wire() if q.confirms is not None else None}
    return hashlib.sha256(json.dumps(what, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode()).hexdigest()


def challenge_for(q: Elicitation, content: dict[str, Any] | None, nonce: str) -> bytes:
    """The challenge an assertion for accepting `q` with `content` signs."""
    return hashlib.sha256(f"mcpx-presence\0{q.id}\0{shown_hash(q, content)}\0{nonce}".encode()).digest()


@dataclass(frozen=True)
class Proof:
    """An assertion offered for an accept, and where the page that made it was served (the relying party): the
    origin is the inbox's own address, never what the browser says it is."""

    nonce: str
    credential: dict[str, Any]
    origin: str
    rp_id: str

    def credential_id(self) -> str:
        from webauthn.helpers import bytes_to_base64url, parse_authentication_credential_json
        from webauthn.helpers.exceptions import WebAuthnException

        try:
            return bytes_to_base64url(parse_authentication_credential_json(self.credential).raw_id)
        except (WebAuthnException, ValueError, TypeError, KeyError) as exc:
            raise Forbidden(f"the passkey's answer is not a WebAuthn assertion: {exc}") from None


class Nonces:
    """The challenges this daemon handed out, each for one question, each taken once."""

    def __init__(self) -> None:
        self._issued: dict[str, tuple[str, float]] = {}

    def issue(self, eid: str, now: float | None = None) -> str:
        now = time.time() if now is None else now
        self._issued = {n: (e, t) for n, (e, t) in self._issued.items() if t > now}  # the expired ones go
        nonce = secrets.token_urlsafe(24)
        self._issued[nonce] = (eid, now + CHALLENGE_TTL)
        return nonce

    def take(self, eid: str, nonce: str, now: float | None = None) -> Forbidden | None:
        """Why `nonce` cannot prove an answer to `eid` (None: it can, and it is used up now)."""
        now = time.time() if now is None else now
        issued = self._issued.get(nonce)
        if issued is None:
            return Forbidden("this passkey signature was used before, or its challenge expired or was never issued "
                             "by this daemon: open the question's page and sign again")
        if issued[0] != eid:
            return Forbidden(f"this passkey signature was made for another question ({issued[0]}), not {eid}")
        del self._issued[nonce]
        if issued[1] <= now:
            return Forbidden("the passkey's challenge expired: open the question's page and sign again")
        return None


def authentication_options(q: Elicitation, content: dict[str, Any] | None, nonce: str, rp_id: str) -> str:
    """The options a page passes to navigator.credentials.get, as JSON: user verification required, any of the
    person's passkeys (discoverable)."""
    from webauthn import generate_authentication_options, options_to_json
    from webauthn.helpers.structs import UserVerificationRequirement

    options = generate_authentication_options(rp_id=rp_id, challenge=challenge_for(q, content, nonce),
                                              user_verification=UserVerificationRequirement.REQUIRED)
    return options_to_json(options)


def _signed(credential: dict[str, Any], challenge: bytes, rp_id: str, origin: str, key: Passkey, what: str) -> int:
    """The new sign count, if `credential` is `key`'s assertion, with user verification, of `challenge`; Forbidden
    saying that it did not sign `what`, and why."""
    from webauthn import verify_authentication_response
    from webauthn.helpers import base64url_to_bytes
    from webauthn.helpers.exceptions import WebAuthnException

    try:
        verified = verify_authentication_response(
            credential=credential, expected_challenge=challenge, expected_rp_id=rp_id, expected_origin=origin,
            credential_public_key=base64url_to_bytes(key.public_key),
            credential_current_sign_count=key.sign_count, require_user_verification=True)
    except (WebAuthnException, ValueError, TypeError, KeyError) as exc:
        raise Forbidden(f"{key.person}'s passkey did not sign {what}: {exc}") from None
    return int(verified.new_sign_count)


def verify_assertion(proof: Proof, q: Elicitation, content: dict[str, Any] | None, key: Passkey) -> int:
    """The new sign count, if `proof` is `key`'s assertion, with user verification, of accepting `q` with
    `content` under the nonce it names; Forbidden saying why not."""
    return _signed(proof.credential, challenge_for(q, content, proof.nonce), proof.rp_id, proof.origin, key,
                   "accepting exactly this question")


def registration_options(person: str, challenge: bytes, rp_id: str, existing: list[str]) -> str:
    """The options a page passes to navigator.credentials.create, as JSON: a discoverable passkey with user
    verification, none the person already has."""
    from webauthn import generate_registration_options, options_to_json
    from webauthn.helpers import base64url_to_bytes
    from webauthn.helpers.structs import (
        AuthenticatorSelectionCriteria,
        PublicKeyCredentialDescriptor,
        ResidentKeyRequirement,
        UserVerificationRequirement,
    )

    options = generate_registration_options(
        rp_id=rp_id, rp_name=RP_NAME, user_name=person, user_id=hashlib.sha256(person.encode()).digest(),
        challenge=challenge, exclude_credentials=[PublicKeyCredentialDescriptor(id=base64url_to_bytes(c))
                                                  for c in existing],
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED, user_verification=UserVerificationRequirement.REQUIRED))
    return options_to_json(options)


def verify_registration(person: str, credential: dict[str, Any], challenge: bytes, rp_id: str, origin: str,
                        now: datetime) -> Passkey:
    """The passkey `credential` registers for `person`; Forbidden saying why it does not."""
    from webauthn import verify_registration_response
    from webauthn.helpers import bytes_to_base64url
    from webauthn.helpers.exceptions import WebAuthnException

    try:
        verified = verify_registration_response(credential=credential, expected_challenge=challenge,
                                                expected_rp_id=rp_id, expected_origin=origin,
                                                require_user_verification=True)
    except (WebAuthnException, ValueError, TypeError, KeyError) as exc:
        raise Forbidden(f"the passkey could not be registered: {exc}") from None
    return Passkey(id=bytes_to_base64url(verified.credential_id), person=person,
                   public_key=bytes_to_base64url(verified.credential_public_key),
                   sign_count=int(verified.sign_count), created=now)


def _enrolled(tx: Tx, cid: str, may_sign: Callable[[str], Forbidden | None]) -> Passkey:
    key = tx.passkey(cid)
    if key is None:
        raise Forbidden(f"passkey {cid} is not enrolled here (it may have been revoked): mcpx person list")
    if (refused := may_sign(key.person)) is not None:
        raise refused
    return key


def _used(tx: Tx, key: Passkey, count: int, now: float) -> None:
    """The passkey's use recorded: its sign count must grow (a replay or a copied key shows an old one)."""
    if not tx.use_passkey(key.id, count, now):
        raise Forbidden(f"{key.person}'s passkey {key.id} showed sign count {count}, not more than before: a "
                        "replayed signature or a copied passkey is refused")


def prove(tx: Tx, proof: Proof, q: Elicitation, content: dict[str, Any] | None, now: float,
          may_sign: Callable[[str], Forbidden | None]) -> Passkey:
    """The enrolled passkey whose assertion `proof` is of accepting `q` with `content`, its use recorded; Forbidden
    saying why not. Inside the unit that answers, so the use and the answer commit together."""
    key = _enrolled(tx, proof.credential_id(), may_sign)
    _used(tx, key, verify_assertion(proof, q, content, key), now)
    return key


# ---- enrolment that is not blindly trusted (docs/presence.md): a person who has a passkey adds another only with
# an assertion by one they have (or by the daemon's owner's), signing exactly the new passkey

def vouch_challenge(link: str, key: Passkey) -> bytes:
    """What an enrolled passkey signs to vouch for `key`, a new passkey of its person: the enrolment link it came
    through, the person, and exactly the new credential and its public key."""
    return hashlib.sha256(f"mcpx-enrol\0{link}\0{key.person}\0{key.id}\0{key.public_key}".encode()).digest()


def vouch_options(challenge: bytes, rp_id: str, vouchers: list[str]) -> str:
    """The options a page passes to navigator.credentials.get to vouch: one of `vouchers` (credential ids), with
    user verification."""
    from webauthn import generate_authentication_options, options_to_json
    from webauthn.helpers import base64url_to_bytes
    from webauthn.helpers.structs import PublicKeyCredentialDescriptor, UserVerificationRequirement

    options = generate_authentication_options(
        rp_id=rp_id, challenge=challenge, user_verification=UserVerificationRequirement.REQUIRED,
        allow_credentials=[PublicKeyCredentialDescriptor(id=base64url_to_bytes(c)) for c in vouchers])
    return options_to_json(options)


@dataclass(frozen=True)
class Vouch:
    """An enrolled passkey's assertion offered for a new one: the challenge it must sign (vouch_challenge), and
    where the page that made it was served (the relying party)."""

    credential: dict[str, Any]
    challenge: bytes
    origin: str
    rp_id: str

    def credential_id(self) -> str:
        return Proof("", self.credential, self.origin, self.rp_id).credential_id()


def verify_vouch(vouch: Vouch, new: Passkey, key: Passkey) -> int:
    """The new sign count of `key`, if `vouch` is its assertion, with user verification, of adding `new`; Forbidden
    saying why not."""
    return _signed(vouch.credential, vouch.challenge, vouch.rp_id, vouch.origin, key,
                   f"adding passkey {new.id} for {new.person}")


def record_use(tx: Tx, key: Passkey, count: int, now: float) -> None:
    """`key`'s use with sign count `count`, inside the unit it let through; Forbidden if it was revoked meanwhile, or
    its count did not grow."""
    if tx.passkey(key.id) is None:
        raise Forbidden(f"passkey {key.id} is not enrolled here (it may have been revoked): mcpx person list")
    _used(tx, key, count, now)
