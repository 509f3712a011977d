// The two parts of the plugin in one opencode (lib/shared/tuilink.ts): the TUI part says it is there, the server part
// hears it (and leaves the person's questions to mcpx's dialog), and asks it to bring a question forward.

import assert from "node:assert/strict"
import { test } from "node:test"

import { TuiPresence, announcePresence } from "../dist/lib/shared/tuilink.js"
import { eventually } from "./helpers.mjs"


test("a TUI part that starts after the server part is heard; one that started first answers its ping", async () => {
  const server = new TuiPresence()
  assert.equal(server.present, false, "nobody there yet")
  const opened = []
  const stop = announcePresence((id) => opened.push(id))
  try {
    await eventually(() => server.present, "the TUI part heard")
    const late = new TuiPresence() // a server part started after the TUI part: its ping is answered
    await eventually(() => late.present, "the ping answered")
    server.open("elc-0123456789abcdef")
    await eventually(() => opened.length === 1, "the request to bring it forward")
    assert.deepEqual(opened, ["elc-0123456789abcdef"])
    late.close()
  } finally {
    stop()
    server.close()
  }
})

test("what is not the link's message is ignored, and without BroadcastChannel nothing is claimed", async () => {
  const opened = []
  const stop = announcePresence((id) => opened.push(id))
  const stranger = new BroadcastChannel("mcpx.opencode.tui")
  stranger.postMessage({ kind: "open" }) // no id
  stranger.postMessage("open elc-0123456789abcdef")
  stranger.postMessage({ kind: "open", id: "elc-fedcba9876543210" })
  await eventually(() => opened.length === 1, "the one well-formed request")
  assert.deepEqual(opened, ["elc-fedcba9876543210"])
  stranger.close()
  stop()
  const none = new TuiPresence(() => undefined)
  assert.equal(none.present, false)
  none.open("elc-0123456789abcdef") // no channel: nothing to send it on, and no error
  assert.doesNotThrow(announcePresence(() => {}, () => undefined))
})
