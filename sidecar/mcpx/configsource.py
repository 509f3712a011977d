"""The config in force, for the parts that read it: loaded once, watched, replaced whole on a good reload.

Each part is given the ConfigSource and reads `.config` when it needs a setting, so a reload
reaches every part at once; a reload that fails keeps the previous config in force and is
remembered (`error`) for `mcpx status` to show.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from mcpx.config import Config, ConfigError, LoadedConfig, watch_config

log = logging.getLogger("mcpx.daemon")

RETRY_WATCH = 2.0  # seconds before watching again after the watch itself failed


class ConfigSource:
    def __init__(self, loaded: LoadedConfig) -> None:
        self._loaded = loaded
        self.error: str | None = None  # why the last reload was refused, until one succeeds

    @property
    def config(self) -> Config:
        return self._loaded.config

    @property
    def loaded(self) -> LoadedConfig:
        return self._loaded

    @property
    def origin(self) -> str:
        return self._loaded.origin

    def fallback_session(self, cwd: str | Path | None = None) -> str:
        return self._loaded.fallback_session(cwd)

    def apply(self, update: LoadedConfig | ConfigError) -> bool:
        """Take a reloaded config, or keep the previous one and remember why the new one was refused."""
        if isinstance(update, ConfigError):
            self.error = str(update)
            log.error("config reload refused, previous config stays in force: %s", update)
            return False
        self._loaded = update
        self.error = None
        log.info("config reloaded from %s", update.origin)
        return True

    async def watch(self, on_change: Callable[[], Awaitable[None]]) -> None:
        """Apply every change to the config's files until cancelled; `on_change` runs after each one taken."""
        while True:
            try:
                async for update in watch_config(self._loaded):
                    if self.apply(update):
                        await on_change()
                return
            except Exception:
                log.exception("watching the config failed; retrying in %gs", RETRY_WATCH)
                await asyncio.sleep(RETRY_WATCH)
