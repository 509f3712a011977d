"""A finding of `mcpx doctor`: one line, well or not, and what to do when not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Level = Literal["ok", "note", "warn", "problem"]


@dataclass
class Finding:
    area: str  # daemon, config, store, server, opencode, claude, codex, gemini
    subject: str  # what in it: a file, a server's name, a place
    ok: bool
    says: str
    fix: str | None = None  # what to do, when not ok (or a warning's advice)
    level: Level | None = None  # ok or problem by default; a note (nothing to check) or a warning (holds, but)

    def __post_init__(self) -> None:
        if self.level is None:
            self.level = "ok" if self.ok else "problem"

    @staticmethod
    def note(area: str, subject: str, says: str) -> Finding:
        return Finding(area, subject, True, says, level="note")

    @staticmethod
    def warning(area: str, subject: str, says: str, fix: str | None = None) -> Finding:
        return Finding(area, subject, True, says, fix, level="warn")

    def line(self) -> str:
        mark = {"ok": "ok     ", "note": "-      ", "warn": "warn   ", "problem": "PROBLEM"}[self.level or "ok"]
        says = " | ".join(part.strip() for part in self.says.splitlines() if part.strip())  # one line, always
        return f"{mark} {self.area:<8} {self.subject}: {says}" + (f" — {self.fix}" if self.fix else "")

    def doc(self) -> dict[str, Any]:
        return {"area": self.area, "subject": self.subject, "ok": self.ok, "level": self.level, "says": self.says,
                "fix": self.fix}
