// First use (lib/server/start.ts): no daemon when opencode starts; the plugin starts one as `mcpx serve` does, detached,
// and waits until it serves.

import assert from "node:assert/strict"
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { test } from "node:test"

import { Daemon } from "../dist/lib/shared/daemon.js"
import { ensureDaemon } from "../dist/lib/server/start.js"
import { ROOT } from "./helpers.mjs"

const PY = join(ROOT, ".venv", "bin", "python")
const MCPX = [PY, "-m", "mcpx"]

test("with no daemon, one is started with the mcpx given and the plugin waits until it serves", async () => {
  const home = mkdtempSync(join(tmpdir(), "mcpx-start-"))
  writeFileSync(join(home, "config.json"), JSON.stringify({ servers: {} }))
  const env = { ...process.env, MCPX_HOME: home, MCPX_CONFIG: join(home, "config.json") }
  const daemon = new Daemon(env)
  try {
    const started = await ensureDaemon(daemon, MCPX, 60000)
    assert.deepEqual(started, { ok: true, started: true })
    const health = await daemon.health()
    assert.equal(health.ok, true)
    assert.deepEqual(await ensureDaemon(daemon, MCPX), { ok: true, started: false }, "one serves: nothing started")
  } finally {
    spawnSync(PY, ["-m", "mcpx", "daemon", "stop"], { env, timeout: 60000 })
    rmSync(home, { recursive: true, force: true })
  }
})

test("a command that cannot start one says why; a daemon at MCPX_DAEMON_URL is never started here", async () => {
  const home = mkdtempSync(join(tmpdir(), "mcpx-start-"))
  try {
    const missing = await ensureDaemon(new Daemon({ MCPX_HOME: home }), ["/nonexistent/mcpx"], 5000)
    assert.equal(missing.ok, false)
    assert.match(missing.why, /\/nonexistent\/mcpx daemon start` could not run: .*ENOENT/)
    const remote = await ensureDaemon(new Daemon({ MCPX_DAEMON_URL: "http://127.0.0.1:9/" }), MCPX, 5000)
    assert.equal(remote.ok, false)
    assert.match(remote.why, /MCPX_DAEMON_URL/)
  } finally {
    rmSync(home, { recursive: true, force: true })
  }
})
