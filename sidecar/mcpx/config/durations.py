"""Durations as people write them in config: `120`, `"120s"`, `"10m"`, `"1h30m"`, `"500ms"`."""

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
# what parse_duration takes as a string, for documents that describe it (openapi.json)
PATTERN = r"^ *([0-9]+(\.[0-9]+)?|([0-9]+(\.[0-9]+)?(ms|s|m|h|d))+) *$"
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: object) -> float:
    """Seconds, from a number (already seconds) or a string of number+unit parts."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string like '120s' or '10m', not a boolean")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"a duration cannot be negative: {value}")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"a duration is a number of seconds or a string like '120s', not {type(value).__name__}")
    text = value.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    pos, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"not a duration: {value!r} (write e.g. '120s', '10m', '1h30m' or a number of seconds)")
    return total


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
