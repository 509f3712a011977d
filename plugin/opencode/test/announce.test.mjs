import assert from "node:assert/strict"
import { after, before, test } from "node:test"

import { Daemon } from "../dist/lib/shared/daemon.js"
import { EventFollower, follow, stopFollowing } from "../dist/lib/shared/events.js"
import { SCHEMAS, eventually, hooks, startDaemon, toastCatcher } from "./helpers.mjs"

let d
const records = [] // every record the process's one stream delivered, after the plugins' own listeners had it
before(async () => {
  d = await startDaemon()
  follow(new Daemon(d.env)).on((e) => records.push(e))
})
after(async () => {
  stopFollowing()
  await d?.stop()
})

const bind = async (h, session) => h["tool.execute.before"]({ tool: "mcpx_git_delete", sessionID: session, callID: "c" }, { args: {} })
const human = (session, message = "Really delete branch main?") =>
  d.ask({ session, server: "git", tool: "delete_branch", message, requestedSchema: SCHEMAS.confirm })

/** The stream delivered question `id`'s open to every plugin, and what they started on it has ended. */
async function handled(h, id) {
  await eventually(() => records.some((e) => e.elicit === id && e.kind === "elicit.open"), `${id} delivered`)
  await h.announcer.idle()
}


test("a question for the person that no dialog of mcpx's shows is toasted at once, loud, in the daemon's words", async () => {
  const t = toastCatcher()
  const h = hooks({ ...d.env, MCPX_PLUGIN_ELICIT: "notify" }, {}, { show: t.show })
  await bind(h, "ses_t1")
  const q = await human("ses_t1")
  const opened = Date.now()
  const toast = await t.nth(1)
  assert.ok(toast.at - opened < 1000, `toasted ${toast.at - opened} ms after the question opened`)
  assert.equal(toast.title, "● 1 question for you")
  assert.equal(toast.variant, "warning")
  const [asks, by, where, answer] = toast.message.split("\n")
  assert.equal(asks, "git (via mcpx) asks: “Really delete branch main?”")
  assert.match(by, new RegExp(`^answer by \\d\\d:\\d\\d \\(${q.id}\\)$`))
  assert.equal(where, "from a terminal:")
  assert.equal(answer, `mcpx elicit answer ${q.id} '{"confirm":true}'`) // a line of its own: never wrapped inside the id
  assert.equal((await d.client.question(q.id, "mcpx_")).body.elicitation.render.toast.message, toast.message, "the daemon's words")
  assert.ok(h.announcer.shownAt(q.id) instanceof Date)
  // a second one waiting: the count
  await human("ses_t1", "Really delete branch dev?")
  assert.equal((await t.nth(2)).title, "● 2 questions for you")
})

test("the agent's questions, other opencodes' sessions, off and auto: no toast", async () => {
  for (const level of ["notify", "ask", "off", "auto"]) {
    const t = toastCatcher()
    const h = hooks({ ...d.env, MCPX_PLUGIN_ELICIT: level }, {}, { show: t.show })
    await bind(h, `ses_q_${level}`)
    await d.ask({ session: `ses_q_${level}`, server: "s", message: "Pick a colour", requestedSchema: SCHEMAS.color }) // the agent's
    await human(`ses_elsewhere_${level}`) // a session this opencode never saw
    const marker = await human(`ses_q_${level}`) // the person's, here
    await handled(h, marker.id)
    if (level === "off" || level === "auto") {
      assert.equal(t.toasts.length, 0, level)
      continue
    }
    assert.equal(t.toasts.length, 1, `${level}: only the person's question of this session`)
    assert.ok(t.toasts[0].message.includes(marker.id))
  }
})

test("an escalated question is toasted; a session seen later gets its waiting questions toasted", async () => {
  const t = toastCatcher()
  const h = hooks({ ...d.env, MCPX_PLUGIN_ELICIT: "ask" }, {}, { show: t.show })
  await bind(h, "ses_esc_t")
  const q = await d.ask({ session: "ses_esc_t", server: "s", message: "Which repository?", requestedSchema: SCHEMAS.repo })
  assert.equal(q.audience, "agent-then-human")
  const r = await d.client.request("POST", `/v1/elicit/${q.id}/decline`, {
    body: { reason: "I cannot know" }, headers: { "X-Mcpx-Answerer": "agent:mcp", "X-Mcpx-Session": "ses_esc_t" } })
  assert.equal(r.body.escalated, true)
  assert.ok((await t.nth(1)).message.includes(q.id))
  const early = await human("ses_later")
  await h.event({ event: { type: "session.updated", properties: { info: { id: "ses_later" } } } })
  assert.ok((await t.nth(2)).message.includes(early.id))
})

