"""`mcpx gemini install|import`: mcpx in Gemini CLI (docs/gemini.md)."""

from __future__ import annotations

import argparse

from mcpx.cli.hosts.gemini_import import import_servers
from mcpx.cli.hosts.gemini_install import install
from mcpx.cli.hosts.host_cmd import register_host


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    register_host(sub, "gemini", "Gemini CLI", install=install, import_servers=import_servers,
                  project="this project's .gemini/settings.json and .gemini/skills/",
                  user="~/.gemini/settings.json and skills/ ($GEMINI_CLI_HOME/.gemini when set)")
