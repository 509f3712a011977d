import assert from "node:assert/strict"
import { join } from "node:path"
import { after, before, test } from "node:test"

import { createHooks, serveOwnToolsOnly } from "../dist/index.js"
import { stopFollowing } from "../dist/lib/shared/events.js"
import { ROOT, SCHEMAS, hooks, startDaemon, toolContext } from "./helpers.mjs"

const PY = join(ROOT, ".venv", "bin", "python")
// the suite gives the peer's command: its fork server's stand-in (tests/opencode/test_plugin.py); by hand, the peer itself
const sdk = process.env.MCPX_TEST_SDK_SERVER
  ? JSON.parse(process.env.MCPX_TEST_SDK_SERVER)
  : { command: PY, args: [join(ROOT, "tests", "peers", "sdk_server.py")] }

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
  // the daemon's words, as mcpx serve's early result says them
  assert.match(early, /\n\nOnce answered, collect the call's real result with mcpx_mcpx_task_result \{"task": "tsk-[0-9a-f]{16}", "wait": true\} \(or pass "wait": true when you answer\)\.$/)
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

/** Plays mcpx's dialog in the TUI part: the session's next pending question, shown (elicit.shown), then answered. */
async function answerInDialog(session, action, body = {}) {
  let q
  for (const end = Date.now() + 30000; !q; await new Promise((r) => setTimeout(r, 50))) {
    if (Date.now() > end) throw new Error(`no question in ${session}`)
    q = (await d.client.pending(session))[0]
  }
  await d.client.shown(q.id)
  const r = await d.client.answer(q.id, action, session, body)
  assert.equal(r.status, 200, JSON.stringify(r.body))
  return q
}

test("with mcpx's own dialog here, the call waits for the person's answer there: no permission dialog, then the result", async () => {
  const h = await askHooks("ask", { tui: { present: true, open: () => {} } })
  const { ctx, seen } = toolContext("ses_c7", async () => { throw new Error("no permission dialog may open") })
  const running = call(h, "mcpx_sdk_delete_branch", {}, ctx)
  const q = await answerInDialog("ses_c7", "accept", { content: { confirm: true } })
  const out = await running
  assert.equal(seen.asked.length, 0)
  assert.match(out, new RegExp(`^Question ${q.id} \\(sdk asked the person\\): It was shown to the person in opencode's dialog at \\d\\d:\\d\\d\\. ${q.id} is answered \\(accept by person:opencode at \\S+\\)\\.\\n\\n`))
  assert.ok(out.endsWith('{"action": "accept", "data": {"confirm": true}}'), out)
  // a credential too: its value goes from the dialog to the daemon, and the call's output never names it
  const { ctx: ctx2 } = toolContext("ses_c8", async () => { throw new Error("no permission dialog may open") })
  const token = call(h, "mcpx_sdk_use_token", {}, ctx2)
  await answerInDialog("ses_c8", "decline", { reason: "not here" })
  assert.ok((await token).endsWith('{"action": "decline", "token_length": null, "token_echo": null}'))
})

test("a TUI attached from elsewhere that showed the session's questions in its dialog is trusted the same way", async () => {
  const h = await askHooks("ask")
  await h["tool.execute.before"]({ tool: "bash", sessionID: "ses_c9", callID: "c0" }, { args: {} }) // the session is this opencode's
  const earlier = await d.ask({ session: "ses_c9", server: "git", message: "Delete dev?", requestedSchema: SCHEMAS.confirm })
  await d.client.shown(earlier.id) // the attached TUI put it in its dialog
  await d.client.request("POST", `/v1/elicit/${earlier.id}/cancel`, { body: {} })
  for (const end = Date.now() + 20000; h.announcer.shownIn(earlier.id) !== "dialog"; await new Promise((r) => setTimeout(r, 25))) {
    if (Date.now() > end) throw new Error("the dialog's record was not heard")
  }
  const { ctx, seen } = toolContext("ses_c9", async () => { throw new Error("no permission dialog may open") })
  const running = call(h, "mcpx_sdk_delete_branch", {}, ctx)
  await answerInDialog("ses_c9", "decline", { reason: "not main" })
  const out = await running
  assert.equal(seen.asked.length, 0)
  assert.ok(out.endsWith('{"action": "decline", "data": null}'), out)
})

test("a permission dialog is closed with once, never reject: opencode rejects every other one of the session with it", async () => {
  const replies = []
  const client = { postSessionIdPermissionsPermissionId: async (req) => { replies.push(req); return { data: true } } }
  const h = createHooks({ directory: ROOT, client }, {}, { ...d.env, MCPX_PLUGIN_ELICIT: "ask" },
    { tui: { present: false, open: () => {} } })
  await h.ready
  let id
  const { ctx } = toolContext("ses_c10", (input) => {
    id = input.metadata.id
    void h.event({ event: { type: "permission.asked", properties: { id: "per_2", sessionID: "ses_c10", permission: "mcpx_elicit", metadata: input.metadata } } })
      .then(() => d.client.request("POST", `/v1/elicit/${id}/accept`, { body: { content: { confirm: true } }, headers: { "X-Mcpx-Answerer": "person:cli" } }))
    return new Promise(() => {})
  })
  await call(h, "mcpx_sdk_delete_branch", {}, ctx)
  assert.deepEqual(replies, [{ path: { id: "ses_c10", permissionID: "per_2" }, body: { response: "once" } }])
})

test("a dialog rejected because the session was interrupted records nothing: the person answered nothing", async () => {
  const h = await askHooks()
  const aborting = new AbortController()
  const { ctx } = toolContext("ses_c11", async () => {
    aborting.abort() // the person pressed Esc on the session: opencode rejects its pending dialogs
    throw rejected()
  })
  ctx.abort = aborting.signal
  const out = await call(h, "mcpx_sdk_delete_branch", {}, ctx)
  const id = /(elc-[0-9a-f]{16})/.exec(out)[1]
  assert.match(out, /The call was interrupted while elc-[0-9a-f]{16}'s dialog was open; nothing was recorded\./)
  assert.equal((await d.get(id)).elicitation.state, "pending")
  await d.client.request("POST", `/v1/elicit/${id}/cancel`, { body: {} })
})

test("the plugin's own tools carry no session argument; the MCP entry's calls do (opencode passes none)", async () => {
  const h = await askHooks()
  const own = { args: { x: 1 } }
  await h["tool.execute.before"]({ tool: "mcpx_sdk_delete_branch", sessionID: "ses_c12", callID: "c" }, own)
  assert.deepEqual(own.args, { x: 1 }, "nothing of mcpx's in what the person sees of the call")
  const entry = { args: {} }
  await h["tool.execute.before"]({ tool: "mcpx_mcpx_elicit_list", sessionID: "ses_c12", callID: "c" }, entry)
  assert.deepEqual(entry.args, { _mcpx_session: "ses_c12" })
})
