"""What `mcpx doctor` checks of the hosts mcpx is installed in: opencode, Claude Code, Codex CLI and Gemini CLI, each
in this project and for the user. A host where mcpx is not installed is said so, not counted a problem. Where it is,
its entry must run an mcpx that exists, and the files install wrote (the plugin's entry points, the hook, the skill)
must be there; each thing missing is named with the command that puts it back. What holds but will not work as meant
is a warning: a Codex tool timeout shorter than a question's wait, a project Codex or Gemini CLI is not trusted in."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcpx.cli.doctor_findings import Finding
from mcpx.cli.hosts.host_files import HostConfigError, shell_words


def runnable(command: str) -> bool:
    """A command's first word runs here: an executable file, or a name found on PATH."""
    if "/" in command:
        return Path(command).is_file() and os.access(command, os.X_OK)
    return shutil.which(command) is not None


def opencode() -> Iterator[Finding]:
    from mcpx.cli.hosts.opencode_files import read_json
    from mcpx.cli.hosts.opencode_install import ENTRY_POINTS, OpencodePlace, _plugin_spec_of, is_mcpx_entry

    for global_, where, flag in ((False, "this project", ""), (True, "your own config", " --global")):
        place = OpencodePlace.of(global_)
        try:
            config, tui = read_json(place.opencode), read_json(place.tui)
        except HostConfigError as exc:
            yield Finding("opencode", where, False, str(exc), "fix the file, then run `mcpx doctor` again")
            continue
        entries = {name: e for name, e in (config.get("mcp") or {}).items() if is_mcpx_entry(e)}
        if not entries:
            yield Finding.note("opencode", where, f"mcpx is not installed ({place.shown(place.opencode)} has no "
                               f"entry running `mcpx serve`; `mcpx opencode install{flag}` adds it)")
            continue
        install = f"run `mcpx opencode install{flag}` again"
        problems = []
        for name, entry in entries.items():
            if not runnable(str(entry["command"][0])):
                problems.append(f"mcp.{name} runs {entry['command'][0]!r}, which is not there")
        spec = place.spec(place.opencode)
        if not any(_plugin_spec_of(item) == spec for item in config.get("plugin") or []):
            problems.append(f"{place.shown(place.opencode)} does not load the plugin ({spec})")
        if not any(_plugin_spec_of(item) == place.spec(place.tui) for item in tui.get("plugin") or []):
            problems.append(f"{place.shown(place.tui)} does not load the plugin's TUI part")
        problems += [f"{place.shown(place.entry_points / n)} is missing" for n in ENTRY_POINTS
                     if not (place.entry_points / n).is_file()]
        if not (place.skill / "SKILL.md").is_file():
            problems.append(f"{place.shown(place.skill / 'SKILL.md')} is missing")
        if shutil.which(os.environ.get("MCPX_BIN") or "mcpx") is None:
            problems.append("the plugin's entry points load the mcpx on PATH (or $MCPX_BIN), and there is none")
        yield _outcome("opencode", where, problems, install,
                       f"installed in {place.root}: mcp.{', mcp.'.join(entries)}, the plugin, its entry points, "
                       "the skill")


def claude() -> Iterator[Finding]:
    from mcpx.cli.hosts.claude_files import MCP_KEY, ClaudePlace, read_json
    from mcpx.cli.hosts.claude_install import EVENT, HOOKS, is_mcpx_entry, is_mcpx_hook

    for scope, where in (("project", "this project"), ("user", "your own config")):
        place = ClaudePlace.of(scope)  # type: ignore[arg-type]
        command = "mcpx claude install" + (" --scope user" if scope == "user" else "")
        install = f"run `{command}` again"
        try:
            mcp, settings = read_json(place.mcp), read_json(place.settings)
        except HostConfigError as exc:
            yield Finding("claude", where, False, str(exc), "fix the file, then run `mcpx doctor` again")
            continue
        entries = {name: e for name, e in (mcp.get(MCP_KEY) or {}).items() if is_mcpx_entry(e)}
        if not entries:
            yield Finding.note("claude", where, f"mcpx is not installed ({place.shown(place.mcp)} has no entry "
                               f"running `mcpx serve`; `{command}` adds it)")
            continue
        problems = [f"{MCP_KEY}.{name} runs {e['command']!r}, which is not there" for name, e in entries.items()
                    if not runnable(str(e["command"]))]
        hooks = [h for group in _groups(settings) for h in group.get("hooks") or [] if is_mcpx_hook(h)]
        if not hooks:
            problems.append(f"{place.shown(place.settings)} has no {EVENT} hook running `mcpx claude hook` "
                            f"({HOOKS}.{EVENT})")
        problems += [f"the {EVENT} hook runs {shell_words(h['command'])[0]!r}, which is not there" for h in hooks
                     if not runnable(shell_words(h["command"])[0])]
        if not (place.skill / "SKILL.md").is_file():
            problems.append(f"{place.shown(place.skill / 'SKILL.md')} is missing")
        yield _outcome("claude", where, problems, install,
                       f"installed in {place.root}: {MCP_KEY}.{', '.join(entries)}, the {EVENT} hook, the skill")


