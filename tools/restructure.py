#!/usr/bin/env python3
"""Issue 36's layout, applied to a tree: modules into packages by role, the plugin's lib/ by half, tests beside
what they test, and every reference to an old place rewritten.

    python tools/restructure.py          # from the repository's root (or anywhere inside it)
    python tools/restructure.py --check  # says what it would change, changes nothing; exit 1 if anything

Re-runnable and idempotent: a module already at its new place is not moved again, and a reference already
rewritten matches no old name, so a second run changes nothing. Run it on any branch after merging the
restructure, to move what it knows of and to rewrite imports written against the old places (new code, new
tests, docs). A test file it does not list stays where it is; that is fine (pytest finds it either way).

What it rewrites, in every file git knows or would add (.py, .md, .ts/.tsx/.mjs, .toml, .in, .json, the
`dev` script; not lock files): dotted names (`mcpx.errors`, `mcpx.cli.script.Client`), `from mcpx import
processes` (each name to its new package), names imported from config's old module (each to the submodule
that now defines it), paths (`sidecar/mcpx/forms.py`, `tests/test_config.py`, `lib/desk.ts`), the plugin's
relative imports, and a moved test's `Path(__file__).parent` (one more level up per directory it went
down). Then `ruff check --fix --select I` sorts the imports it touched.
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "sidecar"

# ---- the Python package: old module -> new module (dotted, under sidecar/)

MODULES: dict[str, str] = {
    # what every layer may use: errors, ids, header names, JSON at the edge, SSE, sessions, the hand-off's words
    "mcpx.errors": "mcpx.shared.errors",
    "mcpx.ids": "mcpx.shared.ids",
    "mcpx.keys": "mcpx.shared.names",
    "mcpx.wirejson": "mcpx.shared.wirejson",
    "mcpx.sse": "mcpx.shared.sse",
    "mcpx.sessions": "mcpx.shared.sessions",
    "mcpx.handoff": "mcpx.shared.handoff",
    "mcpx.hosts": "mcpx.shared.hostenv",
    "mcpx.masking": "mcpx.shared.masking",
    # the operating system: where state lives, processes, sockets, the keychain, an agent's shell, the assets
    "mcpx.paths": "mcpx.system.paths",
    "mcpx.processes": "mcpx.system.processes",
    "mcpx.sockets": "mcpx.system.sockets",
    "mcpx.keychain": "mcpx.system.keychain",
    "mcpx.agentshell": "mcpx.system.agentshell",
    "mcpx.assets": "mcpx.system.assets",
    # a question as people and agents are shown it
    "mcpx.rendering": "mcpx.presentation.rendering",
    "mcpx.forms": "mcpx.presentation.dialog_form",
    "mcpx.dialogs": "mcpx.presentation.dialogs",
    "mcpx.answering": "mcpx.presentation.answering",
    "mcpx.text": "mcpx.presentation.text",
    "mcpx.urlfacts": "mcpx.presentation.urlfacts",
    # the config: config.py itself becomes the package (split by hand into its submodules)
    "mcpx.configsource": "mcpx.config.source",
    "mcpx.durations": "mcpx.config.durations",
    "mcpx.jsonc": "mcpx.config.jsonc",
    # the /v1 API: the route table, its shapes, who is asking, the routes (the daemon and the inbox both use it)
    "mcpx.daemon.api": "mcpx.api.table",
    "mcpx.daemon.schemas": "mcpx.api.schemas",
    "mcpx.daemon.peers": "mcpx.api.peers",
    "mcpx.daemon.state": "mcpx.api.state",
    "mcpx.daemon.call_routes": "mcpx.api.call_routes",
    "mcpx.daemon.elicit_routes": "mcpx.api.elicit_routes",
    "mcpx.inbox.api_routes": "mcpx.api.inbox_routes",
    # the inbox's own names
    "mcpx.inbox.form": "mcpx.inbox.html_form",
    "mcpx.inbox.keys": "mcpx.inbox.signing",
    "mcpx.inbox.routes": "mcpx.inbox.web_routes",
    # the daemon's own names
    "mcpx.daemon.handoff": "mcpx.daemon.handoff_socket",
    # the MCP surface's own names
    "mcpx.surface.client": "mcpx.surface.client_state",
    "mcpx.surface.connection": "mcpx.surface.client_connection",
    # the client library: mcpx.Client for scripts, and the one way to the daemon it and the CLI share
    "mcpx.cli.script": "mcpx.client.script",
    "mcpx.cli.client": "mcpx.client.transport",
    "mcpx.cli.prompt": "mcpx.client.prompt",
    # the CLI's own
    "mcpx.cli.tui.app": "mcpx.cli.tui.inbox_app",
    # the demo's MCP server (the daemon's is daemon/server.py)
    "mcpx.demo.server": "mcpx.demo.mcp_server",
}

# the hosts' installers and files: cli/<host>_*.py -> cli/hosts/<host>_*.py (hosts added later fit the pattern)
HOST_PREFIXES = ("claude", "opencode", "codex", "gemini")
HOST_MODULES = ("host_files", "server_import", "doctor_hosts")

# names that moved out of their module: (module, as it is named now) -> the module that defines it now
NAME_MOVES: dict[tuple[str, str], str] = {
    ("mcpx.cli.call_cmd", "split_target"): "mcpx.client.target",
    ("mcpx.cli.call_cmd", "read_answer"): "mcpx.client.prompt",
    ("mcpx.surface.client_state", "passed_as"): "mcpx.presentation.passing",
    ("mcpx.surface.client_state", "passed_message"): "mcpx.presentation.passing",
}

# one name for one thing: (the module that defines it, as it is named now, old name) -> new name. Renamed as code (a
# Python name token, never inside a string) in the module itself and in every file that imports it from there,
# or writes it as `module.Name`; and in the plugin, in every file that imports it from the module's path
RENAMES: dict[tuple[str, str], str] = {
    ("mcpx.shared.handoff", "Word"): "HandoffMessage",  # a message on the hand-off connection
    ("mcpx.surface.pipe_endpoint", "Say"): "SendToServe",  # how the pipe endpoint sends serve a HandoffMessage
    ("mcpx.broker.approvals", "Nudge"): "ApprovalsDue",  # the reminders and escalations that came due
    ("mcpx.broker.store", "Lease"): "StoreLease",  # a daemon's lease on a shared store (upstream's Lease is a call's)
    ("mcpx.cli.tui.feed", "Pending"): "ShownQuestion",  # the TUI's question on show (the broker's Pending is its index)
    ("mcpx.cli.tui.feed", "Ended"): "ShownEnd",  # what the stream said when a question on show ended
    ("mcpx.cli.tui.screens", "Inbox"): "ScreenHost",  # what a question's screen asks of its app (inbox's: the web's)
    ("mcpx.api.call_routes", "InputRequired"): "CallInputRequired",  # the /v1 body (mcp's InputRequired: the wire's)
    ("mcpx.demo.tools", "Question"): "DemoQuestion",  # a demo tool's question (mcpx.Question: a script's)
}
PLUGIN_NAME_RENAMES: dict[tuple[str, str], str] = {
    ("lib/tui/queue", "Desk"): "QuestionQueue",  # the TUI's questions, which to show and when
    ("lib/shared/generated", "InputRequired"): "CallInputRequired",  # the /v1 body's generated type
}

# packages whose old module is now the package itself, split: `from mcpx.config import X` names the submodule
SPLIT = ("mcpx.config",)

NEW_PACKAGES = {
    "mcpx.shared": "What every layer may use: mcpx's errors, ids, header names, JSON at the edge, SSE, sessions,\n"
                   "secrets masked, what the host says of itself, and the words of the hand-off between `mcpx serve`\n"
                   "and its daemon. It imports no layer but the broker's models (sessions) and the wire's framing\n"
                   "(the hand-off).",
    "mcpx.system": "The operating system as mcpx meets it: where state lives, other processes, sockets, the keychain,\n"
                   "an agent's shell, and where the plugin and the skill are installed from.",
    "mcpx.presentation": "A question as each party is shown it, rendered once: for an agent, a dialog, a page, a\n"
                         "terminal; and as it is passed to an MCP client and known again.",
    "mcpx.api": "The /v1 API: one route table (handlers and openapi.json), the bodies' shapes, who is asking, and the\n"
                "routes of the broker, the gateway and the inbox's addresses. The daemon installs it; the plugin's\n"
                "TypeScript contract is generated from its openapi.json (daemon/typescript.py).",
    "mcpx.client": "The client library: `mcpx.Client` for scripts (docs/scripts.md), and what it shares with the CLI:\n"
                   "the way to the daemon, a question asked at a terminal, SERVER.TOOL. Only `import mcpx` loads the\n"
                   "script client: the daemon and `mcpx serve` never do.",
    "mcpx.cli.hosts": "mcpx in each MCP host: installing, importing a host's servers, its config files, and what\n"
                      "`mcpx doctor` checks of it.",
}

# ---- the opencode plugin: lib/NAME -> lib/HALF/NAME (the server half, the TUI half, what both share)

PLUGIN = ROOT / "plugin" / "opencode"
PLUGIN_HALVES = {
    "server": ("announce", "ask", "calls", "ids", "messages", "notify", "output", "start", "withhold"),
    "tui": ("browser", "desk", "dialog", "form"),
    "shared": ("daemon", "events", "generated", "host", "level", "session", "tuilink"),
}
PLUGIN_RENAMES = {"desk": "queue", "form": "dialog_keys"}

# ---- the tests: end-to-end (a real daemon), hosts (real opencode, Claude Code, the wheel), unit by layer

TESTS = {
    "unit/broker": ("answer_first", "answerer_kind", "broker_ends", "broker_parts", "commits", "events",
                    "flat_schema", "pending", "routing", "rules", "schema", "store_choice"),
    "unit/mcp": ("input_required", "wire_models", "handshake"),
    "unit/upstream": ("attribution", "legacy_multiplex", "upstream_headers", "upstream_units", "tasks_follow"),
    "unit/presentation": ("dialog_form", "rendering", "form_renderers"),
    "unit/config": ("config",),
    "unit/shared": ("wirejson", "errors", "hosts"),
    "unit/inbox": ("inbox_notify",),
    "unit/daemon": ("typescript",),
    "unit": ("layers",),
    "hosts": ("claude_install", "claude_print", "claude_tui", "opencode_e2e", "opencode_install",
              "opencode_lifetime", "opencode_tui", "wheel", "dev_link"),
    "conformance": ("conformance_client", "conformance_server_direct", "conformance_server_mcpx"),
    "e2e": ("answerer", "approvals", "audit_chain", "cli_call", "cli_elicit", "cli_newcomer", "cli_usage",
            "config_live", "credential_formats", "daemon_api", "daemon_detach", "daemon_lifecycle",
            "daemon_service", "doctor", "gateway_legacy", "gateway_modern", "harness", "hostile_input",
            "inbox_web", "openapi_fuzz", "passed_route", "policy", "postgres_harness", "script_client", "secrets",
            "serve_handoff", "surface", "surface_tasks", "team", "tui", "upstream_env", "upstream_lifecycle",
            "upstream_tasks", "v2_client"),
}

SKIP_NAMES = {"package-lock.json"}
TEXT_SUFFIXES = {".py", ".md", ".ts", ".tsx", ".mjs", ".js", ".toml", ".in", ".json", ".cfg", ".txt", ".sh", ".yml",
                 ".yaml", ".html"}


def module_path(dotted: str) -> Path:
    return SRC.joinpath(*dotted.split(".")).with_suffix(".py")


def host_modules() -> dict[str, str]:
    """cli/<host>_*.py and the hosts' shared modules, wherever they are now (old place or new)."""
    out: dict[str, str] = {}
    for where in (SRC / "mcpx" / "cli", SRC / "mcpx" / "cli" / "hosts"):
        for path in where.glob("*.py") if where.is_dir() else ():
            stem = path.stem
            if stem.startswith(tuple(p + "_" for p in HOST_PREFIXES)) or stem in HOST_MODULES:
                out[f"mcpx.cli.{stem}"] = f"mcpx.cli.hosts.{stem}"
    for stem in HOST_MODULES:
        out.setdefault(f"mcpx.cli.{stem}", f"mcpx.cli.hosts.{stem}")
    return out


