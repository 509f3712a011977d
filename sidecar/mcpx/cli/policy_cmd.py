"""`mcpx policy test` and `mcpx config check`: what mcpx would do with a question, and whether a config holds.

Both read the config themselves and open nothing: no daemon, no question, no database.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpx.cli.common import add_json_flag, emit_json

if TYPE_CHECKING:
    from mcpx.config.models import Config
    from mcpx.config.problems import ConfigError, Problem


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    policy = sub.add_parser("policy", help="what routing and elicit.rules would do with a question")
    psub = policy.add_subparsers(dest="policy_cmd", required=True, metavar="COMMAND")
    p = psub.add_parser("test", help="a question's audience, the reason, and which rule would fire — opening nothing")
    p.add_argument("question", nargs="?", help="the question as JSON (elicitation/create params, or a listed "
                                               "question), @file.json, or - for stdin")
    p.add_argument("--server", default="mcpx")
    p.add_argument("--tool")
    p.add_argument("--message", "-m", default="(no message)")
    p.add_argument("--schema", help="requestedSchema as JSON (or just its properties)")
    p.add_argument("--url", help="a url-mode question")
    p.add_argument("--mode", choices=["ask", "auto", "decline", "error"], help="test under this elicit.mode")
    add_json_flag(p)
    p.set_defaults(func=policy_test)

    config = sub.add_parser("config", help="mcpx's configuration")
    csub = config.add_subparsers(dest="config_cmd", required=True, metavar="COMMAND")
    p = csub.add_parser("check", help="validate a config file (or the config in force here) and name what is wrong")
    p.add_argument("file", nargs="?", help="a config file; default: $MCPX_CONFIG, else the user and project files")
    add_json_flag(p)
    p.set_defaults(func=config_check)


def _read(text: str) -> Any:
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        text = Path(text[1:]).read_text()
    return json.loads(text)


def _question(args: argparse.Namespace) -> dict[str, Any]:
    if args.question:
        q = _read(args.question)
        if not isinstance(q, dict):
            raise ValueError("the question must be a JSON object")
        q = q.get("elicitation", q)  # `mcpx elicit show --json` output works too
        return {"server": q.get("server", args.server), "tool": q.get("tool", args.tool),
                "message": q.get("message", args.message), "mode": q.get("mode") or ("url" if q.get("url") else "form"),
                "requestedSchema": q.get("requestedSchema"), "url": q.get("url"), "_meta": q.get("_meta")}
    schema = _read(args.schema) if args.schema else None
    if isinstance(schema, dict) and "properties" not in schema and "type" not in schema:
        schema = {"type": "object", "properties": schema}
    return {"server": args.server, "tool": args.tool, "message": args.message,
            "mode": "url" if args.url else "form", "requestedSchema": None if args.url else (schema or {
                "type": "object", "properties": {}}), "url": args.url, "_meta": None}


def policy_test(args: argparse.Namespace) -> int:
    from mcpx.broker import policy, routing
    from mcpx.broker.models import Elicitation
    from mcpx.config.finding import load_config
    from mcpx.config.problems import ConfigError

    try:
        q = _question(args)
        loaded = load_config()
    except (ValueError, OSError, json.JSONDecodeError) as exc:
        print(f"mcpx: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"mcpx: config: {exc}", file=sys.stderr)
        return 1
    if q["server"] != "mcpx" and q["server"] not in loaded.config.servers:
        # mcpx's own questions are server "mcpx"; any other name a rule matches must be a configured server
        known = ", ".join(sorted(loaded.config.servers)) or "none"
        print(f"mcpx: warning: no server {q['server']!r} is configured in {loaded.origin} (servers: {known}); "
              "the rules are tested as if it were", file=sys.stderr)
    decided = routing.route(q["mode"], q["requestedSchema"], q["message"], q["_meta"])
    now = datetime.now(UTC)
    probe = Elicitation(id="elc-0000000000000000", session="policy-test", session_source="fallback",
                        server=q["server"], tool=q["tool"], mode=q["mode"], message=q["message"],
                        requested_schema=q["requestedSchema"], url=q["url"], audience=decided.audience,
                        reason=decided.reason, created=now, expires_at=now, state="pending")
    # --mode stands in for the config's elicit.mode (what if it were so), not for a call's own mode
    settings = loaded.config.elicit.model_copy(update={"mode": args.mode}) if args.mode else loaded.config.elicit
    decision, checks = policy.evaluate(settings, probe)
    mode = settings.mode
    report = {
        "audience": decided.audience, "reason": decided.reason, "hintIgnored": decided.hint_ignored,
        "mode": mode, "config": loaded.origin,
        "rules": [{"rule": c.rule, "fires": c.fires, "why": c.why} for c in checks],
        "decision": None if decision is None else {"by": decision.by, "action": decision.action,
                                                   "content": decision.content, "because": decision.because,
                                                   "failsTheCall": decision.fail},
    }
    if args.json:
        emit_json(report)
        return 0
    print(f"audience  {decided.audience}")
    print(f"because   {decided.reason}")
    if decided.hint_ignored:
        print(f"note      {decided.hint_ignored}")
    print(f"mode      {mode}   (config: {loaded.origin})")
    for c in checks:
        print(f"rule      {c.rule}: {'FIRES' if c.fires else 'no'} — {c.why}")
    if decision is None:
        who = {"human": "the person", "agent": "the agent", "agent-then-human": "the agent, then the person"}
        print(f"outcome   no rule fires: the question waits for {who[decided.audience]}")
    elif decision.fail:
        print(f"outcome   the call fails: {decision.because}")
    else:
        content = f" {json.dumps(decision.content)}" if decision.content else ""
        print(f"outcome   answered {decision.action}{content} by {decision.by}: {decision.because}")
    return 0


@dataclass
class CheckedConfig:
    """A config as `mcpx config check` (and `mcpx doctor`) sees it: what was read, every problem, every warning."""

    origin: str
    config: Config | None = None  # None when it does not hold
    error: ConfigError | None = None  # every problem found, each naming its file and field
    warnings: list[Problem] = field(default_factory=list)


def checked_config(file: str | None = None) -> CheckedConfig:
    """Check a file (or the config in force here: every file of it, each alone, then merged), every field, and
    whether each stdio server's command would start."""
    from mcpx.config.finding import config_sources, load_config, read_file, unread_configs, validate
    from mcpx.config.problems import ConfigError, config_warnings
    from mcpx.system.paths import StatePaths

    origin = file or "the config"
    # a file where people put a config that mcpx never reads: said even when the config in force does not hold
    unread = [] if file else unread_configs(config_sources(Path.cwd().resolve()), StatePaths.current().root)
    warned: list[Problem] = unread
    try:
        if file:
            config = validate(read_file(Path(file)), file)
            base = Path(file).parent
        else:
            loaded = load_config()
            config, origin = loaded.config, loaded.origin
            base = loaded.directory
        warned = unread + config_warnings(config, origin)
        if missing := _commands_missing(config, origin, base):
            raise ConfigError.of(missing)
    except ConfigError as exc:
        return CheckedConfig(origin, None, exc, warned)
    return CheckedConfig(origin, config, None, warned)


