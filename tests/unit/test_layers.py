"""The layers of sidecar/mcpx import one way: every rule docs/architecture.md states about imports, checked here.

Every import counts: at module level, under TYPE_CHECKING, inside a function. A late import that
breaks a circle at run time is still a circle in the design.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1].parent / "sidecar"
PACKAGE = ROOT / "mcpx"

# what a layer may import besides itself (docs/architecture.md, "Which way the imports go"): the wire and the broker
# stand alone, and what every layer shares depends on no layer (two named exceptions)
ONLY = {
    "mcpx.mcp": ("mcpx.shared",),
    "mcpx.broker": ("mcpx.shared", "mcpx.system", "mcpx.config"),
    "mcpx.shared": ("mcpx.broker.models", "mcpx.mcp.jsonrpc"),  # sessions.py: a session's source; handoff.py: a line
    "mcpx.system": ("mcpx.shared",),
    "mcpx.config": ("mcpx.shared",),
    "mcpx.presentation": ("mcpx.shared", "mcpx.broker.models", "mcpx.broker.schema"),
    "mcpx.demo": ("mcpx.mcp", "mcpx.shared"),
    "mcpx.client": ("mcpx.shared", "mcpx.system", "mcpx.presentation", "mcpx.broker.models", "mcpx.broker.schema",
                    "mcpx.daemon.launch"),
}
# what a layer must not import: a door knows nothing of the doors beside it, nothing below the daemon imports it
FORBIDDEN = {
    # the call knows no kind of upstream and no door: the kinds and the doors know it
    "mcpx.call": ("mcpx.upstream", "mcpx.services", "mcpx.surface", "mcpx.api", "mcpx.inbox", "mcpx.daemon",
                  "mcpx.cli", "mcpx.client"),
    # the gateway knows no kind of upstream but MCP's, built in: the services' kinds are handed to it
    "mcpx.upstream": ("mcpx.services", "mcpx.surface", "mcpx.api", "mcpx.inbox", "mcpx.daemon", "mcpx.cli",
                      "mcpx.client"),
    "mcpx.services": ("mcpx.surface", "mcpx.api", "mcpx.inbox", "mcpx.daemon", "mcpx.cli", "mcpx.client"),
    "mcpx.surface": ("mcpx.api", "mcpx.inbox", "mcpx.daemon", "mcpx.cli", "mcpx.client"),
    "mcpx.api": ("mcpx.surface", "mcpx.daemon", "mcpx.cli", "mcpx.client"),
    "mcpx.inbox": ("mcpx.api", "mcpx.daemon", "mcpx.surface", "mcpx.upstream", "mcpx.call", "mcpx.mcp", "mcpx.cli",
                   "mcpx.client"),
    "mcpx.daemon": ("mcpx.cli", "mcpx.client"),
    # the CLI talks to the daemon: of the broker it reads the models, the schema and the pure routing rules; of the
    # daemon it starts it (launch, service, server for `mcpx daemon`); of upstreams nothing (what it says of them as
    # the gateway does is in the base: a server's environment in config/, an unknown tool in shared/)
    "mcpx.cli": ("mcpx.surface", "mcpx.api", "mcpx.inbox", "mcpx.mcp.peer", "mcpx.mcp.stdio", "mcpx.mcp.outbound",
                 "mcpx.broker.broker", "mcpx.broker.store", "mcpx.broker.stores", "mcpx.broker.sqlite",
                 "mcpx.broker.postgres", "mcpx.upstream", "mcpx.call", "mcpx.daemon.app"),
}
# only the broker holds the store: nothing else reaches the SQL (the daemon picks a store through stores.py)
STORE = ("mcpx.broker.sqlite", "mcpx.broker.postgres", "mcpx.broker.sql", "mcpx.broker.commits")
# the script client is loaded by `import mcpx; mcpx.Client` alone: the daemon and `mcpx serve` never import it
SCRIPT = "mcpx.client.script"
# the package root holds no loose modules: each module lives in the package of its role
ROOT_MODULES = {"mcpx", "mcpx.__main__"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The mcpx modules `name` imports, wherever in the file the import stands."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # `from mcpx.broker import models` imports the module mcpx.broker.models; `from mcpx.x import name`,
            # the module mcpx.x
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]
        else:
            continue
        for target in targets:
            if not target.startswith("mcpx"):
                continue
            # the nearest module that exists: `import mcpx.broker.models.Foo` is mcpx.broker.models
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


@functools.cache
def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imported(name, path, known) for name, path in found.items()}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            # a package's __init__ importing its own submodules is how packages work, not a circle
            if nxt.startswith(node + "."):
                continue
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if state.get(nxt) is None:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if state.get(start) is None:
            found = visit(start)
            if found:
                return found
    return None


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The parser itself: module-level, TYPE_CHECKING, function-level and relative imports all count."""
    pkg = tmp_path / "mcpx"
    (pkg / "sub").mkdir(parents=True)
    for name in ("__init__.py", "a.py", "b.py", "c.py", "d.py", "sub/__init__.py", "sub/e.py"):
        (pkg / name).touch()
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mcpx import b\n"
                              "from mcpx.d import name\n")
    (pkg / "b.py").write_text("def f():\n    import mcpx.c\n")
    (pkg / "c.py").write_text("from .sub.e import thing\n")
    (pkg / "sub" / "e.py").write_text("from ..a import x\n")
    known = {"mcpx", "mcpx.a", "mcpx.b", "mcpx.c", "mcpx.d", "mcpx.sub", "mcpx.sub.e"}
    edges = {
        "mcpx.a": imported("mcpx.a", pkg / "a.py", known),
        "mcpx.b": imported("mcpx.b", pkg / "b.py", known),
        "mcpx.c": imported("mcpx.c", pkg / "c.py", known),
        "mcpx.sub.e": imported("mcpx.sub.e", pkg / "sub" / "e.py", known),
    }
    assert edges["mcpx.a"] == {"mcpx.b", "mcpx.d"}
    assert edges["mcpx.b"] == {"mcpx.c"}
    assert edges["mcpx.c"] == {"mcpx.sub.e"}
    assert edges["mcpx.sub.e"] == {"mcpx.a"}
    assert cycle(edges) == ["mcpx.a", "mcpx.b", "mcpx.c", "mcpx.sub.e", "mcpx.a"]
    edges["mcpx.sub.e"] = set()
    assert cycle(edges) is None


