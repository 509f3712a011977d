import assert from "node:assert/strict"
import { after, before, test } from "node:test"

import { Daemon } from "../dist/lib/daemon.js"
import { LevelSource } from "../dist/lib/level.js"
import { startDaemon } from "./helpers.mjs"

let d
before(async () => { d = await startDaemon({ servers: {}, plugin: { elicit: "ask" } }) })
after(async () => d?.stop())

test("MCPX_PLUGIN_ELICIT wins over the config", async () => {
  for (const level of ["off", "notify", "ask", "auto"]) {
    const env = { ...d.env, MCPX_PLUGIN_ELICIT: level }
    assert.deepEqual(await new LevelSource(new Daemon(env), env).get(), { level, from: "env" })
  }
})

test("else plugin.elicit from mcpx's config, read from the daemon's health", async () => {
  assert.deepEqual(await new LevelSource(new Daemon(d.env), d.env).get(), { level: "ask", from: "config" })
  const env = { ...d.env, MCPX_PLUGIN_ELICIT: "sometimes" } // not a level: ignored
  assert.deepEqual(await new LevelSource(new Daemon(env), env).get(), { level: "ask", from: "config" })
})

test("else notify, also when no daemon answers", async () => {
  const env = { MCPX_HOME: "/nonexistent/mcpx-home" }
  assert.deepEqual(await new LevelSource(new Daemon(env), env).get(), { level: "notify", from: "default" })
})

test("a config change applies without a restart, after the short cache", async () => {
  const source = new LevelSource(new Daemon(d.env), d.env, 50)
  assert.equal((await source.get()).level, "ask")
  const { writeFileSync } = await import("node:fs")
  writeFileSync(d.configPath, JSON.stringify({ servers: {}, plugin: { elicit: "off" } }))
  // the daemon's health shows the change once its watcher has read the file: bounded, generously for a loaded machine
  const deadline = Date.now() + 60000
  let level
  while (Date.now() < deadline && (level = (await source.get()).level) !== "off") await new Promise((r) => setTimeout(r, 100))
  assert.equal(level, "off")
})
