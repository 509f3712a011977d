import assert from "node:assert/strict"
import { test } from "node:test"

import { askRule } from "../dist/index.js"
import { hooks } from "./helpers.mjs"

const env = { MCPX_HOME: "/nonexistent/mcpx-home", MCPX_PLUGIN_ELICIT: "notify" }

test("the session is added to the very args object of mcpx tools, and only theirs", async () => {
  const h = hooks(env)
  const args = { text: "hi" }
  const output = { args }
  await h["tool.execute.before"]({ tool: "mcpx_demo_echo", sessionID: "ses_a", callID: "c1" }, output)
  assert.equal(output.args, args, "the object opencode sends is kept: a replaced one would not reach mcpx")
  assert.deepEqual(args, { text: "hi", _mcpx_session: "ses_a" })
  for (const tool of ["bash", "read", "github_create_issue", "mcpxdemo_echo", "mcpx_ask_person"]) {
    const other = { args: { x: 1 } }
    await h["tool.execute.before"]({ tool, sessionID: "ses_a", callID: "c2" }, other)
    assert.deepEqual(other.args, { x: 1 }, tool)
  }
})

test("the entry option names the MCP entry that runs mcpx serve", async () => {
  const h = hooks(env, { entry: "gateway" })
  const mine = { args: {} }
  const theirs = { args: {} }
  await h["tool.execute.before"]({ tool: "gateway_mcpx_elicit_answer", sessionID: "ses_b", callID: "c" }, mine)
  await h["tool.execute.before"]({ tool: "mcpx_demo_echo", sessionID: "ses_b", callID: "c" }, theirs)
  assert.deepEqual(mine.args, { _mcpx_session: "ses_b" })
  assert.deepEqual(theirs.args, {})
})

test("every shell of the session gets MCPX_SESSION_ID", async () => {
  const h = hooks(env)
  const output = { env: { KEEP: "1" } }
  await h["shell.env"]({ cwd: "/tmp", sessionID: "ses_c", callID: "c" }, output)
  assert.deepEqual(output.env, { KEEP: "1", MCPX_SESSION_ID: "ses_c" })
  const none = { env: {} }
  await h["shell.env"]({ cwd: "/tmp" }, none)
  assert.deepEqual(none.env, {})
})

test("the config hook makes mcpx_elicit a rule that asks, keeping every other rule", async () => {
  const h = hooks(env)
  for (const [before, after] of [
    [undefined, { mcpx_elicit: "ask" }],
    ["allow", { "*": "allow", mcpx_elicit: "ask" }],
    [{ bash: "deny", edit: { "*.md": "allow" } }, { bash: "deny", edit: { "*.md": "allow" }, mcpx_elicit: "ask" }],
    [{ mcpx_elicit: "allow" }, { mcpx_elicit: "ask" }],
    [{ mcpx_elicit: "deny" }, { mcpx_elicit: "deny" }],
  ]) {
    const config = before === undefined ? {} : { permission: structuredClone(before) }
    await h.config(config)
    assert.deepEqual(config.permission, after)
  }
  const direct = {}
  askRule(direct)
  assert.deepEqual(direct, { permission: { mcpx_elicit: "ask" } })
})
