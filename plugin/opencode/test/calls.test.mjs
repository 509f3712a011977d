import assert from "node:assert/strict"
import { join } from "node:path"
import { after, before, test } from "node:test"

import { serveOwnToolsOnly } from "../dist/index.js"
import { stopFollowing } from "../dist/lib/events.js"
import { ROOT, hooks, startDaemon, toolContext } from "./helpers.mjs"

const PY = join(ROOT, ".venv", "bin", "python")
const sdk = { command: PY, args: [join(ROOT, "tests", "peers", "sdk_server.py")] }

let d
before(async () => {
  d = await startDaemon({ servers: { sdk } })
  // the first listing starts the server: seconds on a loaded machine, which is not what these tests are about
  await d.client.request("GET", "/v1/tools", { timeoutMs: 90000 })
})
after(async () => {
  stopFollowing()
  await d?.stop()
})

const rejected = () => Object.assign(new Error("The user rejected permission to use this specific tool call."), { _tag: "PermissionRejectedError" })

async function askHooks(level = "ask", seams = {}) {
  const h = hooks({ ...d.env, MCPX_PLUGIN_ELICIT: level }, {}, seams)
  await h.ready
  return h
}

/** A call as opencode makes a plugin tool's: tool.execute.before (the session), then execute. */
async function call(h, name, args, ctx) {
  const output = { args: { ...args } }
  await h["tool.execute.before"]({ tool: name, sessionID: ctx.sessionID, callID: "c1" }, output)
  return h.tool[name].execute(output.args, ctx)
}

test("at ask the servers' tools are the plugin's: the MCP entry's names, descriptions and schemas", async () => {
  const h = await askHooks()
  const listed = (await d.client.request("GET", "/v1/tools")).body.servers.sdk
  const need = listed.find((t) => t.name === "need_repo")
  assert.ok(h.tool.mcpx_sdk_need_repo, Object.keys(h.tool).join(", "))
  assert.equal(h.tool.mcpx_sdk_need_repo.description, need.description)
  const slow = listed.find((t) => t.name === "slow_ask")
  assert.deepEqual(h.tool.mcpx_sdk_slow_ask.args, slow.inputSchema.properties)
  assert.ok(h.tool.mcpx_ask_person, "the plugin's own tool stays")
  const config = { mcp: { mcpx: { type: "local", command: ["mcpx", "serve"], environment: { MCPX_TOOL_PREFIX: "mcpx_" } } } }
  await h.config(config)
  assert.deepEqual(config.mcp.mcpx.environment, { MCPX_TOOL_PREFIX: "mcpx_", MCPX_SERVE_TOOLS: "mcpx" })
  assert.equal(config.permission.mcpx_elicit, "ask")
  for (const level of ["notify", "off", "auto"]) {
    const other = await askHooks(level)
    assert.deepEqual(Object.keys(other.tool), ["mcpx_ask_person"], level)
    const untouched = { mcp: { mcpx: { type: "local", environment: {} } } }
    await other.config(untouched)
    assert.deepEqual(untouched.mcp.mcpx.environment, {}, `${level}: the MCP entry offers the servers' tools`)
  }
  const run = await askHooks("ask", { argv: ["bun", "/$bunfs/root/opencode", "run", "x"] })
  assert.deepEqual(Object.keys(run.tool), ["mcpx_ask_person"], "opencode run: nobody sees a dialog")
  const remote = { mcp: { mcpx: { type: "remote", url: "http://x" } } }
  serveOwnToolsOnly(remote, "mcpx")
  assert.equal(remote.mcp.mcpx.environment, undefined)
})

test("a confirmation opens the permission dialog in the call; allowed, the output is the call's real result", async () => {
  const h = await askHooks()
  const { ctx, seen } = toolContext("ses_c1", async () => undefined)
  const out = await call(h, "mcpx_sdk_delete_branch", {}, ctx)
  assert.equal(seen.asked.length, 1)
  assert.deepEqual(seen.asked[0].patterns, ["sdk: Really delete branch main?"])
  const id = seen.asked[0].metadata.id
  assert.match(out, new RegExp(`The person allowed it in opencode's permission dialog: recorded for ${id} as accept by person:opencode`))
  assert.ok(out.endsWith('{"action": "accept", "data": {"confirm": true}}'), out)
  const { elicitation, answer } = await d.get(id)
  assert.equal(elicitation.session, "ses_c1", "the session from the call, not an argument the server sees")
  assert.deepEqual([answer.by, answer.content], ["person:opencode", { confirm: true }])
  assert.ok(h.announcer.shownAt(id), "a dialog shows it to the person")
})

