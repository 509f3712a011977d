"""JSON with comments and trailing commas, as config files are written by hand."""

import json
from typing import Any


def _string_end(text: str, start: int) -> int:
    """Index just past the string literal opening at `start` (a '"')."""
    i, n = start + 1, len(text)
    while i < n:
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    return n


def _without_comments(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == '"':
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end == -1 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end == -1:
                raise ValueError("unterminated /* comment")
            out.append("\n" * text.count("\n", i, end))  # keep line numbers for error messages
            i = end + 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _without_trailing_commas(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == '"':
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
            continue
        if text[i] == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "]}":
                i += 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def strip_comments(text: str) -> str:
    """Remove // and /* */ comments and trailing commas, leaving strings untouched."""
    return _without_trailing_commas(_without_comments(text))


def loads(text: str) -> Any:
    return json.loads(strip_comments(text))