def all_modules() -> dict[str, str]:
    moves = {**MODULES, **host_modules()}
    # a new name must never contain an old one, or a second run would move it again
    for new in moves.values():
        for old in moves:
            assert not re.search(rf"(?<![\w.]){re.escape(old)}(?!\w)", new), f"{new} contains {old}"
    return moves


def plugin_moves() -> dict[Path, Path]:
    lib = PLUGIN / "lib"
    out: dict[Path, Path] = {}
    for half, names in PLUGIN_HALVES.items():
        for name in names:
            for ext in (".ts", ".tsx"):
                new = lib / half / (PLUGIN_RENAMES.get(name, name) + ext)
                out[lib / (name + ext)] = new
    return out


def plugin_test_moves() -> dict[Path, Path]:
    """The plugin's node tests named after the module they test, as renamed."""
    test = PLUGIN / "test"
    return {test / f"{old}.test.mjs": test / f"{new}.test.mjs" for old, new in PLUGIN_RENAMES.items()}


def test_moves() -> dict[Path, Path]:
    tests = ROOT / "tests"
    return {tests / f"test_{name}.py": tests / where / f"test_{name}.py" for where, names in TESTS.items()
            for name in names}


# ---- moving


class Tree:
    def __init__(self, check: bool) -> None:
        self.check = check
        self.changed: list[str] = []

    def git(self, *args: str) -> None:
        subprocess.run(["git", *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)

    def move(self, old: Path, new: Path) -> bool:
        if not old.exists() or new.exists():
            return False
        self.changed.append(f"move {old.relative_to(ROOT)} -> {new.relative_to(ROOT)}")
        if not self.check:
            new.parent.mkdir(parents=True, exist_ok=True)
            self.git("mv", str(old.relative_to(ROOT)), str(new.relative_to(ROOT)))
        return True

    def write(self, path: Path, text: str) -> None:
        if path.exists() and path.read_text() == text:
            return
        self.changed.append(f"edit {path.relative_to(ROOT)}")
        if not self.check:
            path.write_text(text)


def ensure_package(tree: Tree, dotted: str) -> None:
    init = SRC.joinpath(*dotted.split(".")) / "__init__.py"
    if init.exists():
        return
    doc = NEW_PACKAGES.get(dotted, "")
    tree.changed.append(f"create {init.relative_to(ROOT)}")
    if not tree.check:
        init.parent.mkdir(parents=True, exist_ok=True)
        init.write_text(f'"""{doc}"""\n' if doc else "")
        tree.git("add", str(init.relative_to(ROOT)))


def move_modules(tree: Tree, moves: dict[str, str]) -> None:
    # config.py becomes the package mcpx/config/ (its __init__ first; split by hand after)
    config = SRC / "mcpx" / "config.py"
    if config.exists() and not (SRC / "mcpx" / "config").is_dir():
        tree.move(config, SRC / "mcpx" / "config" / "__init__.py")
    for old, new in moves.items():
        if module_path(old).exists() and not module_path(new).exists():
            ensure_package(tree, new.rpartition(".")[0])
            tree.move(module_path(old), module_path(new))


def move_tests(tree: Tree) -> dict[Path, int]:
    """The tests moved now, with how many directories down each went (for its `Path(__file__)`)."""
    moved: dict[Path, int] = {}
    for old, new in test_moves().items():
        if tree.move(old, new):
            moved[new] = len(new.relative_to(old.parent).parts) - 1
    return moved


# ---- rewriting


def files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                         check=True, capture_output=True).stdout.decode().split("\0")
    found = []
    for name in out:
        if not name:
            continue
        path = ROOT / name
        if path.name in SKIP_NAMES or path == Path(__file__).resolve() or {"node_modules", "dist"} & set(path.parts):
            continue
        if (path.suffix in TEXT_SUFFIXES or path.name in ("dev", "MANIFEST.in")) and path.is_file():
            found.append(path)
    return found


