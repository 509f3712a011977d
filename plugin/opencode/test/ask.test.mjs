import assert from "node:assert/strict"
import { after, before, test } from "node:test"

import { readRejection } from "../dist/lib/server/ask.js"
import { SCHEMAS, hooks, startDaemon, toolContext } from "./helpers.mjs"

let d
before(async () => { d = await startDaemon() })
after(async () => d?.stop())

const rejected = () => Object.assign(new Error("The user rejected permission to use this specific tool call."), { _tag: "PermissionRejectedError" })
const corrected = (feedback) => Object.assign(new Error(`The user rejected permission to use this specific tool call with the following feedback: ${feedback}`),
  { _tag: "PermissionCorrectedError", feedback })

const askHooks = () => hooks({ ...d.env, MCPX_PLUGIN_ELICIT: "ask" })

test("a confirmation goes to the permission dialog; allow is recorded as accept by person:opencode", async () => {
  const h = askHooks()
  const q = await d.ask({ session: "ses_p1", server: "git", tool: "delete_branch", message: "Really delete branch main?", requestedSchema: SCHEMAS.confirm })
  const { ctx, seen } = toolContext("ses_p1", async () => undefined)
  const text = await h.tool.mcpx_ask_person.execute({ id: q.id }, ctx)
  assert.equal(seen.asked.length, 1)
  assert.equal(seen.asked[0].permission, "mcpx_elicit")
  assert.deepEqual(seen.asked[0].patterns, ["git: Really delete branch main?"])
  assert.equal(seen.asked[0].metadata.id, q.id)
  assert.equal(seen.metadata[0].title, "git (via mcpx) asks: “Really delete branch main?”", "what the person sees on the tool")
  assert.match(text, /The person allowed it in opencode's permission dialog: recorded for elc-[0-9a-f]{16} as accept by person:opencode/)
  const { elicitation, answer } = await d.get(q.id)
  assert.equal(elicitation.state, "answered")
  assert.deepEqual([answer.action, answer.by, answer.content, answer.session], ["accept", "person:opencode", { confirm: true }, "ses_p1"])
})

test("reject is decline; reject with a message is decline with the person's words as the reason", async () => {
  const h = askHooks()
  for (const [error, reason] of [[rejected(), undefined], [corrected("not main, use staging"), "not main, use staging"]]) {
    const q = await d.ask({ session: "ses_p2", server: "git", message: "Really delete branch main?", requestedSchema: SCHEMAS.confirm })
    const { ctx } = toolContext("ses_p2", async () => { throw error })
    const text = await h.tool.mcpx_ask_person.execute({ id: q.id }, ctx)
    assert.match(text, reason ? /rejected it, saying “not main, use staging”/ : /The person rejected it in opencode's permission dialog/)
    const { answer } = await d.get(q.id)
    assert.deepEqual([answer.action, answer.by, answer.reason], ["decline", "person:opencode", reason])
  }
})

test("a url-mode question and one without fields get the permission dialog too", async () => {
  const h = askHooks()
  const url = await d.ask({ session: "ses_p3", server: "acct", message: "Sign in to Example", mode: "url", url: "https://example.com/login", requestedSchema: undefined })
  const none = await d.ask({ session: "ses_p3", server: "ci", message: "Deploy build 417?", requestedSchema: { type: "object", properties: {} } })
  for (const q of [url, none]) {
    const { ctx, seen } = toolContext("ses_p3", async () => undefined)
    await h.tool.mcpx_ask_person.execute({ id: q.id }, ctx)
    assert.equal(seen.asked.length, 1)
    const { answer } = await d.get(q.id)
    assert.deepEqual([answer.action, answer.by], ["accept", "person:opencode"])
  }
})

test("a rule that denies the permission, another session, or a level other than ask records nothing", async () => {
  const q = await d.ask({ session: "ses_p4", server: "git", message: "Really delete?", requestedSchema: SCHEMAS.confirm })
  const denied = Object.assign(new Error("The user has specified a rule which prevents you from using this specific tool call."), { _tag: "PermissionDeniedError" })
  const { ctx } = toolContext("ses_p4", async () => { throw denied })
  const refused = await askHooks().tool.mcpx_ask_person.execute({ id: q.id }, ctx)
  assert.match(refused, /denies mcpx_elicit, so nobody was asked/)
  // where the person answers instead: the daemon's one sentence (rendering.py), not one the plugin writes
  const waits = (await d.get(q.id)).elicitation.render.waits
  assert.ok(waits.includes(`they answer from a terminal: mcpx elicit answer ${q.id}`) && refused.endsWith(waits), refused)
  const other = toolContext("ses_someone_else", async () => undefined)
  assert.match(await askHooks().tool.mcpx_ask_person.execute({ id: q.id }, other.ctx), /belongs to another session/)
  assert.equal(other.seen.asked.length, 0)
  const notify = toolContext("ses_p4", async () => undefined)
  const text = await hooks({ ...d.env, MCPX_PLUGIN_ELICIT: "notify" }).tool.mcpx_ask_person.execute({ id: q.id }, notify.ctx)
  assert.match(text, /only at level ask \(now notify\)/)
  assert.ok(text.endsWith(waits), text)
  assert.equal(notify.seen.asked.length, 0)
  assert.equal((await d.get(q.id)).elicitation.state, "pending")
  assert.match(await askHooks().tool.mcpx_ask_person.execute({ id: "elc-nope" }, ctx), /is not a question id/)
})

test("a credential is never put in a dialog", async () => {
  const q = await d.ask({ session: "ses_p5", server: "api", message: "Paste your API token", requestedSchema: SCHEMAS.token })
  const { ctx, seen } = toolContext("ses_p5", async () => undefined)
  const text = await askHooks().tool.mcpx_ask_person.execute({ id: q.id }, ctx)
  assert.equal(seen.asked.length, 0)
  assert.match(text, /It asks for a credential, so it is not shown in opencode/)
  assert.ok(text.includes(`mcpx elicit answer ${q.id}`))
})

function questionCall(text) {
  const line = text.split("\n").find((l) => l.startsWith("question {"))
  assert.ok(line, text)
  return JSON.parse(line.slice("question ".length))
}

test("choices and free text: the exact question call, and the person's reply from opencode's event", async () => {
  const h = askHooks()
  const q = await d.ask({ session: "ses_q1", server: "gh", tool: "file_issue", message: "Describe the issue", requestedSchema: SCHEMAS.issue })
  const { ctx, seen } = toolContext("ses_q1", async () => undefined)
  const text = await h.tool.mcpx_ask_person.execute({ id: q.id }, ctx)
  assert.equal(seen.asked.length, 0, "no permission dialog for free text")
  const call = questionCall(text)
  assert.equal(call.questions.length, 4)
  // the agent rewrote the question: the dialog shows mcpx's rendering all the same
  const args = { questions: [{ question: `Just say yes [${q.id}]`, header: q.id, options: [] }] }
  await h["tool.execute.before"]({ tool: "question", sessionID: "ses_q1", callID: "call_q1" }, { args })
  assert.deepEqual(args.questions, call.questions)
  await h.event({ event: { type: "question.asked", properties: { id: "que_1", sessionID: "ses_q1", questions: args.questions, tool: { messageID: "msg_1", callID: "call_q1" } } } })
  await h.event({ event: { type: "question.replied", properties: { sessionID: "ses_q1", requestID: "que_1", answers: [["Broken build"], ["3"], ["green"], ["No"]] } } })
  const output = { title: "Asked 4 questions", output: "User has answered your questions: …", metadata: { answers: [] } }
  await h["tool.execute.after"]({ tool: "question", sessionID: "ses_q1", callID: "call_q1", args }, output)
  assert.match(output.output, /The person answered in opencode's question dialog: recorded for elc-[0-9a-f]{16} as accept by person:opencode/)
  const { answer } = await d.get(q.id)
  assert.deepEqual([answer.action, answer.by, answer.content], ["accept", "person:opencode", { title: "Broken build", count: 3, color: "green", notify: false }])
})

test("a reply that does not fit is named to the agent, and the question stays open", async () => {
  const h = askHooks()
  const q = await d.ask({ session: "ses_q2", server: "gh", message: "Describe the issue", requestedSchema: SCHEMAS.issue })
  const { ctx } = toolContext("ses_q2", async () => undefined)
  const call = questionCall(await h.tool.mcpx_ask_person.execute({ id: q.id }, ctx))
  await h["tool.execute.before"]({ tool: "question", sessionID: "ses_q2", callID: "call_q2" }, { args: call })
  await h.event({ event: { type: "question.asked", properties: { id: "que_2", sessionID: "ses_q2", questions: call.questions, tool: { messageID: "m", callID: "call_q2" } } } })
  await h.event({ event: { type: "question.replied", properties: { sessionID: "ses_q2", requestID: "que_2", answers: [["ab"], ["42"], [], []] } } })
  const output = { title: "", output: "User has answered", metadata: {} }
  await h["tool.execute.after"]({ tool: "question", sessionID: "ses_q2", callID: "call_q2", args: call }, output)
  assert.match(output.output, /but the answer did not fit elc-[0-9a-f]{16} \(.*title.*count.*\)\. It is still open: call mcpx_ask_person/)
  assert.equal((await d.get(q.id)).elicitation.state, "pending")
})

test("dismissing the question dialog is cancel; another session's events are ignored", async () => {
  const h = askHooks()
  const q = await d.ask({ session: "ses_q3", server: "gh", message: "Which repository?", requestedSchema: SCHEMAS.repo })
  const { ctx } = toolContext("ses_q3", async () => undefined)
  const call = questionCall(await h.tool.mcpx_ask_person.execute({ id: q.id }, ctx))
  await h["tool.execute.before"]({ tool: "question", sessionID: "ses_q3", callID: "call_q3" }, { args: call })
  await h.event({ event: { type: "question.asked", properties: { id: "que_x", sessionID: "ses_other", questions: call.questions } } })
  await h.event({ event: { type: "question.replied", properties: { sessionID: "ses_other", requestID: "que_x", answers: [["evil/repo"]] } } })
  assert.equal((await d.get(q.id)).elicitation.state, "pending")
  await h.event({ event: { type: "question.asked", properties: { id: "que_3", sessionID: "ses_q3", questions: call.questions, tool: { messageID: "m", callID: "call_q3" } } } })
  await h.event({ event: { type: "question.rejected", properties: { sessionID: "ses_q3", requestID: "que_3" } } })
  const output = { title: "", output: "dismissed", metadata: {} }
  await h["tool.execute.after"]({ tool: "question", sessionID: "ses_q3", callID: "call_q3", args: call }, output)
  const { answer } = await d.get(q.id)
  assert.deepEqual([answer.action, answer.by], ["cancel", "person:opencode"])
  assert.match(output.output, /The person dismissed the question dialog: recorded/)
})

test("opencode's rejections are read as the person's words", () => {
  assert.deepEqual(readRejection(rejected()), { kind: "rejected" })
  assert.deepEqual(readRejection(corrected("use staging")), { kind: "rejected", feedback: "use staging" })
  assert.deepEqual(readRejection(new Error("The user rejected permission to use this specific tool call with the following feedback: only\non Fridays")),
    { kind: "rejected", feedback: "only\non Fridays" })
  assert.equal(readRejection(new Error("aborted")).kind, "other")
})

test("in a session opencode run made, mcpx_ask_person opens no dialog and records nothing: the question stays open", async () => {
  const runSession = { id: "ses_runask", permission: [{ permission: "question", action: "deny", pattern: "*" }] }
  for (const seams of [{ readSession: async () => runSession }, { argv: ["bun", "/$bunfs/root/opencode", "run", "go"] }]) {
    const h = hooks({ ...d.env, MCPX_PLUGIN_ELICIT: "ask" }, {}, seams)
    const q = await d.ask({ session: "ses_runask", server: "git", message: "Really delete branch main?", requestedSchema: SCHEMAS.confirm })
    const { ctx, seen } = toolContext("ses_runask", async () => { throw rejected() }) // what opencode run does to a dialog
    const text = await h.tool.mcpx_ask_person.execute({ id: q.id }, ctx)
    assert.equal(seen.asked.length, 0, "no dialog")
    assert.match(text, /nobody can see a dialog in this session \(opencode run answers every dialog by itself\), so none was opened and nothing was recorded/)
    assert.ok(text.includes(`mcpx elicit answer ${q.id} '{"confirm":true}'`), text)
    const { elicitation, answer } = await d.get(q.id)
    assert.equal(elicitation.state, "pending")
    assert.equal(answer, null)
  }
})
