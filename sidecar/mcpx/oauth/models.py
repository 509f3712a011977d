"""What the authorization servers and resource servers say, and what mcpx keeps: pydantic at the boundary."""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from mcpx.config.models import HttpServer, ServerAuth


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Challenge(_Wire):
    """What a 401 or 403's WWW-Authenticate asks for (RFC 6750 §3, RFC 9728 §5.1)."""

    error: str | None = None
    scope: str | None = None
    resource_metadata: str | None = None


class ResourceMetadata(_Wire):
    """RFC 9728 protected resource metadata: who issues tokens for this server."""

    resource: str
    authorization_servers: list[str] = []
    scopes_supported: list[str] = []


class ServerMetadata(_Wire):
    """RFC 8414 (or OpenID discovery) authorization server metadata: the fields mcpx uses."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None = None
    revocation_endpoint: str | None = None
    scopes_supported: list[str] = []
    code_challenge_methods_supported: list[str] = []
    token_endpoint_auth_methods_supported: list[str] = []
    authorization_response_iss_parameter_supported: bool = False
    client_id_metadata_document_supported: bool = False


class OAuthClient(BaseModel):
    """The client mcpx is at one authorization server: from the config, or registered there (RFC 7591)."""

    client_id: str
    client_secret: str | None = None
    token_endpoint_auth_method: str = "none"
    redirect_uri: str
    registered: bool = False  # by mcpx (dynamic registration), as opposed to the config's


class Tokens(BaseModel):
    """A login's tokens for one resource at one authorization server. Never in a file, a log or an output."""

    access_token: str
    token_type: str = "Bearer"
    refresh_token: str | None = None
    expires_at: float | None = None
    scope: str | None = None
    lifetime: float | None = None  # expires_in as given: a refresh comes when a quarter of it is left
    subject: str | None = None  # whom the login is for, when the server said (an id_token's sub or name)

    def expiring(self, now: float | None = None) -> bool:
        """Due for a refresh: past its expiry, or within a quarter of its lifetime (at most 60 s) of it."""
        if self.expires_at is None:
            return False
        margin = min(60.0, (self.lifetime or 240.0) / 4)
        return (now if now is not None else time.time()) >= self.expires_at - margin


class LoginView(BaseModel):
    """One server's login as `mcpx auth list` shows it: no token in it. Its keys camelCase on the wire, as every
    /v1 document's are (`expiresAt`)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    server: str
    url: str
    state: str  # "logged-in", "needs-login", "asking", "none" (never asked for one)
    issuer: str | None = None
    subject: str | None = None
    scopes: list[str] = []
    expires_at: float | None = None
    question: str | None = None  # the login question open now
    problem: str | None = None


class Protected(BaseModel):
    """What a login is for: the protected resource's address (an MCP server's URL, a REST service's base URL), the
    entry's `auth`, and how long its login question waits (the entry's `elicit.ttl`, else the config's)."""

    model_config = ConfigDict(frozen=True)

    url: str
    auth: ServerAuth
    ttl: float | None = None

    @classmethod
    def of(cls, entry: HttpServer | Protected) -> Protected:
        if isinstance(entry, Protected):
            return entry
        return cls(url=entry.url, auth=entry.auth, ttl=entry.elicit.ttl)
