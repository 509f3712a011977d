"""Command lines and URLs as mcpx shows them: whatever looks like a secret is masked.

A server's command line can carry a credential (`--api-key sk-…`, `--token=…`, `-H "Authorization:
Bearer …"`, `GITHUB_TOKEN=…`, a URL with a password). It is shown in logs, API errors, task records
and `mcpx status`, always through `shown_command` or `shown_url`, never raw. The rules err towards
masking: a masked file path costs nothing, a shown key costs the key.
"""

from __future__ import annotations

import re
import shlex

MASK = "[redacted]"

# a name that says it holds a secret, word-wise: api-key, API_KEY, x-auth-token, client_secret, password
_SECRET_NAME = re.compile(
    r"(?:^|[-_.])(?:api-?key|apikey|key|keys|token|tokens|secret|secrets|password|passwd|passphrase|pwd|pass|"
    r"auth|authorization|credential|credentials|bearer|cookie|signature|sig)(?:$|[-_.])", re.IGNORECASE)
_ENV_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.+)$", re.DOTALL)
_HEADER = re.compile(r"^([A-Za-z0-9_-]+)(\s*:\s*)(\S.*)$", re.DOTALL)
_TEXT_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # a scheme's credentials: Authorization: Bearer …, Basic …, Token …
    (re.compile(r"\b(Bearer|Basic|Token|Digest)(\s+)[^\s'\"]+", re.IGNORECASE), rf"\1\2{MASK}"),
    # user:password@ in a URL
    (re.compile(r"\b([a-z][a-z0-9+.-]*://[^\s/:@]*):[^\s/@]*@", re.IGNORECASE), rf"\1:{MASK}@"),
    # ?api_key=…&token=… in a query string
    (re.compile(r"([?&;][A-Za-z0-9_.-]*?(?:key|token|secret|password|passwd|pwd|auth|sig|signature|credential)"
                r"[A-Za-z0-9_.-]*=)[^&#\s]+", re.IGNORECASE), rf"\1{MASK}"),
    # well-known token shapes, wherever they stand
    # OpenAI, Anthropic and others' sk-…, Stripe's sk_live_…: with a digit, so sk-learn-tools is not one
    (re.compile(r"\b(?:sk-|(?:sk|rk)_(?:live|test)_)(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{16,}"), MASK),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), MASK),  # GitHub
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{16,}"), MASK),  # GitLab
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), MASK),  # Slack
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), MASK),  # AWS access key ids
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), MASK),  # Google API keys
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MASK),  # JWTs
)


def secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name.strip("-")))


def mask_text(text: str) -> str:
    """Free text (one argument, a URL, a line a server printed) with secret-looking parts masked."""
    for pattern, replacement in _TEXT_RULES:
        text = pattern.sub(replacement, text)
    return text


def _mask_word(word: str) -> str:
    if word.startswith("-") and "=" in word:
        flag, value = word.split("=", 1)
        if secret_name(flag):
            return f"{flag}={MASK}" if value else word
    elif (m := _ENV_ASSIGNMENT.match(word)) and secret_name(m.group(1)):
        return f"{m.group(1)}={MASK}"
    elif (m := _HEADER.match(word)) and secret_name(m.group(1)):
        return f"{m.group(1)}{m.group(2)}{MASK}"
    return mask_text(word)


def mask_args(argv: list[str]) -> list[str]:
    """Each argument masked; the value after a secret-looking flag (`--api-key VALUE`) entirely."""
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next and not word.startswith("-"):
            out.append(MASK)
            hide_next = False
            continue
        hide_next = word.startswith("-") and "=" not in word and secret_name(word)
        out.append(_mask_word(word))
    return out


_PLACEHOLDER = "MCPXMASKED0"  # shlex leaves it unquoted, so the mask is not what makes a word need quotes


def _quote(word: str) -> str:
    return shlex.quote(word.replace(MASK, _PLACEHOLDER)).replace(_PLACEHOLDER, MASK)


def shown_command(argv: list[str]) -> str:
    """A command line as mcpx shows it anywhere: shell-quoted, secrets masked."""
    return " ".join(_quote(word) for word in mask_args(argv))


def shown_url(url: str) -> str:
    return mask_text(url)
