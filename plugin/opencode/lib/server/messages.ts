// The plugin's own words: about itself, the daemon and opencode's dialogs. A question's words are never
// composed here — the daemon renders them (Question.render) and the plugin shows them as given.

export function block(texts: string[]): string {
  return "[mcpx plugin] " + (texts.length === 1 ? "A question is waiting in this session." : `${texts.length} questions are waiting in this session.`) +
    "\n\n" + texts.join("\n\n")
}

export function noDaemonText(where: string): string {
  return `[mcpx plugin] No mcpx daemon answers at ${where}, so questions that MCP servers behind mcpx ask cannot be ` +
    "shown or answered here. Start one with `mcpx daemon` in a terminal (any `mcpx serve` also starts it), or set " +
    "MCPX_DAEMON_URL for opencode. (Said once per session.)"
}

/** Someone's text (opencode's, the daemon's, the person's) bounded to `limit` characters. */
export function clip(text: unknown, limit: number): string {
  const s = String(text ?? "")
  return s.length <= limit ? s : s.slice(0, limit - 1) + "…"
}

/** The text a finished call left for the model. */
export function resultText(result: any): string {
  const content = Array.isArray(result?.content) ? result.content : []
  const texts = content.map((c: any) => (c?.type === "text" ? String(c.text) : `[${String(c?.type ?? "item")}]`))
  return (result?.isError ? "(the server reports an error) " : "") + (texts.join("\n") || JSON.stringify(result ?? null))
}