def test_no_import_circle_in_mcpx() -> None:
    edges = graph()
    assert len(edges) > 50, "the walk found too few modules to be looking at sidecar/mcpx"
    found = cycle(edges)
    assert found is None, "import circle: " + " -> ".join(found or [])


def within(name: str, prefixes: tuple[str, ...] | str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in ((prefixes,) if isinstance(prefixes, str) else prefixes))


def test_the_graph_knows_every_layer_it_rules_on() -> None:
    """A rule about a package that is gone (renamed, moved) would pass for nothing."""
    known = set(graph())
    named = {*ONLY, *FORBIDDEN, *(t for ts in (*ONLY.values(), *FORBIDDEN.values()) for t in ts), *STORE, SCRIPT}
    gone = sorted(n for n in named if n not in known)
    assert not gone, f"rules name modules that do not exist: {gone}"


@pytest.mark.parametrize("layer", sorted(ONLY))
def test_a_layer_imports_only_what_it_stands_on(layer: str) -> None:
    wrong = [f"{name} imports {target}" for name, targets in graph().items() if within(name, layer)
             for target in sorted(targets)
             if not within(target, layer) and not within(target, ONLY[layer]) and target != "mcpx"]
    assert not wrong, f"{layer} may import only {', '.join(ONLY[layer])}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_only_below_it(layer: str) -> None:
    wrong = [f"{name} imports {target}" for name, targets in graph().items() if within(name, layer)
             for target in sorted(targets) if within(target, FORBIDDEN[layer])]
    assert not wrong, f"{layer} must not import {', '.join(FORBIDDEN[layer])}:\n" + "\n".join(wrong)


def test_only_the_broker_reaches_the_store_and_only_the_package_root_loads_the_script_client() -> None:
    edges = graph()
    wrong = [f"{name} imports {target}" for name, targets in edges.items() for target in sorted(targets)
             if within(target, STORE) and not within(name, "mcpx.broker")]
    wrong += [f"{name} imports {SCRIPT}" for name, targets in edges.items()
              if SCRIPT in targets and name != "mcpx" and not within(name, "mcpx.client")]
    assert not wrong, "\n".join(wrong)


def test_the_package_root_holds_only_packages() -> None:
    loose = sorted(n for n in graph() if n.count(".") == 1 and (PACKAGE / f"{n.split('.')[1]}.py").exists()
                   and n not in ROOT_MODULES)
    assert not loose, f"modules loose at the package root (give each the package of its role): {loose}"


