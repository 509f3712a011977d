import assert from "node:assert/strict"
import { after, before, test } from "node:test"

import { Daemon } from "../dist/lib/shared/daemon.js"
import { LevelSource } from "../dist/lib/shared/level.js"
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

test("unset, the level follows what opencode runs: ask in a TUI, the app or serve; notify under opencode run", async () => {
  const { defaultLevel } = await import("../dist/lib/shared/level.js")
  const { hostCommand } = await import("../dist/lib/shared/host.js")
  assert.equal(hostCommand(["bun", "/$bunfs/root/opencode", "run", "say hi"]), "run")
  assert.equal(hostCommand(["bun", "/$bunfs/root/opencode", "--print-logs", "run", "--format", "json", "x"]), "run")
  assert.equal(hostCommand(["bun", "/$bunfs/root/opencode", "serve", "--port", "4096"]), "serve")
  assert.equal(hostCommand(["bun", "/$bunfs/root/opencode"]), "tui")
  assert.equal(hostCommand(["bun", "/$bunfs/root/opencode", "/some/project"]), "tui")
  assert.deepEqual(["run", "serve", "tui"].map(defaultLevel), ["notify", "ask", "ask"])
  const env = { MCPX_HOME: "/nonexistent/mcpx-home" }
  assert.deepEqual(await new LevelSource(new Daemon(env), env, 5000, "ask").get(), { level: "ask", from: "default" })
})

test("no dialog where nobody can see one: a session opencode run made is at notify, whatever the level", async () => {
  const { Host, madeByRun } = await import("../dist/lib/shared/host.js")
  const runRules = { id: "ses_r", permission: [{ permission: "question", action: "deny", pattern: "*" }, { permission: "plan_enter", action: "deny", pattern: "*" }] }
  assert.equal(madeByRun(runRules), true)
  assert.equal(madeByRun({ id: "ses_t", permission: [{ permission: "bash", action: "ask", pattern: "*" }] }), false)
  assert.equal(madeByRun({ id: "ses_t" }), false)
  const sessions = { ses_run: runRules, ses_tui: { id: "ses_tui" } }
  const reads = []
  const host = new Host("tui", async (id) => { reads.push(id); return sessions[id] })
  const env = { ...d.env, MCPX_PLUGIN_ELICIT: "ask" }
  const level = new LevelSource(new Daemon(env), env, 5000, "ask", host)
  assert.equal(await level.in("ses_run"), "notify")
  assert.equal(await level.in("ses_tui"), "ask")
  assert.equal(await level.in("ses_run"), "notify")
  assert.deepEqual(reads, ["ses_run", "ses_tui"], "each session read once")
  const inRun = new LevelSource(new Daemon(env), env, 5000, "notify", new Host("run"))
  assert.equal(await inRun.in("ses_tui"), "notify", "in opencode run itself, every session")
  const off = { ...d.env, MCPX_PLUGIN_ELICIT: "off" }
  assert.equal(await new LevelSource(new Daemon(off), off, 5000, "ask", host).in("ses_run"), "off")
})