test("a toast opencode did not take is not said to be shown", async () => {
  const t = toastCatcher(false)
  const h = hooks({ ...d.env, MCPX_PLUGIN_ELICIT: "notify" }, {}, { show: t.show })
  await bind(h, "ses_nottaken")
  const q = await human("ses_nottaken")
  await t.nth(1)
  assert.equal(h.announcer.shownAt(q.id), undefined)
})

test("under `opencode run` nobody sees a toast: none is shown", async () => {
  const t = toastCatcher()
  const h = hooks({ ...d.env, MCPX_PLUGIN_ELICIT: "notify" }, {}, { show: t.show, argv: ["bun", "/$bunfs/root/opencode", "run", "do it"] })
  await bind(h, "ses_run")
  const q = await human("ses_run")
  await handled(h, q.id)
  assert.equal(t.toasts.length, 0)
  assert.equal(h.announcer.shownAt(q.id), undefined)
})

test("where mcpx's own dialog shows the person's questions, no toast stands in for it", async () => {
  // the TUI part runs in this very process: it said so over the link
  const t = toastCatcher()
  const here = hooks({ ...d.env, MCPX_PLUGIN_ELICIT: "ask" }, {}, { show: t.show, tui: { present: true, open: () => {} } })
  await bind(here, "ses_tui_here")
  const q = await human("ses_tui_here")
  await handled(here, q.id)
  assert.equal(t.toasts.length, 0)
  // a TUI attached from another process: once it showed a question of the session in its dialog (its elicit.shown
  // says so), the session's next questions are left to it too
  const u = toastCatcher()
  const attached = hooks({ ...d.env, MCPX_PLUGIN_ELICIT: "ask" }, {}, { show: u.show })
  await bind(attached, "ses_tui_there")
  const first = await human("ses_tui_there")
  await u.nth(1) // the first: nothing says yet that a dialog shows this session's questions
  await d.client.request("POST", `/v1/elicit/${first.id}/shown`, { body: { where: "opencode", how: "dialog" } })
  await eventually(() => attached.announcer.shownIn(first.id) === "dialog", "the dialog's record heard")
  assert.ok(attached.announcer.shownAt(first.id) instanceof Date)
  const next = await human("ses_tui_there", "Really delete branch dev?")
  await handled(attached, next.id)
  assert.equal(u.toasts.length, 1, "no toast for the next: the attached TUI's dialog shows it")
})

test("a toasted question that ends is replaced by a toast of its end: none claims it still waits", async () => {
  const t = toastCatcher()
  const h = hooks({ ...d.env, MCPX_PLUGIN_ELICIT: "notify" }, {}, { show: t.show })
  await bind(h, "ses_withdraw")
  const q = await human("ses_withdraw")
  await t.nth(1)
  await d.client.request("POST", `/v1/elicit/${q.id}/accept`, { body: { content: { confirm: true } },
    headers: { "X-Mcpx-Answerer": "person:cli" } })
  const end = await t.nth(2)
  assert.equal(end.title, "mcpx")
  assert.equal(end.message, `${q.id} was answered (accept by person:cli); it no longer waits.`)
  assert.ok(end.duration < 10000, "and it goes soon")
})

test("under `opencode run` the person at its terminal gets one line per question of theirs, on stderr", async () => {
  const lines = []
  const h = hooks({ ...d.env, MCPX_PLUGIN_ELICIT: "notify" }, {},
    { argv: ["bun", "/$bunfs/root/opencode", "run", "do it"], print: (line) => lines.push(line) })
  await bind(h, "ses_run_line")
  const q = await human("ses_run_line")
  await handled(h, q.id)
  await d.ask({ session: "ses_run_line", server: "s", message: "Pick a colour", requestedSchema: SCHEMAS.color }) // the agent's
  await h.announcer.catchUp?.("ses_run_line")
  assert.equal(lines.length, 1, lines.join("\n"))
  assert.equal(lines[0], (await d.client.question(q.id)).body.elicitation.render.line)
  assert.match(lines[0], new RegExp(`^mcpx: git \\(via mcpx\\) asks you: “Really delete branch main\\?” — answer by \\d\\d:\\d\\d \\(${q.id}\\) from a terminal: mcpx elicit answer ${q.id}`))
  assert.equal(h.announcer.shownAt(q.id), undefined, "a line on a terminal is no proof anyone saw it")
})

