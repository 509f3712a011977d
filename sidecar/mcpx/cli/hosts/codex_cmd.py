"""`mcpx codex install|import`: mcpx in Codex CLI (docs/codex.md)."""

from __future__ import annotations

import argparse

from mcpx.cli.hosts.codex_import import import_servers
from mcpx.cli.hosts.codex_install import install
from mcpx.cli.hosts.host_cmd import register_host


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    register_host(sub, "codex", "Codex CLI", install=install, import_servers=import_servers,
                  project="this project's .codex/config.toml and .codex/skills/",
                  user="$CODEX_HOME (~/.codex)'s config.toml and skills/")
