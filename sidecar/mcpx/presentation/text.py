"""Showing a server's words safely: they are data, so control characters never reach a terminal or a prompt raw."""

import json
import re
from datetime import datetime

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def plain(text: object, limit: int = 4000) -> str:
    """One line of untrusted text: escapes instead of control characters, newlines shown as ⏎, bounded."""
    s = str(text)
    s = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", s)
    s = s.replace("\r\n", "\n").replace("\n", " ⏎ ")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def one_line(text: object, limit: int = 4000) -> str:
    """Untrusted text shown in one line of a listing: its line breaks and runs of spaces as one space (a tool's
    description in paragraphs reads as one sentence after another, not as ⏎  ⏎), then as plain() shows it."""
    return plain(" ".join(str(text).split()), limit)


def quoted(text: object, limit: int = 4000) -> str:
    """Untrusted text in quotes, so it reads as someone else's words."""
    return "“" + plain(text, limit) + "”"


def json_text(value: object, separators: tuple[str, str] | None = None) -> str:
    """JSON to be read and copied: characters as they are, but control and direction characters (a server's
    values can carry them) written as JSON escapes — the same value, with nothing hidden."""
    text = json.dumps(value, ensure_ascii=False, separators=separators)
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def shell_quote_json(value: object) -> str:
    """A JSON argument for a POSIX shell command line."""
    text = json_text(value, separators=(",", ":"))
    return "'" + text.replace("'", "'\\''") + "'"


def clock(moment: datetime) -> str:
    """A moment as the person's clock shows it (the daemon runs on their machine): 14:02."""
    return moment.astimezone().strftime("%H:%M")
