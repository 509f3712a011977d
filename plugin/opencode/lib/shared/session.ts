// Session binding: every call to the mcpx MCP entry carries the opencode session that made it, and
// every shell opencode starts knows it, so each question belongs to the session that caused it.

import { ASK_TOOL, SESSION_ARG } from "./generated.js"

export { SESSION_ARG }

/** The tools the plugin defines itself (not the mcpx MCP entry's): no session is injected into them. */
const OWN_TOOLS = new Set<string>([ASK_TOOL])

export function isMcpxTool(entry: string, tool: string): boolean {
  return tool.startsWith(entry + "_") && !OWN_TOOLS.has(tool)
}

/** tool.execute.before: the argument is added to the very object opencode sends (replacing it would not reach mcpx). */
export function injectSession(entry: string, input: { tool: string; sessionID: string }, output: { args: any }): boolean {
  if (!isMcpxTool(entry, input.tool) || !input.sessionID) return false
  if (output.args === null || typeof output.args !== "object" || Array.isArray(output.args)) return false
  output.args[SESSION_ARG] = input.sessionID
  return true
}

/** shell.env: MCPX_SESSION_ID for every shell of the session (its AGENT=1 keeps mcpx answering as agent:cli). */
export function shellEnv(input: { sessionID?: string }, output: { env: Record<string, string> }): void {
  if (input.sessionID) output.env.MCPX_SESSION_ID = input.sessionID
}

/** The session an opencode event is about: its sessionID, or the session it describes. */
export function sessionOf(event: { type: string; properties?: any }): string | undefined {
  const p = event.properties ?? {}
  const id = p.sessionID ?? p.info?.sessionID ?? p.part?.sessionID ?? (event.type.startsWith("session.") ? p.info?.id : undefined)
  return typeof id === "string" ? id : undefined
}