def test_one_name_one_thing_no_two_classes_share_a_name() -> None:
    """A grep for a class's name finds that class alone (issue 36 item 4): two things of one name across packages
    read as one thing to a newcomer. Each host's installer names its own (ClaudePlace, CodexPlace, ...)."""
    where: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(str(path.relative_to(PACKAGE)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


def test_the_architecture_page_draws_every_package() -> None:
    """docs/architecture.md's tree names each package of sidecar/mcpx, and no package that is gone."""
    doc = (ROOT.parent / "docs" / "architecture.md").read_text()
    tree = doc[doc.index("```text\nsidecar/mcpx/"):doc.index("\nplugin/opencode/")]  # the Python part of the tree
    drawn = set(re.findall(r"^\s*([a-z_]+(?:/[a-z_]+)?)/ ", tree, re.M))
    packages = {p.parent.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE}
    assert drawn == packages, f"drawn but gone: {sorted(drawn - packages)}; not drawn: {sorted(packages - drawn)}"


# ---- the opencode plugin: one source of truth, in Python (docs/opencode.md, "Who renders what")

PLUGIN = ROOT.parent / "plugin" / "opencode"
GENERATED = PLUGIN / "lib" / "shared" / "generated.ts"


def plugin_sources() -> dict[str, str]:
    """The plugin's TypeScript as written by hand (not generated, not built, not its tests), comments left out:
    a name may be mentioned in words, never spelt in code."""
    found = sorted(p for ext in ("*.ts", "*.tsx") for p in PLUGIN.rglob(ext)
                   if p != GENERATED and "dist" not in p.parts and "node_modules" not in p.parts)
    assert len(found) > 15, "the walk found too few files to be looking at plugin/opencode"
    out = {}
    for path in found:
        text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
        # a line comment starts at // outside a string (good enough for this code: no // inside its strings)
        out[str(path.relative_to(ROOT.parent))] = "\n".join(re.sub(r"(^|\s)//.*$", "", line)
                                                            for line in text.splitlines())
    return out


def test_the_plugins_generated_file_is_current() -> None:
    from mcpx.daemon.typescript import COMMAND, generate

    assert GENERATED.read_text() == generate(), (
        f"{GENERATED.relative_to(ROOT.parent)} is not what /v1/openapi.json and mcpx's names give now: run "
        f"`{COMMAND}` and commit it")


def test_the_plugin_keeps_no_copy_of_mcpxs_names() -> None:
    """The id pattern, mcpx's tool names, the plugin's levels, the _meta keys and the headers come from
    lib/shared/generated.ts, which Python writes; a copy by hand would drift."""
    from mcpx.daemon.typescript import ASK_TOOL, MCPX_TOOLS

    spelt = {
        "the id pattern": re.compile(r"\[0-9a-f\]"),
        "a tool name of mcpx's": re.compile("|".join(re.escape(n) for n in (*MCPX_TOOLS, ASK_TOOL))),
        "the levels": re.compile(r"""["']off["'],\s*["']notify["']"""),
        "a _meta key": re.compile(r"""["']io\.mcpx/"""),
        "a header's name": re.compile(r"""["']X-Mcpx-""", re.I),
    }
    wrong = [f"{path}:{n}: {what}: {line.strip()}" for path, text in plugin_sources().items()
             for n, line in enumerate(text.splitlines(), 1) for what, pattern in spelt.items() if pattern.search(line)]
    assert not wrong, "spelt by hand in the plugin (import it from lib/shared/generated.ts):\n" + "\n".join(wrong)


def test_the_plugin_reads_nothing_out_of_mcpxs_texts() -> None:
    """What the daemon renders is shown as given: no regular expression over its words, no splitting it into
    paragraphs to find a question (a result marks them in _meta instead). Regular expressions over opencode's own
    errors are the plugin's business; so is a question's id wherever it stands (what mcpx's CLI printed in a shell
    has no _meta). One exception, named: output.ts gives mcpx's tool names the MCP entry's prefix where `mcpx serve`
    was started without MCPX_TOOL_PREFIX (a hand-written entry); it renames, it reads nothing."""
    regex = re.compile(r"""new RegExp\((?P<built>[^)]*)\)|(?<![\w)\]])/(?P<literal>(?:\\.|[^/\n])+)/[gimsuy]*""")
    words = re.compile(r"question|via mcpx|asks|waits|waiting|answer|mcpx|\\n\\n", re.I)
    exempt = {("plugin/opencode/lib/server/output.ts", "const MCPX_TOOL_NAMES = new RegExp(")}
    wrong = []
    for path, text in plugin_sources().items():
        for n, line in enumerate(text.splitlines(), 1):
            if any(path == where and line.strip().startswith(start) for where, start in exempt):
                continue
            for m in regex.finditer(line):
                source = m.group("built") or m.group("literal") or ""
                if words.search(source):
                    wrong.append(f"{path}:{n}: {line.strip()}")
            if re.search(r"""\.split\(\s*["']\\n\\n["']""", line):
                wrong.append(f"{path}:{n}: {line.strip()}")
    assert not wrong, "the plugin parses mcpx's rendered text:\n" + "\n".join(wrong)
