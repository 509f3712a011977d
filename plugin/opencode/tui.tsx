// mcpx in opencode's TUI: wiring only. The person's questions open in mcpx's own dialog the moment they open
// (lib/tui/queue.ts decides which and when; lib/tui/dialog.tsx draws one; lib/tui/dialog_keys.ts holds what the person enters), a
// badge counts the ones waiting, and a command brings the next one back. Loaded through tui.json (opencode's TUI
// plugins); the server plugin (index.ts) keeps what happens where no TUI runs. docs/opencode.md is the design.

import type { TuiPlugin, TuiPluginApi, TuiPluginModule } from "@opencode-ai/plugin/tui"
import { createSignal } from "solid-js"

import { openInBrowser } from "./lib/tui/browser.js"
import { Daemon } from "./lib/shared/daemon.js"
import { QuestionQueue, type Screen } from "./lib/tui/queue.js"
import { QuestionDialog } from "./lib/tui/dialog.js"
import { follow } from "./lib/shared/events.js"
import { LevelSource } from "./lib/shared/level.js"
import { sessionOf } from "./lib/shared/session.js"
import { announcePresence } from "./lib/shared/tuilink.js"

/** The command that brings the next question back, and its key (opencode's leader is ctrl+x by default). */
const COMMAND = "mcpx.questions.next"
const KEY = "<leader>i"

/** The events that name a session this opencode works in (any of them binds it). */
const SESSION_EVENTS = ["session.created", "session.updated", "session.status", "session.idle", "message.updated",
  "message.part.updated", "permission.asked", "question.asked"] as const

function screenOf(api: TuiPluginApi, setCount: (n: number) => void): Screen {
  let mine = false // our dialog is the one open
  let generation = 0
  // Taking our dialog down waits a moment: when the next question follows at once, its dialog replaces this one
  // instead. opencode's clear() gives the focus back to the prompt a moment later, and a dialog opened in that
  // moment would have the prompt take its keys.
  let clearing: ReturnType<typeof setTimeout> | undefined
  const CLEAR_AFTER_MS = 150
  return {
    busy: () => api.ui.dialog.open && !mine,
    show(open, closed) {
      if (clearing) clearTimeout(clearing)
      clearing = undefined
      const gen = ++generation
      mine = true
      // replace() fires the onClose of whatever was open, ours included: each dialog answers only for itself
      api.ui.dialog.replace(() => <QuestionDialog open={open} api={api} />, () => {
        if (gen !== generation) return // replaced by our next one, or taken down by hide()
        mine = false
        closed()
      })
      const f = open.question.render.form
      if (f.fields.length || f.url || f.passkey) api.ui.dialog.setSize("large")
    },
    hide() {
      const gen = ++generation // the dialog answers for nothing from now on
      if (!mine || clearing) return
      clearing = setTimeout(() => {
        clearing = undefined
        if (gen !== generation || !mine) return // the next question's dialog took its place
        mine = false
        api.ui.dialog.clear()
      }, CLEAR_AFTER_MS)
    },
    toast: (t) => api.ui.toast(t),
    badge: setCount,
    openUrl: (url) => openInBrowser(url),
  }
}

const tui: TuiPlugin = async (api, options) => {
  const opts = (options ?? {}) as { entry?: unknown }
  const entry = typeof opts.entry === "string" && opts.entry ? opts.entry : "mcpx"
  const daemon = new Daemon(process.env)
  const level = new LevelSource(daemon, process.env, undefined, "ask")
  const [count, setCount] = createSignal(0)
  const desk = new QuestionQueue(daemon, `${entry}_`, screenOf(api, setCount), {
    level: async () => (await level.get()).level,
    command: "ctrl+x i",
  })

  const follower = follow(daemon)
  const stops = [follower.on((event) => desk.onEvent(event)), follower.onConnect(() => desk.resync()),
    announcePresence((id) => desk.bring(id))] // the server part leaves the person's questions to this dialog
  for (const type of SESSION_EVENTS) stops.push(api.event.on(type, (event) => desk.bind(sessionOf(event as any))))

  const badge = () => <text fg={api.theme.current.warning}>{count() ? `● ${count()} question${count() === 1 ? "" : "s"}` : ""}</text>
  api.slots.register({
    order: 40,
    slots: {
      home_prompt_right: badge,
      session_prompt_right: (_ctx: unknown, props: { session_id?: string }) => {
        desk.bind(props?.session_id) // the session on screen is this opencode's
        return badge()
      },
    },
  } as any)
  const layer = api.keymap.registerLayer({
    commands: [{ name: COMMAND, title: "mcpx: answer the next question", category: "mcpx", run: () => desk.next() }],
    bindings: [{ key: KEY, cmd: COMMAND }],
  } as any)
  api.lifecycle.onDispose(() => {
    for (const stop of stops) stop()
    if (typeof layer === "function") layer()
  })
}

const plugin: TuiPluginModule & { id: string } = { id: "mcpx", tui }
export default plugin
