"""The daemon's running state, shared by every route: broker, config, upstream gateway."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from aiohttp import web

from mcpx.broker.broker import Broker
from mcpx.config import Config, ConfigError, LoadedConfig
from mcpx.paths import StatePaths

if TYPE_CHECKING:
    from mcpx.upstream.gateway import Gateway

log = logging.getLogger("mcpx.daemon")


@dataclass
class Runtime:
    paths: StatePaths
    loaded: LoadedConfig
    broker: Broker
    started_at: datetime
    listen: str | None = None
    token: str | None = None
    config_error: str | None = None
    gateway: "Gateway | None" = None

    @property
    def config(self) -> Config:
        return self.loaded.config

    def apply(self, update: LoadedConfig | ConfigError) -> bool:
        """Take a reloaded config, or keep the previous one and remember why the new one was refused."""
        if isinstance(update, ConfigError):
            self.config_error = str(update)
            log.error("config reload refused, previous config stays in force: %s", update)
            return False
        self.loaded = update
        self.config_error = None
        log.info("config reloaded from %s", update.origin)
        return True


RUNTIME: web.AppKey[Runtime] = web.AppKey("runtime", Runtime)
