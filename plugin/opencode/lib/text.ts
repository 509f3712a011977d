// A server's words are data: control characters never reach the model or the person raw.
// The same rules as mcpx's own sidecar/mcpx/text.py, so every surface shows a question alike.

const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

/** One line of untrusted text: escapes instead of control characters, newlines shown as ⏎, bounded. */
export function plain(text: unknown, limit = 4000): string {
  let s = String(text ?? "").replace(CONTROL, (c) => {
    const code = c.charCodeAt(0)
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`
  })
  s = s.replace(/\n/g, " ⏎ ")
  return s.length <= limit ? s : s.slice(0, limit - 1) + "…"
}

/** Untrusted text in quotes, so it reads as someone else's words. */
export function quoted(text: unknown, limit = 4000): string {
  return "“" + plain(text, limit) + "”"
}

/** JSON as Python's json.dumps writes it (", " and ": "), so the plugin's calls read like mcpx's own. */
export function pyJson(value: unknown): string {
  if (Array.isArray(value)) return "[" + value.map(pyJson).join(", ") + "]"
  if (value !== null && typeof value === "object") {
    return "{" + Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => JSON.stringify(k) + ": " + pyJson(v)).join(", ") + "}"
  }
  return JSON.stringify(value) ?? "null"
}

/** A JSON argument for a POSIX shell command line. */
export function shellQuoteJson(value: unknown): string {
  return "'" + JSON.stringify(value).replace(/'/g, "'\\''") + "'"
}