FROM_IMPORT = re.compile(r"^(?P<indent>[ \t]*)from (?P<base>mcpx(?:\.\w+)*) import (?P<names>\([^)]*\)|[^\n]*)$",
                         re.M)


def split_names(raw: str) -> list[tuple[str, str | None]]:
    body = raw.strip()
    comment = ""
    if body.startswith("("):
        body = body[1:-1]
    elif "#" in body:
        body, comment = body.split("#", 1)
    del comment
    out: list[tuple[str, str | None]] = []
    for part in re.sub(r"#[^\n]*", "", body).replace("\n", " ").split(","):
        part = part.strip()
        if not part:
            continue
        name, _, alias = part.partition(" as ")
        out.append((name.strip(), alias.strip() or None))
    return out


def defined_in(package: str) -> dict[str, str]:
    """Each top-level name of a split package's submodules: which submodule defines it."""
    folder = SRC.joinpath(*package.split("."))
    out: dict[str, str] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.py")):
        if path.name == "__init__.py":
            continue
        for node in ast.parse(path.read_text()).body:
            names: list[str] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for name in names:
                out.setdefault(name, f"{package}.{path.stem}")
    return out


def rewrite_from_imports(text: str, moves: dict[str, str], split: dict[str, dict[str, str]]) -> str:
    """`from mcpx import processes, sse` -> one import per new home; `from mcpx.config import Config` -> its
    submodule. Names that stay where they were stay in the statement as written."""

    def one(m: re.Match[str]) -> str:
        base, indent = m.group("base"), m.group("indent")
        names = split_names(m.group("names"))
        kept: list[tuple[str, str | None]] = []
        moved: dict[str, list[tuple[str, str | None]]] = {}
        for name, alias in names:
            full = f"{base}.{name}"
            if full in moves:
                new_base, _, leaf = moves[full].rpartition(".")
                moved.setdefault(new_base, []).append((leaf, alias or (name if leaf != name else None)))
            elif (moves.get(base, base), name) in NAME_MOVES:
                moved.setdefault(NAME_MOVES[moves.get(base, base), name], []).append((name, alias))
            elif base in split and name in split[base]:
                moved.setdefault(split[base][name], []).append((name, alias))
            else:
                kept.append((name, alias))
        if not moved:
            return m.group(0)
        lines = []
        if kept:
            lines.append(statement(indent, base, kept))
        for new_base, items in moved.items():
            lines.append(statement(indent, new_base, items))
        return "\n".join(lines)

    return FROM_IMPORT.sub(one, text)


