"""What a person should know about a url-mode question's URL before opening it (MCP: show the full
URL and its domain, never open it without consent)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class UrlFacts:
    url: str
    domain: str
    warning: str | None


def url_facts(url: str) -> UrlFacts:
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        host = ""
    if not host:
        return UrlFacts(url, "(none)", "this URL names no host; do not open it")
    labels = host.split(".")
    if any(label.startswith("xn--") for label in labels):
        try:
            shown = host.encode("ascii").decode("idna")
        except UnicodeError:
            shown = host
        return UrlFacts(url, host, f"the domain is Punycode: it reads as {shown!r} and may imitate another")
    if not host.isascii():
        return UrlFacts(url, host, "the domain has non-ASCII letters and may imitate another")
    return UrlFacts(url, host, None)


def reachable_elsewhere(url: str) -> bool:
    """Whether another device could open `url`: not when its host is this machine's loopback."""
    host = urlsplit(url).hostname or ""
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host not in ("localhost", "localhost.localdomain") and not host.endswith(".localhost")


LOOPBACK_NOTE = ("This address is on this machine's loopback: another device (your phone) cannot open it. Serve the "
                 "inbox where it can — `mcpx daemon restart --listen 0.0.0.0:7878` on a network you trust, or a "
                 "tunnel to the inbox's port (ssh -R, Tailscale; docs/inbox.md) — then ask for the link again.")
