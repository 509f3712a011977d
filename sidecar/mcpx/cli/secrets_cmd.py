"""`mcpx secrets list|set|forget`: the servers' `secrets` in the OS keychain (docs/secrets.md).

These talk to the keychain directly, as the user who runs the daemon: no daemon is needed, and no value ever
passes through one, a file or the output. `set` reads the value with a hidden prompt on a terminal, else one line
from stdin (`pass show x | mcpx secrets set github GITHUB_TOKEN`), so it is never on a command line.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcpx.cli.common import add_json_flag, emit_json
from mcpx.shared.errors import McpxError
from mcpx.system import keychain

if TYPE_CHECKING:
    from mcpx.config.models import Config


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    secrets = sub.add_parser("secrets", help="servers' secrets in the OS keychain: list, set, forget (never shown)")
    ssub = secrets.add_subparsers(dest="secrets_cmd", required=True, metavar="COMMAND")
    p = ssub.add_parser("list", help="each server's secrets and whether the keychain holds them (never a value)")
    add_json_flag(p)
    p.set_defaults(func=_guarded(secrets_list))
    for name, what in (("set", "keep a server's secret in the keychain (prompted for, hidden)"),
                       ("forget", "take a server's secret out of the keychain (the next start asks again)")):
        p = ssub.add_parser(name, help=what)
        p.add_argument("server")
        p.add_argument("name", help="the variable, as the server's \"secrets\" lists it")
        p.set_defaults(func=_guarded(secrets_set if name == "set" else secrets_forget))


def _guarded(body: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """No keychain, a keychain that refuses, a config that does not hold: said in a line, exit 1."""
    def runner(args: argparse.Namespace) -> int:
        from mcpx.config.problems import ConfigError

        try:
            return body(args)
        except keychain.NoKeychain as exc:
            names = [n for s, n in _listed_or_none() if s == getattr(args, "server", s)]
            print(f"mcpx: {exc}" + (f"; {keychain.instead(args.server, names)}" if names and hasattr(args, "server")
                                    else ""), file=sys.stderr)
            return 1
        except (keychain.KeychainError, ConfigError) as exc:
            print(f"mcpx: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
    return runner


def _listed_or_none() -> list[tuple[str, str]]:
    from mcpx.config.problems import ConfigError

    try:
        return listed(_config())
    except ConfigError:
        return []


def _config() -> Config:
    from mcpx.config.finding import load_config

    return load_config().config


def listed(config: Config) -> list[tuple[str, str]]:
    """(server, name) of every secret the config names, sorted: a server's `secrets`, an HTTP server's or a REST
    service's `auth.clientSecret` (docs/auth.md)."""
    from mcpx.config.models import HttpServer, OpenApiServer, secret_names

    named = [(server, name) for server, entry in config.servers.items() for name in secret_names(entry)]
    named += [(server, entry.auth.client_secret) for server, entry in config.servers.items()
              if isinstance(entry, (HttpServer, OpenApiServer)) and entry.auth is not None
              and entry.auth.client_secret is not None]
    return sorted(named)


def secrets_list(args: argparse.Namespace) -> int:
    """Every secret the config names, and whether the keychain holds it. A keychain that cannot be read (none here,
    or locked) leaves the list whole, each name marked unreadable, and its error said with what to do (exit 1)."""
    pairs = listed(_config())
    try:
        held: dict[tuple[str, str], bool | None] = {pair: keychain.get(*pair) is not None for pair in pairs}
        unread: McpxError | None = None
    except (keychain.NoKeychain, keychain.KeychainError) as exc:
        held, unread = dict.fromkeys(pairs), exc
    if args.json:
        emit_json({"secrets": [{"server": server, "name": name, "inKeychain": held[server, name]}
                               for server, name in pairs], **({"error": str(unread)} if unread else {})})
    elif not pairs:
        print("no server lists secrets (a server entry's \"secrets\": [\"NAME\", ...], docs/secrets.md)")
    for server, name in pairs if not args.json else []:
        state = {True: "in the keychain", False: "missing", None: "unreadable"}[held[server, name]]
        print(f"{server:<20} {name:<28} {state}")
    if unread is None:
        return 0
    if isinstance(unread, keychain.NoKeychain):
        servers = dict.fromkeys(server for server, _ in pairs)
        advice = [keychain.instead(server, [n for s, n in pairs if s == server]) for server in servers]
    else:
        advice = ["unlock the keychain, then list again"]
    print(f"mcpx: {unread}" + "".join(f"; {line}" for line in advice), file=sys.stderr)
    return 1


def secrets_set(args: argparse.Namespace) -> int:
    wanted = dict.fromkeys(n for s, n in listed(_config()) if s == args.server)
    if args.name not in wanted:
        print(f"mcpx: server {args.server!r} lists no secret {args.name}"
              + (f" (its secrets: {', '.join(wanted)})" if wanted else "")
              + f": add it to servers.{args.server}.secrets in the config first", file=sys.stderr)
        return 2
    if sys.stdin.isatty():
        value = getpass.getpass(f"{args.name} for {args.server} (kept in the keychain, not shown): ")
    else:
        value = sys.stdin.readline().rstrip("\r\n")
    if not value:
        print(f"mcpx: no value given for {args.name}: nothing was kept", file=sys.stderr)
        return 1
    keychain.put(args.server, args.name, value)
    print(f"{args.name} for {args.server}: kept in the keychain; the server's next start reads it"
          + _tell_daemon(args.server))
    return 0


def secrets_forget(args: argparse.Namespace) -> int:
    if keychain.forget(args.server, args.name):
        print(f"{args.name} for {args.server}: taken out of the keychain; the server's next start asks for it"
              + _tell_daemon(args.server))
    else:
        print(f"{args.name} for {args.server}: the keychain held no value for it")
    return 0


def _tell_daemon(server: str) -> str:
    """Tell a running daemon that the server's secrets changed (none is started for it: the next one reads the
    keychain anyway); what it did, as the end of a sentence."""
    from mcpx.client.transport import ApiError, DaemonApi, NoDaemon

    try:
        done: dict[str, int] = dict(DaemonApi().post(f"/v1/secrets/{server}/changed"))
    except NoDaemon:
        return " (no daemon is running)"
    except ApiError as exc:
        return f" (the daemon was not told: {exc})"
    stopped, busy = done.get("stopped", 0), done.get("busy", 0)
    if not stopped and not busy:
        return " (the daemon was told; none of its instances is running)"
    return (" (the daemon was told: " + ", ".join(
        part for part in (f"{stopped} idle instance(s) stopped" if stopped else "",
                          f"{busy} busy one(s) stop once their calls are done" if busy else "") if part)
        + "; the next call starts a new one)")