def statement(indent: str, base: str, names: list[tuple[str, str | None]]) -> str:
    parts = [f"{n} as {a}" if a and a != n else n for n, a in names]
    line = f"{indent}from {base} import {', '.join(parts)}"
    if len(line) <= 120:
        return line
    inner = "".join(f"{indent}    {p},\n" for p in parts)
    return f"{indent}from {base} import (\n{inner}{indent})"


def dotted_pattern(moves: dict[str, str]) -> re.Pattern[str]:
    olds = sorted(moves, key=len, reverse=True)
    return re.compile(r"(?<![\w.])(" + "|".join(re.escape(o) for o in olds) + r")(?!\w)")


def path_pattern(moves: dict[str, str]) -> tuple[re.Pattern[str], dict[str, str]]:
    """`mcpx/forms.py` (with or without sidecar/ before it) -> `mcpx/presentation/dialog_form.py`."""
    paths = {o.replace(".", "/") + ".py": n.replace(".", "/") + ".py" for o, n in moves.items()}
    # and as the docs write a package's module, from inside mcpx: `daemon/api.py` -> `api/table.py`
    short = {o.removeprefix("mcpx/"): n.removeprefix("mcpx/") for o, n in paths.items() if o.count("/") >= 2}
    olds = sorted(paths, key=len, reverse=True)
    shorts = sorted(short, key=len, reverse=True)
    pattern = (r"(?<![\w])(" + "|".join(re.escape(o) for o in olds) + r")(?!\w)"
               r"|(?<![\w/.-])(" + "|".join(re.escape(o) for o in shorts) + r")(?!\w)")
    return re.compile(pattern), {**paths, **short}


