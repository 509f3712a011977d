// A question's own dialog in opencode's TUI, drawn from the daemon's render.form: who asks, the server's words
// (quoted: data, never markup), why it is the person's, the deadline counting down, the fields, and Accept /
// Decline / Cancel. The keys and what the fields hold are lib/tui/dialog_keys.ts's; what an answer does is lib/tui/queue.ts's.
//
// opentui and solid come from opencode itself (a TUI plugin imports the host's copies).

import { useKeyboard, usePaste } from "@opentui/solid"
import { For, Show, createSignal, onCleanup } from "solid-js"

import type { TuiPluginApi } from "@opencode-ai/plugin/tui"

import type { FormField } from "../shared/daemon.js"
import type { OpenQuestion } from "./queue.js"
import { FormState, isText, type Action, type Key } from "./dialog_keys.js"

type Theme = TuiPluginApi["theme"]["current"]

/** Keys for the dialog's actions are taken only after this long: an Enter meant for the prompt, pressed as the
 * dialog appears, must not answer for the person. Typing into a field is taken at once. */
export const ARMED_AFTER_MS = 350

/** Time left, as a person reads it: 1h 02m, 4m 05s, 12s. */
export function left(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000))
  if (s >= 3600) return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`
  if (s >= 60) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`
  return `${s}s`
}

/** A text field's line: the text (masked for a secret) with the cursor where it is when focused. */
function shownText(state: FormState, f: FormField, focused: boolean): string {
  const line = state.lines.get(f.name)!
  const chars = f.kind === "secret" ? line.chars.map(() => "•") : line.chars
  if (!focused) return chars.join("")
  return chars.slice(0, line.cursor).join("") + "▏" + chars.slice(line.cursor).join("")
}

function Field(props: { state: FormState; index: number; tick: () => number; theme: () => Theme }) {
  const f = props.state.fields[props.index]!
  const focused = () => (props.tick(), props.state.focused({ kind: "field", index: props.index }))
  const problem = () => (props.tick(), props.state.problems[f.name])
  const options = () => (f.kind === "boolean" ? [{ token: "true", label: "yes" }, { token: "false", label: "no" }] : f.options ?? [])
  const mark = (token: string, i: number) => {
    props.tick()
    if (f.kind === "choices") {
      const cursor = focused() && props.state.cursorAt.get(f.name) === i ? "›" : " "
      return `${cursor}[${props.state.ticked.get(f.name)!.has(token) ? "x" : " "}] `
    }
    return props.state.picked.get(f.name) === token ? "(•) " : "( ) "
  }
  return (
    <box flexDirection="column" paddingTop={1}>
      <text fg={focused() ? props.theme().primary : props.theme().text} wrapMode="word">
        {(focused() ? "› " : "  ") + f.label + (f.required ? " *" : "")}
        <span style={{ fg: props.theme().textMuted }}>{"  " + f.hint}</span>
      </text>
      <Show when={f.description}>
        <text fg={props.theme().textMuted} wrapMode="word">{"  " + f.description}</text>
      </Show>
      <Show when={isText(f)} fallback={
        <box flexDirection="row" flexWrap="wrap" paddingLeft={2} columnGap={2}>
          <For each={options()}>{(o, i) => (
            <text fg={focused() && (f.kind !== "choices" || props.state.cursorAt.get(f.name) === i()) ? props.theme().primary : props.theme().text}>
              {mark(o.token, i()) + o.label}
            </text>
          )}</For>
        </box>
      }>
        <box paddingLeft={2} flexDirection="row">
          <text fg={props.theme().text} bg={props.theme().backgroundElement} width="100%">
            {(() => {
              props.tick()
              const text = shownText(props.state, f, focused())
              return text || (focused() ? "▏" : f.placeholder ?? " ") // an empty line still takes its row
            })()}
          </text>
        </box>
      </Show>
      <Show when={problem()}>
        <text fg={props.theme().error} wrapMode="word">{"  ✗ " + problem()}</text>
      </Show>
    </box>
  )
}

function Button(props: { label: string; on: () => boolean; armed: () => boolean; theme: () => Theme }) {
  const lit = () => props.on() && props.armed()
  return (
    <box paddingLeft={1} paddingRight={1} backgroundColor={lit() ? props.theme().primary : undefined}>
      <text fg={lit() ? props.theme().selectedListItemText : props.armed() ? props.theme().text : props.theme().textMuted}>
        {props.label}
      </text>
    </box>
  )
}

