// Which opencode dialog a question for the person gets, and the built-in `question` tool call for
// choices and free text (with the way back from the labels the person picked to field values).

import type { Question } from "./daemon.js"
import { plain, quoted } from "./text.js"
import { enumOptions, kindOf, multiOptions, properties, required, secretFields, typeMany, typeValue, type Prop } from "./schema.js"

export type DialogKind = "permission" | "question" | "terminal"

/** permission: a confirmation (a lone yes/no, or no fields) or a url-mode question; question: choices and free
 * text; terminal: credentials, which must not pass through opencode's dialogs and so the model's context. */
export function dialogFor(q: Question): DialogKind {
  if (q.mode === "url") return "permission"
  // the daemon says which fields are credentials; the local copy of its rule is for older daemons
  const secret = Array.isArray(q.secretFields) ? q.secretFields : secretFields(q.requestedSchema)
  if (secret.length) return "terminal"
  const props = Object.values(properties(q.requestedSchema))
  if (props.length === 0) return "permission"
  if (props.length === 1 && kindOf(props[0]!) === "boolean") return "permission"
  return "question"
}

export const ID_PATTERN = /elc-[0-9a-f]{16}/

export type Field = { name: string; prop: Prop; required: boolean }

export type QuestionPrompt = {
  question: string
  header: string
  options: { label: string; description: string }[]
  multiple?: boolean
}

const SKIP = "(leave empty)"

export function fieldsOf(q: Question): Field[] {
  const req = required(q.requestedSchema)
  return Object.entries(properties(q.requestedSchema)).map(([name, prop]) => ({ name, prop, required: req.includes(name) }))
}

function header(q: Question, field: string, many: boolean): string {
  // "max 30 chars" in opencode's schema; the id is what the plugin recognises the dialog by
  if (!many) return q.id
  return `${plain(field, 9)} ${q.id}`
}

/** The exact `question` call: one prompt per field, each carrying the question's id. */
export function questionPrompts(q: Question): QuestionPrompt[] {
  const fields = fieldsOf(q)
  const many = fields.length > 1
  return fields.map(({ name, prop, required: isRequired }) => {
    const kind = kindOf(prop)
    const label = [prop.title, prop.description].filter((x) => x && String(x) !== name).map((x) => plain(x, 200)).join(" — ")
    const hints: string[] = []
    if (typeof prop.format === "string") hints.push(`format ${prop.format}`)
    for (const [key, text] of [["minLength", "at least %s characters"], ["maxLength", "at most %s characters"], ["minimum", "at least %s"], ["maximum", "at most %s"]] as const) {
      if (key in prop) hints.push(text.replace("%s", String(prop[key])))
    }
    if (kind === "integer") hints.push("a whole number")
    else if (kind === "number") hints.push("a number")
    if ("default" in prop) hints.push(`default ${JSON.stringify(prop.default)}`)
    if (!isRequired) hints.push("optional")
    const text = `${plain(q.server, 100)} (via mcpx) asks: ${quoted(q.message, 1500)}` +
      (many || label ? ` — ${plain(name, 100)}${label ? `: ${label}` : ""}` : "") +
      (hints.length ? ` (${hints.join("; ")})` : "") + ` [${q.id}]`
    let options: QuestionPrompt["options"] = []
    let multiple: boolean | undefined
    if (kind === "enum" || kind === "multi-enum") {
      const opts = (kind === "enum" ? enumOptions(prop) : multiOptions(prop)) ?? []
      options = opts.map((o) => {
        const bits: string[] = []
        if (o.title !== String(o.value)) bits.push(`value ${JSON.stringify(o.value)}`)
        if ("default" in prop && JSON.stringify(prop.default) === JSON.stringify(o.value)) bits.push("the default")
        return { label: plain(o.title, 80), description: bits.join("; ") || plain(o.title, 80) }
      })
      multiple = kind === "multi-enum" ? true : undefined
    } else if (kind === "boolean") {
      options = [{ label: "Yes", description: "true" }, { label: "No", description: "false" }]
    }
    if (!isRequired && kind !== "multi-enum") options.push({ label: SKIP, description: "no value: the server's default applies" })
    return { question: text, header: header(q, name, many), options, ...(multiple ? { multiple } : {}) }
  })
}

/** The content the person gave, from opencode's answers (one array of labels per prompt, in order). */
export function contentFrom(q: Question, answers: string[][]): Record<string, unknown> {
  const content: Record<string, unknown> = {}
  fieldsOf(q).forEach(({ name, prop }, i) => {
    const picked = (answers[i] ?? []).map((a) => String(a)).filter((a) => a !== "")
    const kind = kindOf(prop)
    if (kind === "multi-enum") {
      if (picked.length) content[name] = typeMany(prop, picked)
      return
    }
    const first = picked[0]
    if (first === undefined || first === SKIP) return
    content[name] = typeValue(prop, first)
  })
  return content
}

/** The question id a `question` call or request carries, if any. */
export function markedId(questions: unknown): string | undefined {
  if (!Array.isArray(questions)) return undefined
  for (const p of questions) {
    if (!p || typeof p !== "object") continue
    const m = ID_PATTERN.exec(String((p as any).header ?? "")) ?? ID_PATTERN.exec(String((p as any).question ?? ""))
    if (m) return m[0]
  }
  return undefined
}