test("a question is toasted once however many paths announce it at once, and one whose toast failed is not counted", async () => {
  const t = toastCatcher()
  const h = hooks({ ...d.env, MCPX_PLUGIN_ELICIT: "notify" }, {}, { show: t.show })
  await bind(h, "ses_once")
  const q = await human("ses_once")
  await handled(h, q.id)
  // the session's catch-up and the stream's elicit.open, together
  await Promise.all([h.announcer.announce(q.id, "ses_once"), h.announcer.announce(q.id, "ses_once")])
  assert.equal(t.toasts.filter((x) => x.message.includes(q.id)).length, 1)
  // opencode's client failed while toasting: the question is let go of, not left counted
  let failing = true
  const u = toastCatcher()
  const g = hooks({ ...d.env, MCPX_PLUGIN_ELICIT: "notify" }, {}, {
    show: async (toast) => {
      if (failing) throw new Error("opencode did not answer")
      return u.show(toast)
    },
  })
  await bind(g, "ses_fail")
  const lost = await human("ses_fail")
  await handled(g, lost.id)
  failing = false
  const next = await human("ses_fail", "Really delete branch dev?")
  const toast = await u.nth(1)
  assert.ok(toast.message.includes(next.id))
  assert.equal(toast.title, "● 1 question for you", "the one whose toast failed is not counted as shown here")
})

test("the event stream is taken up again with Last-Event-ID: what opened meanwhile is not missed, nor seen twice", async () => {
  const follower = new EventFollower(new Daemon(d.env), { minBackoffMs: 400 })
  const seen = []
  follower.on((e) => seen.push(e))
  try {
    await eventually(() => follower.state.connected, "connected")
    const first = await human("ses_follow")
    await eventually(() => seen.some((e) => e.elicit === first.id && e.kind === "elicit.open"), "the first question's open")
    follower["req"].destroy() // the connection drops
    await eventually(() => !follower.state.connected, "disconnected")
    const second = await human("ses_follow", "While nobody listened?")
    await eventually(() => seen.some((e) => e.elicit === second.id && e.kind === "elicit.open"), "the second question's open, replayed")
    assert.equal(follower.state.connects, 2)
    assert.equal(seen.filter((e) => e.elicit === first.id && e.kind === "elicit.open").length, 1)
    const seqs = seen.map((e) => e.seq)
    assert.deepEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b), "each record once, in order")
  } finally {
    follower.stop()
  }
})

test("a stream ends with its response, not with its request (Bun closes the request once the headers are in)", async () => {
  const ends = []
  let text = ""
  const req = new Daemon(d.env).stream("/v1/events?kinds=elicit", {}, { response: () => {}, data: (t) => { text += t }, end: (why) => ends.push(why) }, 45000)
  try {
    await eventually(() => text.includes("id:"), "the stream's opening frame")
    const q = await human("ses_stream", "Still streaming?")
    await eventually(() => text.includes(q.id), "the question's frame")
    assert.deepEqual(ends, [], "the stream was said to have ended while it still delivered")
  } finally {
    req.destroy()
  }
  await eventually(() => ends.length === 1, "its end, once closed")
})

test("the follower keeps the one stream the daemon keeps open: no other opens beside it, each record comes once", async () => {
  const follower = new EventFollower(new Daemon(d.env), { minBackoffMs: 1 })
  const seen = []
  follower.on((e) => seen.push(e))
  try {
    await eventually(() => follower.state.connected, "connected")
    for (const n of [1, 2, 3]) {
      const q = await human("ses_one_stream", `Question ${n}?`)
      await eventually(() => seen.some((e) => e.elicit === q.id && e.kind === "elicit.open"), `question ${n}'s open`)
    }
    assert.equal(follower.state.connects, 1, `opened ${follower.state.connects} times (${follower.state.lastError})`)
    const seqs = seen.map((e) => e.seq)
    assert.deepEqual(seqs, [...new Set(seqs)], "each record once")
  } finally {
    follower.stop()
  }
})

test("with no daemon the follower keeps trying, bounded, and never keeps the process alive", async () => {
  const follower = new EventFollower(new Daemon({ MCPX_HOME: "/nonexistent/mcpx-home" }), { minBackoffMs: 10, maxBackoffMs: 40 })
  follower.on(() => {})
  try {
    await eventually(() => follower.state.lastError !== "", "a failed attempt")
    assert.equal(follower.state.connected, false)
    assert.ok(follower["backoffMs"] <= 40)
  } finally {
    follower.stop()
  }
})
