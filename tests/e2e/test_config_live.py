"""Live config from nothing: a daemon started on the embedded default takes up a config written later, and keeps
the demo server it was trying beside it; `mcpx daemon --demo` has the demo whatever the config says."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
from test_cli_call import Said

from conftest import wait_for
from harness import make_daemon, stop_process


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
                # the demo stays beside the new servers: its calls and questions are not taken away mid-try
                return h["servers"] == ["demo", "later"] and h["config"] == str(user_config)

            await wait_for(taken_up, what="the config written after the start in force")
            async with http.get("/v1/upstreams") as r:
                assert r.status == 200  # the gateway was told: it answers for the new server list

            user_config.unlink()

            async def back_to_default() -> bool:
                h = await _health(http)
                return h["servers"] == ["demo"] and h["config"] == "(embedded default)"

            await wait_for(back_to_default, what="the embedded default back in force once the file went")
        log = d.tail(20000)
        assert "config reloaded from " + str(user_config) in log
        assert "the demo server stays in force beside" in log and 'add a server named "demo"' in log


def test_daemon_demo_raises_the_demo_question_whatever_the_config_says(home: Path) -> None:
    """A config of one's own, without the demo: `./dev run` (mcpx daemon --demo) still raises the demo question,
    and it waits an hour (elicit.ttl's two minutes are too short for someone reading the README meanwhile)."""
    d = make_daemon(home, {"servers": {"mine": {"command": sys.executable, "args": ["-c", ""]}}})
    proc = subprocess.Popen([sys.executable, "-m", "mcpx", "daemon", "--demo"], env=d.env, cwd=home,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        said = Said(proc.stderr)
        said.wait_for("demo server is asking")
        q = json.loads(d.cli("elicit", "list", "--json").stdout)["elicitations"][0]
        assert q["server"] == "demo"
        left = datetime.fromisoformat(q["expiresAt"]) - datetime.fromisoformat(q["created"])
        assert left.total_seconds() == 3600
        # its hints say `mcpx`, in aligned columns
        hints = [ln for ln in said.text.splitlines() if ln.startswith("    mcpx ")]
        assert len(hints) == 4, said.text
        columns = {len(ln) - len(ln.rstrip().split("   ")[-1].lstrip()) for ln in hints}
        assert len(columns) == 1, hints
    finally:
        stop_process(proc)