export function QuestionDialog(props: { open: OpenQuestion; api: TuiPluginApi }) {
  const q = props.open.question
  const form = q.render.form
  const state = new FormState(form)
  const theme = () => props.api.theme.current
  const [tick, setTick] = createSignal(0)
  const bump = () => setTick((n) => n + 1)
  const [now, setNow] = createSignal(Date.now())
  const [status, setStatus] = createSignal("")
  const [busy, setBusy] = createSignal(false)
  // the actions answer only once armed; until then they are drawn muted and the line of keys is not shown
  const [armed, setArmed] = createSignal(false)
  const arming = setTimeout(() => setArmed(true), ARMED_AFTER_MS)
  const clock = setInterval(() => setNow(Date.now()), 1000)
  onCleanup(() => {
    clearInterval(clock)
    clearTimeout(arming)
  })
  const expires = Date.parse(form.expiresAt)
  // a question only the person's passkey accepts: its page, as the daemon hands it to the person's side
  const [passkeyLine, setPasskeyLine] = createSignal(form.passkey ? "Passkey page: …" : "")
  if (form.passkey) void props.open.passkeyPage().then((page) => setPasskeyLine(page.line))

  const act = async (action: Action) => {
    if (action.type === "open") {
      setStatus("Opening the page…")
      setStatus(await props.open.openPage())
      return
    }
    if (action.type === "passkey") {
      setStatus("Opening the passkey page…")
      setStatus(await props.open.openPasskeyPage())
      return
    }
    setBusy(true)
    setStatus("")
    try {
      const body = action.type === "accept" ? { form: action.entries } : action.type === "decline" ? { reason: action.reason } : {}
      const outcome = await props.open.answer(action.type, body)
      if (outcome.kind === "refused") state.refused(outcome.problems, outcome.message)
      else if (outcome.kind === "failed") state.problem = outcome.message
      bump()
    } finally {
      setBusy(false)
    }
  }

  useKeyboard((evt) => {
    if (evt.name === "escape" || (evt.ctrl && evt.name === "c")) return // opencode's: the dialog closes, nothing is answered
    evt.preventDefault()
    evt.stopPropagation()
    if (busy()) return
    const stop = state.focus
    const acting = (stop.kind !== "field" && stop.kind !== "reason") || ["return", "enter"].includes(evt.name)
    if (acting && !armed()) return
    const action = state.key(evt as Key)
    bump()
    if (action) void act(action)
  })
  usePaste((evt) => {
    evt.preventDefault()
    const text = (evt as { text?: unknown }).text
    state.paste(typeof text === "string" ? text : new TextDecoder().decode(evt.bytes))
    bump()
  })

  const on = (kind: "open" | "passkey" | "accept" | "decline" | "cancel" | "reason") => () => (tick(), state.focused({ kind }))
  return (
    <box paddingLeft={2} paddingRight={2} paddingBottom={1} flexDirection="column">
      <box flexDirection="row" justifyContent="space-between">
        <text fg={theme().text}><b>{form.title}</b></text>
        <text fg={theme().textMuted}>esc: answer later</text>
      </box>
      <text fg={theme().textMuted}>{form.asker}</text>
      <box flexDirection="column" paddingTop={1}>
        <For each={form.message}>{(line, i) => (
          <text fg={theme().text} wrapMode="word">
            {(i() === 0 ? "“" : " ") + line + (i() === form.message.length - 1 ? "”" : "")}
          </text>
        )}</For>
      </box>
      <text fg={theme().textMuted} wrapMode="word" paddingTop={1}>{form.why}</text>
      <text fg={theme().warning}>{`Answer by ${form.clock} · ${left(expires - now())} left`}</text>
      <Show when={form.url}>
        <box flexDirection="column" paddingTop={1}>
          <text fg={theme().text} wrapMode="char">{"Page:   " + form.url!.url}</text>
          <text fg={theme().text}>{"Domain: " + form.url!.domain}</text>
          <Show when={form.url!.warning}>
            <text fg={theme().error} wrapMode="word">{"⚠ " + form.url!.warning}</text>
          </Show>
          <text fg={theme().textMuted} wrapMode="word">It opens in your browser only if you choose Open page.</text>
        </box>
      </Show>
      <Show when={form.passkey}>
        <box flexDirection="column" paddingTop={1}>
          <text fg={theme().warning} wrapMode="word">{form.passkey}</text>
          <text fg={theme().text} wrapMode="char">{passkeyLine()}</text>
        </box>
      </Show>
      <For each={form.fields}>{(_, i) => <Field state={state} index={i()} tick={tick} theme={theme} />}</For>
      <Show when={(tick(), state.problem)}>
        <text fg={theme().error} wrapMode="word" paddingTop={1}>{"✗ " + state.problem}</text>
      </Show>
      <text fg={theme().textMuted} wrapMode="word" paddingTop={1}>{form.acceptMeans}</text>
      <box flexDirection="row" justifyContent="flex-end" gap={2} paddingTop={1}>
        <Show when={form.url}><Button label="Open page" armed={armed} on={on("open")} theme={theme} /></Show>
        <Show when={form.passkey}><Button label="Open passkey page" armed={armed} on={on("passkey")} theme={theme} /></Show>
        <Button label="Accept" armed={armed} on={on("accept")} theme={theme} />
        <Button label="Decline" armed={armed} on={on("decline")} theme={theme} />
        <Button label="Cancel" armed={armed} on={on("cancel")} theme={theme} />
      </box>
      <Show when={(tick(), state.declining)}>
        <box flexDirection="column" paddingTop={1}>
          <text fg={on("reason")() ? theme().primary : theme().text}>Why not? (optional; Enter declines)</text>
          <text fg={theme().text} bg={theme().backgroundElement}>
            {(() => {
              tick()
              const r = state.reason
              return on("reason")() ? r.chars.slice(0, r.cursor).join("") + "▏" + r.chars.slice(r.cursor).join("") : r.text
            })()}
          </text>
        </box>
      </Show>
      <Show when={status()}>
        <text fg={theme().textMuted} wrapMode="word">{status()}</text>
      </Show>
      <text fg={theme().textMuted} paddingTop={1}>
        {armed() ? (form.fields.length ? "enter: next / accept · tab ↑↓: move · ←→ space: choose" : "enter: choose · ←→: move") : " "}
      </text>
    </box>
  )
}