def split_dotted(text: str, split: dict[str, dict[str, str]]) -> str:
    for package, names in split.items():
        if not names:
            continue
        pattern = re.compile(rf"(?<![\w.]){re.escape(package)}\.(\w+)(?!\w)")
        text = pattern.sub(lambda m, names=names, package=package: f"{names[m.group(1)]}.{m.group(1)}"
                           if m.group(1) in names else m.group(0), text)
    return text


def rel_paths(moves: dict[Path, Path]) -> tuple[re.Pattern[str], dict[str, str]]:
    """Repository paths of moved files, as text: `tests/test_config.py`, `lib/desk.ts` (and its built .js)."""
    table: dict[str, str] = {}
    for old, new in moves.items():
        o, n = old.relative_to(ROOT).as_posix(), new.relative_to(ROOT).as_posix()
        if o.startswith("plugin/opencode/lib/"):
            o, n = o.removeprefix("plugin/opencode/"), n.removeprefix("plugin/opencode/")
            table[o] = n
            for ext in (".ts", ".tsx"):
                if o.endswith(ext):
                    table[o.removesuffix(ext) + ".js"] = n.removesuffix(ext) + ".js"
        else:
            table[o] = n
    olds = sorted(table, key=len, reverse=True)
    return re.compile(r"(?<![\w-])(" + "|".join(re.escape(o) for o in olds) + r")(?![\w])"), table


