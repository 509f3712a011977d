// The dialog's state (lib/tui/dialog_keys.ts), key by key, on forms as the daemon renders them (render.form): where the focus
// starts, what typing, Enter, Tab, the arrows and Space do, and what goes back to the daemon.

import assert from "node:assert/strict"
import { test } from "node:test"

import { FormState, Line, printable } from "../dist/lib/tui/dialog_keys.js"

const k = (name, extra = {}) => ({ name, ...extra })
const ch = (c) => ({ name: c === " " ? "space" : c.length === 1 ? c.toLowerCase() : c, sequence: c })
function type(state, text) {
  for (const c of text) state.key(ch(c))
}

const head = { title: "sdk (via mcpx) asks", asker: "sdk · file_issue, via mcpx", message: ["Describe the issue"],
  why: "It is yours to answer.", expiresAt: "2030-01-01T14:02:00Z", clock: "14:02", toast: "sdk asks: …",
  acceptMeans: "Accept sends what the form holds." }
const ISSUE = { ...head, fields: [
  { name: "title", label: "Title", kind: "text", required: true, hint: "string; required" },
  { name: "count", label: "count", kind: "integer", required: true, hint: "integer", value: "2" },
  { name: "color", label: "color", kind: "choice", required: false, hint: "one of", value: "red",
    options: [{ token: "red", label: "Red" }, { token: "green", label: "Green" }, { token: "blue", label: "Blue" }] },
  { name: "notify", label: "notify", kind: "boolean", required: false, hint: "boolean" },
  { name: "tags", label: "tags", kind: "choices", required: false, hint: "any of", value: ["b"],
    options: [{ token: "a", label: "A" }, { token: "b", label: "B" }, { token: "c", label: "C" }] },
  { name: "api_key", label: "api_key", kind: "secret", required: false, hint: "string" },
] }
const CONFIRM = { ...head, fields: [], confirm: { confirm: true }, acceptMeans: "Accept answers yes." }
const URL = { ...head, fields: [], url: { url: "https://example.com/login", domain: "example.com" } }

test("a lone yes/no opens on Accept: Enter accepts with the daemon's content, and only Enter presses", () => {
  const s = new FormState(CONFIRM)
  assert.deepEqual(s.focus, { kind: "accept" })
  assert.equal(s.key(ch(" ")), undefined, "a space typed for the prompt as the dialog opens answers nothing")
  assert.equal(s.key(ch("y")), undefined)
  assert.deepEqual(s.key(k("return")), { type: "accept" })
  const right = new FormState(CONFIRM)
  right.key(k("right"))
  assert.deepEqual(right.focus, { kind: "decline" })
  right.key(k("right"))
  assert.deepEqual(right.focus, { kind: "cancel" })
  right.key(k("right"))
  assert.deepEqual(right.focus, { kind: "cancel" }, "the last action stays: Right does not wrap")
  assert.deepEqual(right.key(k("return")), { type: "cancel" })
})

test("a page to open starts on Open page; Accept sends nothing of a form", () => {
  const s = new FormState(URL)
  assert.deepEqual(s.stops().map((x) => x.kind), ["open", "accept", "decline", "cancel"])
  assert.deepEqual(s.focus, { kind: "open" })
  assert.deepEqual(s.key(k("return")), { type: "open" })
  s.key(k("tab"))
  assert.deepEqual(s.key(k("return")), { type: "accept" })
})

test("a question only a passkey accepts starts on Open passkey page; Accept is still offered (the daemon refuses it)", () => {
  const s = new FormState({ ...CONFIRM, passkey: "Accepting it needs your passkey, on its page." })
  assert.deepEqual(s.stops().map((x) => x.kind), ["passkey", "accept", "decline", "cancel"])
  assert.deepEqual(s.focus, { kind: "passkey" })
  assert.deepEqual(s.key(k("return")), { type: "passkey" })
  s.key(k("right"))
  assert.deepEqual(s.key(k("return")), { type: "accept" })
})

test("a form opens on its first field: typing fills it, Enter moves on and from the last field to Accept", () => {
  const s = new FormState(ISSUE)
  assert.deepEqual(s.focus, { kind: "field", index: 0 })
  type(s, "Broken build")
  assert.equal(s.key(k("return")), undefined)
  assert.deepEqual(s.focus, { kind: "field", index: 1 })
  s.key(k("backspace"))
  type(s, "7")
  for (let i = 0; i < 4; i++) s.key(k("return")) // color, notify, tags, api_key
  assert.deepEqual(s.focus, { kind: "field", index: 5 })
  type(s, "s3cr3t")
  s.key(k("return"))
  assert.deepEqual(s.focus, { kind: "accept" })
  assert.deepEqual(s.key(k("return")), { type: "accept", entries: {
    title: "Broken build", count: "7", color: "red", tags: ["b"], api_key: "s3cr3t" } }, "notify, never set, is not sent")
})

