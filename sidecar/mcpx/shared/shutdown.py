"""The daemon's shutdown signal, as the app holds it: apart from shared/names.py, which the CLI reads too, because
it is an aiohttp AppKey and a command that only sends a header name must not import aiohttp for it."""

from __future__ import annotations

import asyncio

from aiohttp import web

# resolved when the daemon starts to stop: long polls and streams end at once instead of holding the drain open.
# A future, not an Event: a long poll waits on it beside its answer with one asyncio.wait, no task started
SHUTDOWN: web.AppKey[asyncio.Future[None]] = web.AppKey("shutdown", asyncio.Future)