TS_IMPORT = re.compile(
    r"""(?P<pre>(?:\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)["'])(?P<spec>\.{1,2}/[^"']+)(?P<post>["'])""")


def rewrite_ts(path: Path, text: str, old_dir: Path, moves: dict[Path, Path]) -> str:
    """A relative import that no longer resolves: resolved from where the file was, through the moves."""
    here = path.parent
    by_target = {o.with_suffix(""): n.with_suffix("") for o, n in moves.items()}

    def exists(base: Path) -> bool:
        return any(base.with_suffix(ext).exists() for ext in (".ts", ".tsx", ".js", ".mjs")) or base.exists()

    def one(m: re.Match[str]) -> str:
        spec = m.group("spec")
        stem, ext = os.path.splitext(spec)
        if ext not in (".js", ".ts", ".tsx", ".mjs", ""):
            stem, ext = spec, ""
        if exists(Path(os.path.normpath(here / stem))):
            return m.group(0)
        target = Path(os.path.normpath(old_dir / stem))
        if target in by_target:
            target = by_target[target]
        if not exists(target):
            return m.group(0)
        rel = os.path.relpath(target, here)
        if not rel.startswith("."):
            rel = "./" + rel
        return f"{m.group('pre')}{rel}{ext}{m.group('post')}"

    return TS_IMPORT.sub(one, text)


