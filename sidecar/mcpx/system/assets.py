"""Where the opencode plugin (built) and the mcpx-elicitation skill are.

An installed mcpx carries both as package data (mcpx/assets/, put there by setup.py when a wheel is built). In
a checkout (an editable install, `./dev`), they are the repository's own: plugin/opencode/dist (built with
`npm run build`) and skills/mcpx-elicitation.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import mcpx

SKILL = "mcpx-elicitation"


def packaged() -> Path | None:
    """mcpx/assets of this installation, when it has one (a wheel's, unpacked on disk as pip installs it)."""
    root = files(mcpx) / "assets"
    return root if isinstance(root, Path) and root.is_dir() else None


def checkout() -> Path:
    """The repository mcpx runs from (sidecar/mcpx/__init__.py → the repository), in development."""
    return Path(mcpx.__file__).resolve().parents[2]


def plugin_dir() -> Path:
    """The plugin, built: its server part (index.js), its TUI part (tui.js) and package.json naming both."""
    if (root := packaged()) is not None:
        return root / "opencode"
    return checkout() / "plugin" / "opencode" / "dist"


def skill_dir() -> Path:
    if (root := packaged()) is not None:
        return root / "skills" / SKILL
    return checkout() / "skills" / SKILL


def missing_hint() -> str:
    """What to do when the plugin or the skill is not where this installation looks."""
    if packaged() is not None:
        return "this mcpx was installed incompletely; reinstall it from a wheel built with `./dev wheel`"
    return (f"build the plugin first: `npm ci && npm run build` in {checkout()} (or install mcpx from a wheel, "
            "which carries it built: `./dev wheel`)")
