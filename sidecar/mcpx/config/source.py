"""The config in force, for the parts that read it: loaded once, watched, replaced whole on a good reload.

Each part is given the ConfigSource and reads `.config` when it needs a setting, so a reload
reaches every part at once; a reload that fails keeps the previous config in force and is
remembered (`error`) for `mcpx status` to show.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from mcpx.config.finding import DEMO, LoadedConfig, demo_server, validate
from mcpx.config.models import Config
from mcpx.config.problems import ConfigError, config_warnings
from mcpx.config.watching import watch_config

log = logging.getLogger("mcpx.daemon")

RETRY_WATCH = 2.0  # seconds before watching again after the watch itself failed


class ConfigSource:
    """`keep_demo`: the bundled demo server stays in force whatever the files say, unless they name a server
    "demo" themselves (`mcpx daemon --demo` asked for it). A daemon that started on the embedded default keeps it
    too: a first config written while it runs does not take the demo (and its calls) away under the person trying
    it; without --demo, the next start goes by the files alone."""

    def __init__(self, loaded: LoadedConfig, keep_demo: bool = False) -> None:
        self._asked = keep_demo
        self.keep_demo = keep_demo or not loaded.sources
        self._put(self._with_demo(loaded))
        self.error: str | None = None  # why the last reload was refused, until one succeeds
        self._warned: set[str] = set()
        self._warn()

    def _warn(self) -> None:
        """Log what the config in force holds but will not do as written (a timeout under the start's minimum):
        each once, not again on a reload that still has it."""
        now = {str(w) for w in config_warnings(self.loaded.config, self.loaded.origin)}
        for warning in sorted(now - self._warned):
            log.warning("config: %s", warning)
        self._warned = now

    def _with_demo(self, loaded: LoadedConfig) -> LoadedConfig:
        if not self.keep_demo or DEMO in loaded.config.servers:
            return loaded
        demo = validate({"servers": {DEMO: demo_server()}}, "(the demo server)").servers[DEMO]
        if loaded.sources:
            log.info("the demo server stays in force beside %s's servers (%s); add a server named \"demo\" to the "
                     "config to keep it for good", loaded.origin,
                     "mcpx daemon --demo" if self._asked else "this daemon started with no config")
        config = loaded.config.model_copy(update={"servers": {**loaded.config.servers, DEMO: demo}})
        return replace(loaded, config=config)

    def _put(self, loaded: LoadedConfig) -> None:
        """The config in force and what it was loaded from, replaced together: attributes, not properties (read on
        every call's way, some more than once)."""
        self.loaded: LoadedConfig = loaded
        self.config: Config = loaded.config

    @property
    def origin(self) -> str:
        return self.loaded.origin

    def fallback_session(self, cwd: str | Path | None = None) -> str:
        return self.loaded.fallback_session(cwd)

    def apply(self, update: LoadedConfig | ConfigError) -> bool:
        """Take a reloaded config, or keep the previous one and remember why the new one was refused."""
        if isinstance(update, ConfigError):
            self.error = str(update)
            log.error("config reload refused, previous config stays in force: %s", update)
            return False
        self._put(self._with_demo(update))
        self.error = None
        log.info("config reloaded from %s", update.origin)
        self._warn()
        return True

    async def watch(self, on_change: Callable[[], Awaitable[None]]) -> None:
        """Apply every change to the config's files until cancelled; `on_change` runs after each one taken."""
        while True:
            try:
                async for update in watch_config(self.loaded):
                    if self.apply(update):
                        await on_change()
                return
            except Exception:
                log.exception("watching the config failed; retrying in %gs", RETRY_WATCH)
                await asyncio.sleep(RETRY_WATCH)
