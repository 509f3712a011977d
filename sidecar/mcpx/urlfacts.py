"""What a person should know about a url-mode question's URL before opening it (MCP: show the full
URL and its domain, never open it without consent)."""

from __future__ import annotations

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