def config_check(args: argparse.Namespace) -> int:
    checked = checked_config(args.file)
    config, origin, warned, exc = checked.config, checked.origin, checked.warnings, checked.error
    if exc is not None or config is None:
        assert exc is not None
        if args.json:
            emit_json({"ok": False, "path": exc.path, "field": exc.field, "problem": exc.problem,
                       "problems": _listed(exc.problems), "warnings": _listed(warned)})
        else:
            _warn(warned)
            print(f"mcpx: {exc}", file=sys.stderr)
        return 1
    summary: dict[str, Any] = {
        "ok": True, "config": origin, "servers": sorted(config.servers), "mode": config.elicit.mode,
        "rules": [r.id for r in config.elicit.rules], "ttl": config.elicit.ttl,
        "confirmDestructive": config.elicit.confirm_destructive, "plugin": config.plugin.elicit,
        "warnings": _listed(warned)}
    if args.json:
        emit_json(summary)
    else:
        _warn(warned)
        print(f"{origin}: ok — servers {', '.join(summary['servers']) or '(none)'}; elicit.mode {config.elicit.mode}; "
              f"{len(summary['rules'])} rule(s); ttl {config.elicit.ttl:g}s")
    return 0


def _commands_missing(config: Config, origin: str, base: Path) -> list[Problem]:
    """The stdio servers whose command would not start, looked for as the daemon starts it: in the environment it
    gives the server (its own `env` over the inherited PATH & co., here this command's), from the server's cwd; and
    the services whose document or commands would not work (services/check.py)."""
    from mcpx.config.environment import command_problem, server_environment
    from mcpx.config.models import CommandsServer, OpenApiServer, StdioServer
    from mcpx.config.problems import Problem
    from mcpx.services import check

    out: list[Problem] = []
    for name, entry in sorted(config.servers.items()):
        if isinstance(entry, (OpenApiServer, CommandsServer)):
            out += [Problem(origin, f"servers.{name}.{key}", why) for key, why in check.problems(entry, base)]
        elif isinstance(entry, StdioServer):
            why = command_problem(entry.command, server_environment(entry.env, os.environ).env, entry.cwd)
            if why:
                out.append(Problem(origin, f"servers.{name}.{why[0]}", why[1]))
    return out


def _listed(problems: list[Problem]) -> list[dict[str, str | None]]:
    return [{"path": p.path, "field": p.field, "problem": p.message} for p in problems]


def _warn(problems: list[Problem]) -> None:
    for problem in problems:
        print(f"mcpx: warning: {problem}", file=sys.stderr)
