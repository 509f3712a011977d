// A tool's output, whichever shape opencode hands to tool.execute.after: an MCP tool's raw result
// `{content: [...], _meta?}`, or a built-in's `{title, output, metadata}`.

import { ID_PATTERN, MCPX_TOOLS, META } from "../shared/generated.js"

export function isMcpResult(output: any): output is { content: any[]; _meta?: Record<string, any> } {
  return output !== null && typeof output === "object" && Array.isArray(output.content)
}

export function textOf(output: any): string {
  if (isMcpResult(output)) return output.content.map((c: any) => (c && c.type === "text" ? String(c.text ?? "") : "")).join("\n")
  return typeof output?.output === "string" ? output.output : ""
}

export function append(output: any, text: string): void {
  if (isMcpResult(output)) output.content.push({ type: "text", text })
  else if (output && typeof output === "object") output.output = (typeof output.output === "string" && output.output ? output.output + "\n\n" : "") + text
}

/** The question ids the tool's own output already shows: those mcpx's results name in their _meta, and any id in
 * a text (what mcpx's CLI printed in a shell). */
export function ownIds(output: any): Set<string> {
  const ids = new Set<string>()
  for (const m of textOf(output).matchAll(new RegExp(ID_PATTERN.source, "g"))) ids.add(m[0])
  const meta = isMcpResult(output) ? output._meta?.[META.inputRequired] : undefined
  for (const id of Array.isArray(meta?.elicitations) ? meta.elicitations : []) if (typeof id === "string") ids.add(id)
  return ids
}

const MCPX_TOOL_NAMES = new RegExp(`(^|[^A-Za-z0-9_])(${MCPX_TOOLS.join("|")})\\b`, "g")

/** mcpx names its own tools without the MCP entry's prefix; the model knows them as `<entry>_mcpx_…`. */
export function prefixToolNames(output: any, entry: string): void {
  if (!isMcpResult(output)) return
  for (const item of output.content) {
    if (item && item.type === "text" && typeof item.text === "string") {
      item.text = item.text.replace(MCPX_TOOL_NAMES, (_all: string, before: string, name: string) => `${before}${entry}_${name}`)
    }
  }
}
