// The person's questions in opencode's TUI (lib/tui/queue.ts), against a real daemon and its event stream, with a
// Screen that records what the TUI would draw: which question is in the dialog, the badge, the toasts. What the
// dialog looks like on a real screen is tests/hosts/test_opencode_tui.py's.

import assert from "node:assert/strict"
import { after, before, test } from "node:test"

import { Daemon } from "../dist/lib/shared/daemon.js"
import { QuestionQueue } from "../dist/lib/tui/queue.js"
import { follow, stopFollowing } from "../dist/lib/shared/events.js"
import { SCHEMAS, eventually, startDaemon } from "./helpers.mjs"

let d
before(async () => {
  d = await startDaemon({ servers: {}, people: { ann: {}, ben: {} } }) // approvers, for the approvals' test
})
after(async () => {
  stopFollowing()
  await d?.stop()
})


/** A screen as the TUI part draws it, kept as data; `foreign`: a dialog of opencode's own is open. */
function fakeScreen() {
  const s = {
    shown: [], // every question put in the dialog, in order
    open: undefined, // { open, closed } while a dialog of ours is up
    badges: [],
    toasts: [],
    urls: [],
    foreign: false,
    busy: () => s.foreign,
    show(open, closed) {
      s.open = { open, closed, at: Date.now() }
      s.shown.push(open.question.id)
    },
    hide() {
      s.open = undefined
    },
    toast(t) {
      s.toasts.push(t)
    },
    badge(n) {
      s.badges.push(n)
    },
    async openUrl(url) {
      s.urls.push(url)
      return "opened"
    },
    /** the person pressed Esc (or another dialog replaced ours) */
    esc() {
      const o = s.open
      s.open = undefined
      o.closed()
    },
    get badge_() {
      return s.badges.at(-1)
    },
  }
  return s
}

function desk(level = "ask") {
  const screen = fakeScreen()
  const daemon = new Daemon(d.env)
  const desk = new QuestionQueue(daemon, "mcpx_", screen, { level: async () => level, command: "ctrl+x i", retryMs: 50 })
  follow(daemon).on((e) => desk.onEvent(e))
  return { desk, screen }
}

const confirm = (session, message = "Really delete branch main?") =>
  d.ask({ session, server: "git", tool: "delete_branch", message, requestedSchema: SCHEMAS.confirm })

test("a question for the person in a session of this opencode is in the dialog at once, and the log says so", async () => {
  const { desk, screen } = desk_("ses_d1")
  const opened = Date.now()
  const q = await confirm("ses_d1")
  await eventually(() => screen.open, "the dialog")
  assert.ok(screen.open.at - opened < 1500, `in the dialog ${screen.open.at - opened} ms after it opened`)
  assert.equal(screen.open.open.question.id, q.id)
  assert.equal(screen.open.open.question.render.form.confirm.confirm, true, "drawn from the daemon's render.form")
  assert.equal(screen.badge_, 1)
  assert.match(screen.toasts.at(-1).message, /answer in the dialog$/)
  const shown = await eventually(async () => (await d.client.request("GET", `/v1/audit?elicit=${q.id}&kinds=elicit.shown`)).body.records[0], "elicit.shown")
  assert.deepEqual(shown.data, { where: "opencode", how: "dialog", by: "person:opencode" })
  // Accept: the daemon's content for a lone yes/no, recorded as the person's in opencode
  assert.deepEqual(await screen.open.open.answer("accept", {}), { kind: "answered" })
  const { answer } = await d.get(q.id)
  assert.deepEqual([answer.action, answer.by, answer.content], ["accept", "person:opencode", { confirm: true }])
  assert.equal(screen.open, undefined)
  assert.equal(screen.badge_, 0)
  assert.equal(screen.toasts.at(-1).message, "git has your answer (accept).")
  assert.equal(desk.showing, undefined)
})

/** A desk bound to `session`, as the TUI binds the sessions its events name. */
function desk_(session, level) {
  const made = desk(level)
  made.desk.bind(session)
  return made
}

test("the agent's questions and other opencodes' sessions never reach the dialog", async () => {
  const { desk, screen } = desk_("ses_d2")
  await d.ask({ session: "ses_d2", message: "Which color?", requestedSchema: SCHEMAS.color }) // fixed choices: the agent's
  await confirm("ses_elsewhere")
  const mine = await confirm("ses_d2")
  await eventually(() => screen.open, "the dialog")
  assert.deepEqual(screen.shown, [mine.id])
  await desk.idle()
})

test("a question only its approvers' own links answer never opens the dialog (an answer from it would be refused)", async () => {
  const { desk, screen } = desk_("ses_d9")
  const approval = await d.ask({ session: "ses_d9", message: "Deploy?", requestedSchema: { type: "object", properties: {} }, approvers: ["ann", "ben"], need: 2 })
  assert.equal(approval.approvals.status, "0 of 2 approved")
  const mine = await confirm("ses_d9")
  await eventually(() => screen.open, "the dialog")
  assert.deepEqual(screen.shown, [mine.id])
  await desk.idle()
})