def rename_tokens(text: str, old: str, new: str) -> str:
    """`old` as a Python name (never in a string or a comment) -> `new`; a comment's `old` in backquotes too."""
    lines = text.splitlines(keepends=True)
    hits: list[tuple[int, int, int]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME and tok.string == old:
                hits.append((tok.start[0], tok.start[1], len(old)))
            elif tok.type == tokenize.COMMENT:
                for m in re.finditer(rf"`{re.escape(old)}`", tok.string):
                    hits.append((tok.start[0], tok.start[1] + m.start() + 1, len(old)))
    except (tokenize.TokenError, SyntaxError):
        return text
    for row, col, size in sorted(hits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + size:]
    return "".join(lines)


def rename_python(path: Path, text: str) -> str:
    for (module, old), new in RENAMES.items():
        parent, _, leaf = module.rpartition(".")
        own = path == module_path(module)
        imports = re.search(rf"from {re.escape(module)} import (\([^)]*\)|[^\n]*)", text)
        named = own or bool(imports and re.search(rf"\b{re.escape(old)}\b", imports.group(1)))
        if named:
            text = rename_tokens(text, old, new)
        # `handoff.Word` where the module is imported whole
        if re.search(rf"from {re.escape(parent)} import [^\n]*\b{re.escape(leaf)}\b|import {re.escape(module)}\b",
                     text):
            text = re.sub(rf"(?<![\w.])((?:{re.escape(parent)}\.)?{re.escape(leaf)})\.{re.escape(old)}\b",
                          lambda m, new=new: f"{m.group(1)}.{new}", text)
    return text


def rename_dotted(text: str) -> str:
    for (module, old), new in RENAMES.items():
        text = re.sub(rf"(?<![\w.]){re.escape(module)}\.{re.escape(old)}\b", f"{module}.{new}", text)
    return text


def rename_plugin(path: Path, text: str) -> str:
    for (where, old), new in PLUGIN_NAME_RENAMES.items():
        own = path.with_suffix("").as_posix().endswith("plugin/opencode/" + where)
        tail = re.escape(where.removeprefix("lib/"))  # "../shared/generated.js", "./lib/tui/queue.js", "../dist/lib/…"
        imported = re.compile(rf"""import\s*(?:type\s*)?\{{([^}}]*)\}}\s*from\s*["'][^"']*\b{tail}\.js["']""")
        if own or any(re.search(rf"\b{re.escape(old)}\b", m.group(1)) for m in imported.finditer(text)):
            text = re.sub(rf"(?<![\w$.]){re.escape(old)}\b", new, text)
    return text


FILE_PARENT = re.compile(r"Path\(__file__\)(?P<resolve>\.resolve\(\))?\.parent(?!s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="say what would change; change nothing")
    args = parser.parse_args()
    tree = Tree(args.check)

    moves = all_modules()
    move_modules(tree, moves)
    plugin = plugin_moves()
    moved_ts: dict[Path, Path] = {}
    for old, new in plugin.items():
        if tree.move(old, new):
            moved_ts[new] = old.parent
    tests_moved = move_tests(tree)
    for old, new in plugin_test_moves().items():
        tree.move(old, new)

    split = {p: defined_in(p) for p in SPLIT}
    dotted = dotted_pattern(moves)
    paths, path_table = path_pattern(moves)
    rel, rel_table = rel_paths({**plugin, **test_moves(), **plugin_test_moves()})

    for path in files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        new = text
        if path.suffix == ".py":
            new = rewrite_from_imports(new, moves, split)
        new = dotted.sub(lambda m: moves[m.group(1)], new)
        new = split_dotted(new, split)
        new = paths.sub(lambda m: path_table[m.group(1) or m.group(2)], new)
        new = rel.sub(lambda m: rel_table[m.group(1)], new)
        if path.suffix in (".ts", ".tsx", ".mjs", ".js") and PLUGIN in path.parents:
            new = rewrite_ts(path, new, moved_ts.get(path, path.parent), plugin)
            if path.name != "generated.ts":
                new = rename_plugin(path, new)
        if path.suffix == ".py":
            new = rename_python(path, new)
        new = rename_dotted(new)
        if path in tests_moved:
            depth = tests_moved[path]
            new = FILE_PARENT.sub(lambda m, d=depth: f"Path(__file__){m.group('resolve') or ''}.parents[{d}]", new)
        if new != text:
            tree.write(path, new)

    if not args.check:
        # what it edited, and the tests it moved (a test importing another sorts it as first-party no more)
        touched = [c.split(" ", 1)[1] for c in tree.changed if c.startswith("edit ") and c.endswith(".py")]
        touched += [str(p.relative_to(ROOT)) for p in tests_moved]
        if touched:
            ruff = ROOT / ".venv" / "bin" / "ruff"
            found = str(ruff) if ruff.exists() else shutil.which("ruff")
            if found:
                subprocess.run([found, "check", "--fix", "--select", "I", "--quiet", *touched], cwd=ROOT, check=False)
            else:
                print("no ruff (.venv/bin/ruff or on PATH): sort the imports with `ruff check --fix --select I`",
                      file=sys.stderr)
    for line in tree.changed:
        print(line)
    if not tree.changed:
        print("nothing to do: the tree has issue 36's layout")
    return 1 if args.check and tree.changed else 0


if __name__ == "__main__":
    sys.exit(main())