test("Tab, Shift+Tab, Down and Up go round the fields and the actions", () => {
  const s = new FormState(ISSUE)
  const kinds = () => (s.focus.kind === "field" ? `f${s.focus.index}` : s.focus.kind)
  const seen = []
  for (let i = 0; i < 10; i++) {
    seen.push(kinds())
    s.key(k("tab"))
  }
  assert.deepEqual(seen, ["f0", "f1", "f2", "f3", "f4", "f5", "accept", "decline", "cancel", "f0"])
  s.key(k("tab", { shift: true }))
  assert.equal(kinds(), "f0")
  s.key(k("up"))
  assert.equal(kinds(), "cancel")
  s.key(k("down"))
  assert.equal(kinds(), "f0")
})

test("choices: Left and Right pick one; a multi-select moves its cursor and Space ticks; y and n answer a yes/no", () => {
  const s = new FormState(ISSUE)
  s.key(k("tab"))
  s.key(k("tab")) // color
  s.key(k("right"))
  s.key(k("right"))
  s.key(k("right"))
  assert.equal(s.entries().color, "blue", "Right stops at the last")
  s.key(k("left"))
  assert.equal(s.entries().color, "green")
  s.key(k("tab")) // notify: unset until the person says
  assert.equal("notify" in s.entries(), false)
  s.key(ch("y"))
  assert.equal(s.entries().notify, "true")
  s.key(ch(" "))
  assert.equal(s.entries().notify, "false")
  s.key(ch("n"))
  assert.equal(s.entries().notify, "false")
  s.key(k("tab")) // tags: b ticked by default, the cursor on the first option
  s.key(k("right"))
  s.key(ch(" "))
  assert.deepEqual(s.entries().tags, [], "unticking every box is an answer too")
  s.key(k("right"))
  s.key(ch(" "))
  s.key(k("left"))
  s.key(k("left"))
  s.key(k("left"))
  s.key(ch("x"))
  assert.deepEqual(s.entries().tags, ["a", "c"], "in the options' order, whatever order they were ticked in")
})

test("Decline asks for a reason first, optional: Enter there declines with it", () => {
  const s = new FormState(ISSUE)
  for (let i = 0; i < 7; i++) s.key(k("tab"))
  assert.deepEqual(s.focus, { kind: "decline" })
  assert.equal(s.key(k("return")), undefined)
  assert.equal(s.declining, true)
  assert.deepEqual(s.focus, { kind: "reason" })
  type(s, "not main, use staging")
  assert.deepEqual(s.key(k("return")), { type: "decline", reason: "not main, use staging" })
  const quiet = new FormState(CONFIRM)
  quiet.key(k("right"))
  quiet.key(k("return"))
  assert.deepEqual(quiet.key(k("return")), { type: "decline", reason: undefined }, "no reason is a decline too")
})

test("the daemon's verdict is shown beside each field, the focus on the first; editing a field clears its own", () => {
  const s = new FormState(ISSUE)
  s.refused({ count: "must be at most 10", title: "must be at least 3 characters" })
  assert.deepEqual(s.focus, { kind: "field", index: 0 })
  assert.equal(s.problems.count, "must be at most 10")
  type(s, "x")
  assert.equal(s.problems.title, undefined)
  assert.equal(s.problems.count, "must be at most 10")
  s.refused({ content: "must be a JSON object" })
  assert.equal(s.problem, "content: must be a JSON object", "a problem that is no field's is shown under the form")
  s.refused({}, "mcpx did not take it: no daemon")
  assert.equal(s.problem, "mcpx did not take it: no daemon")
})

test("a line of text: the cursor moves, keys edit where it is, a paste is one line without control characters", () => {
  const line = new Line("abc")
  line.key(k("left"))
  line.key(ch("X"))
  assert.equal(line.text, "abXc")
  line.key(k("home"))
  line.key(k("delete"))
  assert.equal(line.text, "bXc")
  line.key(k("end"))
  line.key(k("backspace"))
  assert.equal(line.text, "bX")
  line.key(k("u", { ctrl: true }))
  assert.equal(line.text, "")
  line.insert("one\ntwo\tthree\x1b[31m\x07")
  assert.equal(line.text, "one two three[31m")
  assert.equal(printable(k("c", { ctrl: true, sequence: "\x03" })), undefined)
  assert.equal(printable({ name: "é", sequence: "é" }), "é")
  const s = new FormState(ISSUE)
  s.paste("pasted\r\ntitle")
  assert.equal(s.entries().title, "pasted title")
})