test("rejected, the server hears decline; a second question of the call opens the next dialog in the same call", async () => {
  const h = await askHooks()
  const { ctx: declined } = toolContext("ses_c2", async () => { throw rejected() })
  assert.ok((await call(h, "mcpx_sdk_delete_branch", {}, declined)).endsWith('{"action": "decline", "data": null}'))
  // ask_twice asks the agent's free text first: that ends the call early, with the daemon's texts for the agent
  const { ctx } = toolContext("ses_c3", async () => undefined)
  const early = await call(h, "mcpx_sdk_ask_twice", {}, ctx)
  assert.match(early, /^mcpx: sdk\.ask_twice is waiting for an answer before it can finish; the call keeps running \(task tsk-[0-9a-f]{16}\)\./)
  const id = /Question (elc-[0-9a-f]{16})/.exec(early)[1]
  assert.ok(early.includes(`to answer:  mcpx_mcpx_elicit_answer {"id": "${id}"`), early)
  assert.match(early, /Once answered, collect the call's real result with mcpx_mcpx_task_result \{"task":"tsk-[0-9a-f]{16}","wait":true\}\./)
})

test("in a session opencode run made, the call opens no dialog: the question stays open and is announced", async () => {
  const runSession = { id: "ses_c4", permission: [{ permission: "question", action: "deny", pattern: "*" }] }
  const h = await askHooks("ask", { readSession: async () => runSession })
  const { ctx, seen } = toolContext("ses_c4", async () => { throw rejected() })
  const out = await call(h, "mcpx_sdk_delete_branch", {}, ctx)
  assert.equal(seen.asked.length, 0)
  const id = /Question (elc-[0-9a-f]{16})/.exec(out)[1]
  assert.match(out, /Tell the person it waits; they answer from a terminal: mcpx elicit answer/)
  const { elicitation, answer } = await d.get(id)
  assert.equal(elicitation.state, "pending")
  assert.equal(answer, null)
  await d.client.request("POST", `/v1/elicit/${id}/decline`, { body: {} }) // the call ends
})

test("without a daemon the plugin offers no copies, and the MCP entry keeps the servers' tools", async () => {
  const h = hooks({ MCPX_HOME: "/nonexistent/mcpx-home", MCPX_PLUGIN_ELICIT: "ask" })
  await h.ready
  assert.deepEqual(Object.keys(h.tool), ["mcpx_ask_person"])
  const config = { mcp: { mcpx: { type: "local", environment: {} } } }
  await h.config(config)
  assert.deepEqual(config.mcp.mcpx.environment, {})
})

test("answered elsewhere while its dialog is open: the dialog is closed, nothing is recorded from it, the result comes", async () => {
  const closed = []
  const h = await askHooks("ask", { closeDialog: async (session, requestID) => { closed.push([session, requestID]) } })
  let id
  // the person never answers the dialog; opencode says it asked (permission.asked), and the terminal answers instead
  const { ctx, seen } = toolContext("ses_c5", (input) => {
    id = input.metadata.id
    void h.event({ event: { type: "permission.asked", properties: { id: "per_1", sessionID: "ses_c5", permission: "mcpx_elicit", metadata: input.metadata } } })
      .then(() => d.client.request("POST", `/v1/elicit/${id}/accept`, { body: { content: { confirm: true } }, headers: { "X-Mcpx-Answerer": "person:cli" } }))
    return new Promise(() => {}) // open until closed
  })
  const out = await call(h, "mcpx_sdk_delete_branch", {}, ctx)
  assert.equal(seen.asked.length, 1)
  assert.deepEqual(closed, [["ses_c5", "per_1"]])
  assert.match(out, new RegExp(`${id} ended while its dialog was open \\(answered elsewhere\\); the dialog was closed and nothing was recorded from it\\.`))
  assert.ok(out.endsWith('{"action": "accept", "data": {"confirm": true}}'), out)
  assert.equal((await d.get(id)).answer.by, "person:cli")
})

test("a level changed from ask while opencode runs: the plugin's copies open no dialog from then on", async () => {
  const env = { ...d.env, MCPX_PLUGIN_ELICIT: "ask" }
  const h = hooks(env)
  await h.ready
  assert.ok(h.tool.mcpx_sdk_delete_branch)
  env.MCPX_PLUGIN_ELICIT = "notify" // as a config change would make it
  const { ctx, seen } = toolContext("ses_c6", async () => undefined)
  const out = await call(h, "mcpx_sdk_delete_branch", {}, ctx)
  assert.equal(seen.asked.length, 0)
  const id = /Question (elc-[0-9a-f]{16})/.exec(out)[1]
  assert.match(out, /they answer from a terminal: mcpx elicit answer/)
  assert.equal((await d.get(id)).answer, null)
  await d.client.request("POST", `/v1/elicit/${id}/decline`, { body: {} })
})