def codex() -> Iterator[Finding]:
    from mcpx.cli.hosts.codex_files import MCP_KEY, CodexPlace, plain, read_toml
    from mcpx.cli.hosts.codex_install import TIMEOUT_MARGIN
    from mcpx.cli.hosts.host_entry import is_mcpx_entry
    from mcpx.cli.hosts.host_files import longest_wait

    for scope, where in (("project", "this project"), ("user", "your own config")):
        place = CodexPlace.of(scope)  # type: ignore[arg-type]
        command = "mcpx codex install" + (" --scope user" if scope == "user" else "")
        try:
            servers = plain(read_toml(place.config).get(MCP_KEY)) or {}
        except HostConfigError as exc:
            yield Finding("codex", where, False, str(exc), "fix the file, then run `mcpx doctor` again")
            continue
        entries = {name: e for name, e in servers.items() if is_mcpx_entry(e)} if isinstance(servers, dict) else {}
        if not entries:
            yield Finding.note("codex", where, f"mcpx is not installed ({place.shown(place.config)} has no "
                               f"[{MCP_KEY}.NAME] running `mcpx serve`; `{command}` adds it)")
            continue
        problems = [f"[{MCP_KEY}.{name}] runs {e['command']!r}, which is not there" for name, e in entries.items()
                    if not runnable(str(e["command"]))]
        if not (place.skill / "SKILL.md").is_file():
            problems.append(f"{place.shown(place.skill / 'SKILL.md')} is missing")
        finding = _outcome("codex", where, problems, f"run `{command}` again",
                           f"installed in {place.root}: [{MCP_KEY}.{', '.join(entries)}], the skill")
        if problems:
            yield finding
            continue
        try:
            wait = longest_wait(Path.cwd(), "the tool timeout")
        except HostConfigError:
            wait = 0  # the config's own finding says why
        short = [f"{name} gives up after {e.get('tool_timeout_sec', 60)} s" for name, e in entries.items()
                 if e.get("tool_timeout_sec", 60) < wait]
        if short:
            yield Finding.warning("codex", where, f"a question can wait {wait} s in mcpx's config, and Codex's "
                                  f"{', '.join(short)} (while its form is open)",
                                  f"run `{command}` again: it sets {wait + TIMEOUT_MARGIN} s")
        elif not place.trusted():
            yield Finding.warning("codex", where, f"{place.shown(place.config)} has mcpx, and Codex reads it only "
                                  "in a project you trust", f"trust {place.root} when Codex asks there")
        else:
            yield finding


def gemini() -> Iterator[Finding]:
    from mcpx.cli.hosts.gemini_files import MCP_KEY, GeminiPlace, read_json, trusted
    from mcpx.cli.hosts.host_entry import is_mcpx_entry

    for scope, where in (("project", "this project"), ("user", "your own config")):
        place = GeminiPlace.of(scope)  # type: ignore[arg-type]
        command = "mcpx gemini install" + (" --scope user" if scope == "user" else "")
        try:
            settings = read_json(place.config)
        except HostConfigError as exc:
            yield Finding("gemini", where, False, str(exc), "fix the file, then run `mcpx doctor` again")
            continue
        servers = settings.get(MCP_KEY)
        entries = {n: e for n, e in servers.items() if is_mcpx_entry(e)} if isinstance(servers, dict) else {}
        if not entries:
            yield Finding.note("gemini", where, f"mcpx is not installed ({place.shown(place.config)} has no entry "
                               f"running `mcpx serve`; `{command}` adds it)")
            continue
        problems = [f"{MCP_KEY}.{name} runs {e['command']!r}, which is not there" for name, e in entries.items()
                    if not runnable(str(e["command"]))]
        if not (place.skill / "SKILL.md").is_file():
            problems.append(f"{place.shown(place.skill / 'SKILL.md')} is missing")
        if not problems and not trusted(Path.cwd().resolve()):
            yield Finding.warning("gemini", where, f"mcpx is installed, and Gemini CLI runs no MCP server in "
                                  f"{Path.cwd()}: you have not trusted it", "trust it when Gemini CLI asks there")
            continue
        yield _outcome("gemini", where, problems, f"run `{command}` again",
                       f"installed in {place.root}: {MCP_KEY}.{', '.join(entries)}, the skill")


def _groups(settings: dict[str, Any]) -> list[dict[str, Any]]:
    from mcpx.cli.hosts.claude_install import EVENT, HOOKS

    groups = (settings.get(HOOKS) or {}).get(EVENT) or []
    return [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []


def _outcome(area: str, where: str, problems: list[str], fix: str, fine: str) -> Finding:
    if problems:
        return Finding(area, where, False, "; ".join(problems), fix)
    return Finding(area, where, True, fine)
