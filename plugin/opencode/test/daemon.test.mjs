import assert from "node:assert/strict"
import { createServer } from "node:net"
import { after, before, test } from "node:test"

import { Daemon, locate, stateDir } from "../dist/lib/shared/daemon.js"
import { SCHEMAS, appended, builtinOutput, hooks, startDaemon } from "./helpers.mjs"

async function freePort() {
  const server = createServer()
  await new Promise((r) => server.listen(0, "127.0.0.1", r))
  const { port } = server.address()
  await new Promise((r) => server.close(r))
  return port
}

let d
let port
before(async () => {
  port = await freePort()
  d = await startDaemon({ servers: {} }, { listen: `127.0.0.1:${port}` })
})
after(async () => d?.stop())

test("the daemon is found as mcpx finds it: MCPX_DAEMON_URL, else the socket in the state directory", () => {
  assert.equal(stateDir({ MCPX_HOME: "/x/home" }), "/x/home")
  assert.equal(stateDir({ XDG_STATE_HOME: "/x/state" }), "/x/state/mcpx")
  assert.match(stateDir({}), /\/\.local\/state\/mcpx$/)
  assert.deepEqual(locate({ MCPX_HOME: "/x/home" }), { socket: "/x/home/daemon.sock" })
  assert.equal(locate({ MCPX_DAEMON_URL: "http://127.0.0.1:9/" }).url.toString(), "http://127.0.0.1:9/")
})

test("over TCP the token comes from the state directory, or MCPX_TOKEN", async () => {
  const url = `http://127.0.0.1:${port}`
  const q = await d.ask({ session: "ses_tcp", server: "s", requestedSchema: SCHEMAS.repo })
  const byFile = new Daemon({ MCPX_DAEMON_URL: url, MCPX_HOME: d.home })
  assert.deepEqual((await byFile.pending("ses_tcp")).map((x) => x.id), [q.id])
  const { readFileSync } = await import("node:fs")
  const token = readFileSync(`${d.home}/token`, "utf8").trim()
  const byEnv = new Daemon({ MCPX_DAEMON_URL: url, MCPX_TOKEN: token, MCPX_HOME: "/nonexistent" })
  assert.equal((await byEnv.pending("ses_tcp")).length, 1)
  const text = appended(await (async () => {
    const out = builtinOutput("x")
    await hooks({ MCPX_DAEMON_URL: url, MCPX_TOKEN: "wrong", MCPX_PLUGIN_ELICIT: "notify" })["tool.execute.after"](
      { tool: "read", sessionID: "ses_tcp", callID: "c", args: {} }, out)
    return out
  })())
  assert.match(text, new RegExp(`The mcpx daemon at http://127.0.0.1:${port}/ did not list this session's questions: it answered 401`))
})

test("a daemon that is gone is NoDaemon, whatever the transport", async () => {
  await assert.rejects(new Daemon({ MCPX_HOME: "/nonexistent" }).health(), { name: "NoDaemon" })
  await assert.rejects(new Daemon({ MCPX_DAEMON_URL: `http://127.0.0.1:${await freePort()}` }).health(), { name: "NoDaemon" })
})
