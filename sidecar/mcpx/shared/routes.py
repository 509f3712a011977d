"""Where a part of the daemon adds its HTTP routes: the inbox's pages, the /mcp endpoint, the OAuth callback.

Each is handed a `Routes` rather than the app's router, so that the daemon decides what stands in front of every
route it did not build itself (api/table.py's `GuardedRoutes`: its own check and its errors' shape) as the route
is added, through aiohttp's public `add_*`: these parts know nothing of that check."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web

PageHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Routes(Protocol):
    """The part of aiohttp's `UrlDispatcher` a part adds its routes through (`add_get` adds HEAD too, as aiohttp's)."""

    def add_get(self, path: str, handler: PageHandler) -> Any: ...

    def add_post(self, path: str, handler: PageHandler) -> Any: ...

    def add_delete(self, path: str, handler: PageHandler) -> Any: ...

    def add_route(self, method: str, path: str, handler: PageHandler) -> Any: ...
