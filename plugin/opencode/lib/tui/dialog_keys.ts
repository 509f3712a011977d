// The state of one question's dialog: what each field holds, where the focus is, and what a key does. No
// drawing here (lib/tui/dialog.tsx draws it) and no rule about the question: the fields, their kinds, choices and
// defaults are the daemon's (render.form); what the person entered goes back as entries, which the daemon types
// and judges (a problem comes back per field and is shown beside it).
//
// Keys: typing fills the focused field; Enter moves to the next field, and from the last to Accept, where it
// accepts; Tab / Shift+Tab and Down / Up move between fields and actions; Left / Right pick a choice (a single
// choice, yes/no), move along a multi-select's options or between the actions, and move the cursor in a text;
// Space ticks a multi-select's option or flips a yes/no. Esc is opencode's: it closes the dialog, and nothing is
// answered. Decline first asks for a reason (optional): Enter there declines. Only Enter presses an action.

import type { DialogForm, FormField } from "../shared/daemon.js"

export type Key = { name: string; sequence?: string; ctrl?: boolean; meta?: boolean; shift?: boolean }
export type Stop = { kind: "field"; index: number } | { kind: "open" | "passkey" | "accept" | "decline" | "cancel" | "reason" }
export type Action =
  | { type: "accept"; entries?: Record<string, string | string[]> }
  | { type: "decline"; reason?: string }
  | { type: "cancel" }
  | { type: "open" }
  | { type: "passkey" } // open the page where the person's passkey accepts it

/** One text being edited: its characters and the cursor (an index into them). */
export class Line {
  chars: string[]
  cursor: number

  constructor(text = "") {
    this.chars = Array.from(text)
    this.cursor = this.chars.length
  }

  get text(): string {
    return this.chars.join("")
  }

  insert(text: string): void {
    // one line: a pasted newline or tab is a space; other control characters are dropped
    const clean = Array.from(text.replace(/\r\n|\r|\n|\t/g, " ")).filter((c) => c >= " " && c !== "\x7f")
    this.chars.splice(this.cursor, 0, ...clean)
    this.cursor += clean.length
  }

  /** A key that edits or moves within the text; false when it is not one. */
  key(k: Key): boolean {
    if (k.name === "backspace") {
      if (this.cursor > 0) this.chars.splice(--this.cursor, 1)
      return true
    }
    if (k.name === "delete") {
      this.chars.splice(this.cursor, 1)
      return true
    }
    if (k.name === "left") return (this.cursor = Math.max(0, this.cursor - 1)), true
    if (k.name === "right") return (this.cursor = Math.min(this.chars.length, this.cursor + 1)), true
    if (k.name === "home" || (k.ctrl && k.name === "a")) return (this.cursor = 0), true
    if (k.name === "end" || (k.ctrl && k.name === "e")) return (this.cursor = this.chars.length), true
    if (k.ctrl && k.name === "u") {
      this.chars.splice(0, this.cursor)
      this.cursor = 0
      return true
    }
    const typed = printable(k)
    if (typed) {
      this.insert(typed)
      return true
    }
    return false
  }
}

/** The character a key types, if it types one. */
export function printable(k: Key): string | undefined {
  if (k.ctrl || k.meta) return undefined
  if (k.name === "space") return " "
  const s = k.sequence ?? ""
  return Array.from(s).length === 1 && s >= " " && s !== "\x7f" ? s : undefined
}

const TEXT_KINDS = new Set(["text", "number", "integer", "secret"])

export function isText(field: FormField): boolean {
  return TEXT_KINDS.has(field.kind)
}

export class FormState {
  readonly fields: FormField[]
  readonly lines = new Map<string, Line>() // text, number, integer, secret
  readonly picked = new Map<string, string>() // choice and boolean: a token, or "true"/"false"; absent: none
  readonly ticked = new Map<string, Set<string>>() // choices: the tokens ticked
  readonly cursorAt = new Map<string, number>() // choices: the option under the cursor
  problems: Record<string, string> = {}
  problem = "" // one that is no field's (the daemon's message, a failure to reach it)
  declining = false
  readonly reason = new Line()
  private at = 0

  constructor(readonly form: DialogForm) {
    this.fields = form.fields
    for (const f of this.fields) {
      if (isText(f)) this.lines.set(f.name, new Line(typeof f.value === "string" ? f.value : ""))
      else if (f.kind === "choices") {
        this.ticked.set(f.name, new Set(Array.isArray(f.value) ? f.value : []))
        this.cursorAt.set(f.name, 0)
      } else if (typeof f.value === "string") this.picked.set(f.name, f.value)
    }
    // a confirmation (a lone yes/no, or no fields) and a page to open start on their action; a form on its field
    const first = form.url ? "open" : form.passkey ? "passkey" : "accept"
    this.at = this.fields.length ? 0 : this.stops().findIndex((s) => s.kind === first)
  }

  /** Where the focus can be, in order: the fields, then the actions (the reason only while declining). */
  stops(): Stop[] {
    const out: Stop[] = this.fields.map((_, index) => ({ kind: "field" as const, index }))
    if (this.form.url) out.push({ kind: "open" })
    if (this.form.passkey) out.push({ kind: "passkey" })
    out.push({ kind: "accept" }, { kind: "decline" })
    if (this.declining) out.push({ kind: "reason" })
    out.push({ kind: "cancel" })
    return out
  }

  get focus(): Stop {
    return this.stops()[this.at]!
  }

  focused(stop: Stop): boolean {
    const f = this.focus
    return f.kind === stop.kind && (f.kind !== "field" || (stop.kind === "field" && f.index === stop.index))
  }

  private move(by: number): void {
    const n = this.stops().length
    this.at = (this.at + by + n) % n
  }

