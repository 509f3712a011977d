"""Live config from nothing: a daemon started on the embedded default takes up a config written later."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import aiohttp

from conftest import wait_for
from harness import make_daemon


async def _health(http: aiohttp.ClientSession) -> dict[str, Any]:
    async with http.get("/v1/health") as r:
        assert r.status == 200
        body: dict[str, Any] = await r.json()
        return body


async def test_a_user_config_written_after_the_start_is_taken_up_and_its_removal_too(home: Path,
                                                                                    tmp_path: Path) -> None:
    user_config = tmp_path / "xdg" / "mcpx" / "config.json"  # not even its directory exists yet
    d = make_daemon(home)
    del d.env["MCPX_CONFIG"]  # no config named: the user's and the project's places, as for a person
    d.env["MCPX_USER_CONFIG"] = str(user_config)
    with d:
        async with d.session() as http:
            health = await _health(http)
            assert health["config"] == "(embedded default)" and health["servers"] == ["demo"]

            user_config.parent.mkdir(parents=True)
            user_config.write_text(json.dumps({"servers": {"later": {"command": sys.executable, "args": ["-c", ""]}}}))

            async def taken_up() -> bool:
                h = await _health(http)
                return h["servers"] == ["later"] and h["config"] == str(user_config)

            await wait_for(taken_up, what="the config written after the start in force")
            async with http.get("/v1/upstreams") as r:
                assert r.status == 200  # the gateway was told: it answers for the new server list

            user_config.unlink()

            async def back_to_default() -> bool:
                h = await _health(http)
                return h["servers"] == ["demo"] and h["config"] == "(embedded default)"

            await wait_for(back_to_default, what="the embedded default back in force once the file went")
        assert "config reloaded from " + str(user_config) in d.tail(20000)
