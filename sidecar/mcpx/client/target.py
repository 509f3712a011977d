"""A tool as `mcpx call` and `mcpx.Client` name it: SERVER.TOOL."""

from __future__ import annotations


def split_target(target: str) -> tuple[str, str]:
    """SERVER.TOOL as (server, tool); ValueError naming the form for anything else (`mcpx call`, mcpx.Client)."""
    server, dot, tool = target.partition(".")
    if not dot or not server or not tool:
        raise ValueError(f"{target!r}: name the tool as SERVER.TOOL, e.g. demo.choose_repository")
    return server, tool