test("one dialog at a time: the next waits in order, the badge counts both, and comes when the first is answered", async () => {
  const { desk, screen } = desk_("ses_d3")
  const first = await confirm("ses_d3", "Delete main?")
  await eventually(() => screen.open, "the first dialog")
  const second = await confirm("ses_d3", "Delete dev?")
  await eventually(() => screen.badge_ === 2, "the badge counting two")
  assert.deepEqual(screen.shown, [first.id], "the second waits")
  assert.deepEqual(await screen.open.open.answer("decline", { reason: "not main" }), { kind: "answered" })
  await eventually(() => screen.open?.open.question.id === second.id, "the second dialog")
  assert.equal(screen.badge_, 1)
  const { answer } = await d.get(first.id)
  assert.deepEqual([answer.action, answer.reason, answer.by], ["decline", "not main", "person:opencode"])
  await screen.open.open.answer("cancel", {})
  assert.equal((await d.get(second.id)).answer.action, "cancel")
  await desk.idle()
})

test("answered elsewhere, its dialog closes with one line saying so; the next one comes", async () => {
  const { desk, screen } = desk_("ses_d4")
  const first = await confirm("ses_d4", "Delete main?")
  await eventually(() => screen.open, "the dialog")
  const second = await confirm("ses_d4", "Delete dev?")
  await eventually(() => screen.badge_ === 2, "two waiting")
  const r = await d.client.request("POST", `/v1/elicit/${first.id}/accept`, { body: { content: { confirm: true } },
    headers: { "X-Mcpx-Answerer": "person:cli" } })
  assert.equal(r.status, 200)
  await eventually(() => screen.toasts.some((t) => t.message.includes("answered elsewhere")), "the line")
  const line = screen.toasts.find((t) => t.message.includes("answered elsewhere")).message
  assert.equal(line, `${first.id} was answered elsewhere (accept by person:cli); its dialog is closed.`)
  await eventually(() => screen.open?.open.question.id === second.id, "the next dialog")
  // one toast at a time: the next dialog's keeps the line, ahead of its own
  assert.equal(screen.toasts.at(-1).message, `${line}\ngit asks: “Delete dev?” — answer in the dialog`)
  // the second was never answered by anyone: nothing recorded for it while the first's dialog closed
  assert.equal((await d.get(second.id)).elicitation.state, "pending")
  await d.client.request("POST", `/v1/elicit/${second.id}/cancel`, { body: {} })
  await eventually(() => screen.open === undefined, "the second closed too")
  assert.equal(screen.badge_, 0)
  await desk.idle()
})

test("the next question's dialog takes the place of one that ended or was answered: the dialog is never taken down between them, however long the level takes to read", async () => {
  const screen = fakeScreen()
  const hidden = []
  const hide = screen.hide
  screen.hide = () => (hidden.push(screen.open?.open.question.id), hide())
  let held = null // the level's read, while the test holds it (a daemon slow to say it)
  const level = () => held ? new Promise((resolve) => held.push(() => resolve("ask"))) : Promise.resolve("ask")
  const desk = new QuestionQueue(new Daemon(d.env), "mcpx_", screen, { level, command: "ctrl+x i", retryMs: 50 })
  follow(new Daemon(d.env)).on((e) => desk.onEvent(e))
  desk.bind("ses_d20")
  const first = await confirm("ses_d20", "Delete main?")
  await eventually(() => screen.open, "the first dialog")
  const second = await confirm("ses_d20", "Delete dev?")
  const third = await confirm("ses_d20", "Delete old?")
  await eventually(() => screen.badge_ === 3, "three waiting")
  held = []
  const r = await d.client.request("POST", `/v1/elicit/${first.id}/accept`, { body: { content: { confirm: true } },
    headers: { "X-Mcpx-Answerer": "person:cli" } })
  assert.equal(r.status, 200)
  await eventually(() => held.length, "the level asked for, after the first ended elsewhere")
  assert.deepEqual(hidden, [], "the first's dialog stays until the next takes its place")
  held.shift()()
  await eventually(() => screen.open?.open.question.id === second.id, "the second dialog")
  const answered = screen.open.open.answer("accept", {})
  await eventually(() => held.length, "the level asked for, after the second was answered")
  assert.deepEqual(hidden, [], "the second's dialog stays until the next takes its place")
  while (held.length) held.shift()()
  assert.deepEqual(await answered, { kind: "answered" })
  assert.equal(screen.open?.open.question.id, third.id)
  held = null
  await screen.open.open.answer("cancel", {})
  assert.deepEqual([hidden, screen.open, screen.badge_], [[third.id], undefined, 0], "taken down once none follows")
  await desk.idle()
})

