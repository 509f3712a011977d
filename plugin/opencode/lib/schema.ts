// The restricted flat schema of an MCP form question: its fields, their kinds, and typing what a
// person picked or typed back into the field's JSON type. Mirrors sidecar/mcpx/broker/schema.py
// and routing.py (which fields are credentials), so the plugin and the daemon agree.

export type Schema = { type?: string; properties?: Record<string, unknown>; required?: unknown[] } | null | undefined
export type Prop = Record<string, any>
export type Kind = "string" | "number" | "integer" | "boolean" | "enum" | "multi-enum" | string
export type Option = { value: unknown; title: string }

export function properties(schema: Schema): Record<string, Prop> {
  const out: Record<string, Prop> = {}
  for (const [k, v] of Object.entries(schema?.properties ?? {})) {
    if (v && typeof v === "object" && !Array.isArray(v)) out[k] = v as Prop
  }
  return out
}

export function required(schema: Schema): string[] {
  return (schema?.required ?? []).filter((r): r is string => typeof r === "string")
}

export function enumOptions(prop: Prop): Option[] | null {
  if (Array.isArray(prop.enum)) {
    const names = Array.isArray(prop.enumNames) ? prop.enumNames : null
    return prop.enum.map((v: unknown, i: number) => ({ value: v, title: names && i < names.length ? String(names[i]) : String(v) }))
  }
  for (const key of ["oneOf", "anyOf"]) {
    const options = prop[key]
    if (Array.isArray(options) && options.length && options.every((o) => o && typeof o === "object" && "const" in o)) {
      return options.map((o: Prop) => ({ value: o.const, title: String(o.title ?? o.const) }))
    }
  }
  return null
}

export function multiOptions(prop: Prop): Option[] | null {
  if (prop.type !== "array" || !prop.items || typeof prop.items !== "object") return null
  return enumOptions(prop.items)
}

export function kindOf(prop: Prop): Kind {
  if (multiOptions(prop) !== null) return "multi-enum"
  if (enumOptions(prop) !== null) return "enum"
  return String(prop.type ?? "string")
}

function optionText(o: Option): string {
  return o.title === String(o.value) ? JSON.stringify(o.value) : `${JSON.stringify(o.value)} (${o.title})`
}

/** One line for a field: name, type, constraints, default. */
export function describeField(name: string, prop: Prop, isRequired: boolean): string {
  const kind = kindOf(prop)
  const bits: string[] = []
  if (kind === "enum") bits.push("one of " + (enumOptions(prop) ?? []).map(optionText).join(", "))
  else if (kind === "multi-enum") {
    bits.push("any of " + (multiOptions(prop) ?? []).map(optionText).join(", "))
    if (Number.isInteger(prop.minItems)) bits.push(`at least ${prop.minItems}`)
    if (Number.isInteger(prop.maxItems)) bits.push(`at most ${prop.maxItems}`)
  } else {
    bits.push(kind)
    if (typeof prop.format === "string") bits.push(`format ${prop.format}`)
    for (const [key, label] of [["minLength", "min length"], ["maxLength", "max length"], ["minimum", "min"], ["maximum", "max"]] as const) {
      if (key in prop) bits.push(`${label} ${prop[key]}`)
    }
  }
  bits.push(isRequired ? "required" : "optional")
  if ("default" in prop) bits.push(`default ${JSON.stringify(prop.default)}`)
  const label = [prop.title, prop.description].filter((x) => x && String(x) !== name).map(String).join(" — ")
  return `${name} (${bits.join("; ")})` + (label ? `: ${label}` : "")
}

/** A placeholder answer showing the shape; strings are "..." so nothing looks like a real value. */
export function exampleContent(schema: Schema): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  const props = properties(schema)
  const req = required(schema)
  const many = Object.keys(props).length > 1
  for (const [name, prop] of Object.entries(props)) {
    if (!req.includes(name) && "default" in prop && many) continue
    const kind = kindOf(prop)
    if (kind === "enum") out[name] = (enumOptions(prop) ?? [{ value: "..." }])[0]!.value
    else if (kind === "multi-enum") out[name] = [(multiOptions(prop) ?? [{ value: "..." }])[0]!.value]
    else if (kind === "boolean") out[name] = true
    else if (kind === "number" || kind === "integer") out[name] = prop.minimum ?? 0
    else out[name] = "..."
  }
  return out
}

// ---- credentials (routing.py): never shown in opencode, whose dialogs pass through the model's context

const SECRET_WORDS = new Set(["password", "passwd", "pwd", "passphrase", "passcode", "secret", "token", "apikey", "credential", "credentials"])
const SECRET_PAIRS = new Set(["api key", "private key", "secret key", "access key"])
const SECRET_PHRASES = /\b(password|passphrase|api[ _-]?key|access[ _-]token|personal access token|private key|secret key|client secret|bearer token)\b/i

export function words(name: string): string[] {
  return name.replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase().split(/[^a-z0-9]+/).filter(Boolean)
}

export function isCredentialName(name: string): boolean {
  const parts = words(name)
  if (parts.some((w) => SECRET_WORDS.has(w))) return true
  return parts.slice(1).some((w, i) => SECRET_PAIRS.has(`${parts[i]} ${w}`))
}

export function secretFields(schema: Schema): string[] {
  return Object.entries(properties(schema)).filter(([name, prop]) => {
    const title = String(prop.title ?? "")
    return prop.format === "password" || isCredentialName(name) || (title && isCredentialName(title)) ||
      SECRET_PHRASES.test(String(prop.description ?? "")) || prop.writeOnly === true
  }).map(([name]) => name)
}

// ---- typing a person's reply

const YES = new Set(["true", "yes", "y", "1", "on"])
const NO = new Set(["false", "no", "n", "0", "off"])

function pick(options: Option[], text: string): unknown {
  const exact = options.find((o) => String(o.value) === text || o.title === text)
  if (exact) return exact.value
  const loose = options.find((o) => o.title.toLowerCase() === text.trim().toLowerCase() ||
    String(o.value).toLowerCase() === text.trim().toLowerCase())
  return loose ? loose.value : text
}

/** What a person picked or typed, in the field's JSON type; left as text when it does not fit (the daemon names it). */
export function typeValue(prop: Prop, text: string): unknown {
  const kind = kindOf(prop)
  if (kind === "enum") return pick(enumOptions(prop) ?? [], text)
  if (kind === "boolean") {
    const lowered = text.trim().toLowerCase()
    return YES.has(lowered) ? true : NO.has(lowered) ? false : text
  }
  if (kind === "number" || kind === "integer") {
    const n = Number(text.trim())
    if (text.trim() === "" || Number.isNaN(n)) return text
    return n
  }
  return text
}

export function typeMany(prop: Prop, picked: string[]): unknown[] {
  const options = multiOptions(prop) ?? []
  return picked.map((p) => pick(options, p))
}
