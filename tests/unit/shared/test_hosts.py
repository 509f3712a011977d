"""What mcpx reads of the host that started `mcpx serve` (mcpx/shared/hostenv.py), from the environment Claude Code
2.1.332 gives its MCP servers and hooks."""

from __future__ import annotations

from mcpx.shared.hostenv import Host, host_of

SESSION = "41ce398b-4632-4af1-ad7f-5214be603019"


def test_claude_codes_tui_print_mode_and_sdks() -> None:
    base = {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": SESSION}
    assert host_of({**base, "CLAUDE_CODE_ENTRYPOINT": "cli"}) == Host(name="claude-code", session=f"claude-{SESSION}")
    for headless in ("sdk-cli", "sdk-ts", "sdk-py"):
        host = host_of({**base, "CLAUDE_CODE_ENTRYPOINT": headless})
        assert host is not None and host.unattended, headless
    assert host_of({"CLAUDECODE": "1"}) == Host(name="claude-code")  # no session id: the daemon's fallback


def test_any_other_host_is_none() -> None:
    assert host_of({}) is None
    assert host_of({"CLAUDE_CODE_SESSION_ID": SESSION, "OPENCODE": "1"}) is None