test("Esc (or a dialog of opencode's replacing ours) answers nothing; the question waits and the command brings it back", async () => {
  const { desk, screen } = desk_("ses_d5")
  const q = await confirm("ses_d5")
  await eventually(() => screen.open, "the dialog")
  screen.esc()
  assert.equal(desk.showing, undefined)
  assert.match(screen.toasts.at(-1).message, /^Not answered: it waits until \d\d:\d\d\. ctrl\+x i brings it back\.$/)
  assert.equal((await d.get(q.id)).elicitation.state, "pending", "nothing recorded")
  assert.equal(screen.badge_, 1, "it still counts")
  await new Promise((r) => setTimeout(r, 200))
  assert.equal(screen.open, undefined, "set aside, it does not come back by itself")
  desk.next()
  await eventually(() => screen.open?.open.question.id === q.id, "brought back")
  await screen.open.open.answer("accept", {})
  await desk.idle()
})

test("while a dialog of opencode's own is open, ours waits for it to close", async () => {
  const { desk, screen } = desk_("ses_d6")
  screen.foreign = true
  await confirm("ses_d6")
  await eventually(() => screen.badge_ === 1, "counted")
  await new Promise((r) => setTimeout(r, 300))
  assert.equal(screen.open, undefined)
  screen.foreign = false
  await eventually(() => screen.open, "the dialog, once opencode's closed")
  await screen.open.open.answer("cancel", {})
  await desk.idle()
})

test("an answer that does not fit stays in the dialog with each field's problem; the daemon judges", async () => {
  const { desk, screen } = desk_("ses_d7")
  const q = await d.ask({ session: "ses_d7", message: "Describe the issue", requestedSchema: SCHEMAS.issue, audience: "human" })
  await eventually(() => screen.open, "the dialog")
  const outcome = await screen.open.open.answer("accept", { form: { title: "ab", count: "42" } })
  assert.equal(outcome.kind, "refused")
  assert.ok(outcome.problems.title && outcome.problems.count, JSON.stringify(outcome))
  assert.equal(desk.showing, q.id, "the dialog stays")
  assert.equal((await d.get(q.id)).elicitation.state, "pending")
  assert.deepEqual(await screen.open.open.answer("accept", { form: { title: "Broken", count: "3" } }), { kind: "answered" })
  assert.deepEqual((await d.get(q.id)).answer.content.count, 3)
  await desk.idle()
})

test("at notify the dialog does not open by itself: a toast says how to open it, and the command does", async () => {
  const { desk, screen } = desk_("ses_d8", "notify")
  const q = await confirm("ses_d8")
  await eventually(() => screen.toasts.some((t) => t.message.endsWith("ctrl+x i to answer")), "the toast")
  assert.equal(screen.open, undefined)
  desk.next()
  await eventually(() => screen.open?.open.question.id === q.id, "opened on the command")
  await screen.open.open.answer("cancel", {})
  const off = desk_("ses_d12", "off") // a session of its own: ses_d9 keeps the approvals test's question waiting
  await confirm("ses_d12")
  await eventually(() => off.screen.badge_ === 1, "counted")
  await off.desk.idle() // what it fetched and decided on the question is done: nothing more comes of it
  assert.equal(off.screen.open, undefined)
  assert.equal(off.screen.toasts.length, 0, "off shows nothing")
  await desk.idle()
})

test("a page is opened only when the person chooses to, and that choice is audited", async () => {
  const { desk, screen } = desk_("ses_d10")
  const q = await d.ask({ session: "ses_d10", mode: "url", url: "https://example.com/login", message: "Sign in" })
  await eventually(() => screen.open, "the dialog")
  assert.deepEqual(screen.urls, [], "not opened by itself")
  assert.equal(await screen.open.open.openPage(), "opened")
  assert.deepEqual(screen.urls, ["https://example.com/login"])
  const consent = (await d.client.request("GET", `/v1/audit?elicit=${q.id}&kinds=elicit.consent`)).body.records
  assert.deepEqual(consent.map((r) => r.data), [{ consent: true, by: "person:opencode", domain: "example.com" }])
  await screen.open.open.answer("accept", {})
  assert.equal((await d.get(q.id)).answer.action, "accept")
  await desk.idle()
})

test("the agent's mcpx_ask_person brings a waiting question in front of the person", async () => {
  const { desk, screen } = desk_("ses_d11")
  const first = await confirm("ses_d11", "Delete main?")
  await eventually(() => screen.open, "the first")
  const second = await confirm("ses_d11", "Delete dev?")
  await eventually(() => screen.badge_ === 2, "two")
  desk.bring(second.id)
  await eventually(() => screen.open?.open.question.id === second.id, "the second in front")
  assert.equal((await d.get(first.id)).elicitation.state, "pending", "the first set aside, not answered")
  await screen.open.open.answer("cancel", {})
  await d.client.request("POST", `/v1/elicit/${first.id}/cancel`, { body: {} })
  await desk.idle()
})