  private focusOn(kind: Stop["kind"], index = 0): void {
    const i = this.stops().findIndex((s) => s.kind === kind && (s.kind !== "field" || s.index === index))
    if (i >= 0) this.at = i
  }

  /** What the person entered, per field, as the daemon takes it (render.form's entries). */
  entries(): Record<string, string | string[]> {
    const out: Record<string, string | string[]> = {}
    for (const f of this.fields) {
      if (isText(f)) {
        const text = this.lines.get(f.name)!.text
        if (text !== "") out[f.name] = text
      } else if (f.kind === "choices") {
        // in the options' order, whatever order they were ticked in
        const ticked = this.ticked.get(f.name)!
        out[f.name] = (f.options ?? []).map((o) => o.token).filter((t) => ticked.has(t))
      } else if (this.picked.has(f.name)) out[f.name] = this.picked.get(f.name)!
    }
    return out
  }

  /** The daemon's verdict on an answer that did not fit: shown beside each field, the focus on the first. */
  refused(problems: Record<string, string>, message = ""): void {
    this.problems = { ...problems }
    const names = new Set(this.fields.map((f) => f.name))
    const others = Object.entries(problems).filter(([k]) => !names.has(k)).map(([k, v]) => `${k}: ${v}`)
    this.problem = others.length ? others.join("; ") : Object.keys(problems).length ? "" : message
    this.declining = false
    const first = this.fields.findIndex((f) => f.name in problems)
    if (first >= 0) this.focusOn("field", first)
  }

  /** A key pressed while the dialog is open: an action to take, or nothing (the state changed, or the key is not
   * the dialog's). */
  key(k: Key): Action | undefined {
    const stop = this.focus
    if (k.name === "tab") return this.move(k.shift ? -1 : 1), undefined
    if (k.name === "down") return this.move(1), undefined
    if (k.name === "up") return this.move(-1), undefined
    if (stop.kind === "reason") {
      if (k.name === "return" || k.name === "enter") return { type: "decline", reason: this.reason.text.trim() || undefined }
      this.reason.key(k)
      return undefined
    }
    if (stop.kind === "field") return this.fieldKey(this.fields[stop.index]!, k)
    // on an action
    if (k.name === "left" || k.name === "right") {
      const actions = this.stops().map((s, i) => [s, i] as const).filter(([s]) => s.kind !== "field" && s.kind !== "reason")
      const here = actions.findIndex(([, i]) => i === this.at)
      const next = actions[Math.min(actions.length - 1, Math.max(0, here + (k.name === "left" ? -1 : 1)))]
      if (next) this.at = next[1]
      return undefined
    }
    // only Enter presses: a space typed for the prompt as the dialog appears must not answer
    if (k.name === "return" || k.name === "enter") return this.press(stop.kind)
    return undefined
  }

  private press(kind: Stop["kind"]): Action | undefined {
    if (kind === "open") return { type: "open" }
    if (kind === "passkey") return { type: "passkey" }
    if (kind === "cancel") return { type: "cancel" }
    if (kind === "decline") {
      this.declining = true
      this.focusOn("reason")
      return undefined
    }
    if (kind === "accept") {
      if (this.form.url) return { type: "accept" }
      return this.form.confirm ? { type: "accept" } : { type: "accept", entries: this.entries() }
    }
    return undefined
  }

  private fieldKey(f: FormField, k: Key): Action | undefined {
    const enter = k.name === "return" || k.name === "enter"
    if (enter) {
      // Enter moves on, and from the last field to Accept
      if (this.at === this.fields.length - 1) this.focusOn("accept") // the fields are the first stops
      else this.move(1)
      return undefined
    }
    if (isText(f)) {
      this.lines.get(f.name)!.key(k)
      delete this.problems[f.name]
      return undefined
    }
    const options = f.kind === "boolean" ? ["true", "false"] : (f.options ?? []).map((o) => o.token)
    if (f.kind === "choices") {
      const at = this.cursorAt.get(f.name)!
      if (k.name === "left" || k.name === "right") {
        this.cursorAt.set(f.name, Math.min(options.length - 1, Math.max(0, at + (k.name === "left" ? -1 : 1))))
      } else if (k.name === "space" || k.sequence === " " || k.sequence === "x") {
        const ticked = this.ticked.get(f.name)!
        const token = options[at]
        if (token !== undefined) ticked.has(token) ? ticked.delete(token) : ticked.add(token)
        delete this.problems[f.name]
      }
      return undefined
    }
    // one choice, or yes/no: Left / Right pick the neighbour (from none, the first), Space flips a yes/no
    const now = this.picked.has(f.name) ? options.indexOf(this.picked.get(f.name)!) : -1
    let next = now
    if (k.name === "left") next = now < 0 ? 0 : Math.max(0, now - 1)
    else if (k.name === "right") next = now < 0 ? 0 : Math.min(options.length - 1, now + 1)
    else if (k.name === "space" || k.sequence === " ") next = f.kind === "boolean" ? (now === 0 ? 1 : 0) : Math.max(0, now)
    else if (f.kind === "boolean" && (k.sequence === "y" || k.sequence === "n")) next = k.sequence === "y" ? 0 : 1
    if (next !== now && options[next] !== undefined) {
      this.picked.set(f.name, options[next]!)
      delete this.problems[f.name]
    }
    return undefined
  }

  /** A paste goes to the focused text (or the reason). */
  paste(text: string): void {
    const stop = this.focus
    if (stop.kind === "reason") this.reason.insert(text)
    else if (stop.kind === "field") {
      const f = this.fields[stop.index]!
      if (isText(f)) {
        this.lines.get(f.name)!.insert(text)
        delete this.problems[f.name]
      }
    }
  }
}
