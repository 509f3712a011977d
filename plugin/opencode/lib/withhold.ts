// At off and auto the plugin shows the person nothing, so no tool output may carry a person's question or an
// invitation to answer it. mcpx serve's early result (and mcpx_elicit_list, _get, _task_result) show every
// question of a call, rendered by the daemon, which cannot know the plugin's level; so here each paragraph that
// shows a person's question is replaced by the daemon's `withheld` text for it. The agent's own questions stay:
// answering them is mcpx serve's contract with any MCP host, not the plugin's to take away.

import type { Daemon, Question } from "./daemon.js"
import { ID_PATTERN } from "./generated.js"
import { isMcpResult } from "./output.js"

const PARAGRAPH = new RegExp(`^Question (${ID_PATTERN.source}) from `)

/** Replace every person's question in an MCP tool's output; the ids withheld. */
export async function withholdPersons(output: any, daemon: Daemon, prefix: string): Promise<Set<string>> {
  const withheld = new Set<string>()
  if (!isMcpResult(output)) return withheld
  const people = new Map<string, Question | null>() // id → the person's question, or null: not the person's
  const personOf = async (id: string): Promise<Question | null> => {
    if (!people.has(id)) {
      const r = await daemon.question(id, prefix)
      const q = r.status === 200 ? r.body.elicitation : null
      people.set(id, q && q.audience === "human" ? q : null)
    }
    return people.get(id)!
  }
  for (const item of output.content) {
    if (!item || item.type !== "text" || typeof item.text !== "string") continue
    const paragraphs = item.text.split("\n\n")
    for (const [i, paragraph] of paragraphs.entries()) {
      const id = PARAGRAPH.exec(paragraph)?.[1]
      const q = id ? await personOf(id) : null
      if (!q) continue
      paragraphs[i] = q.render.withheld
      withheld.add(q.id)
    }
    item.text = paragraphs.join("\n\n")
  }
  const structured = (output as { structuredContent?: any }).structuredContent
  if (withheld.size && structured && typeof structured === "object") {
    // the same questions as data (mcpx_elicit_list, _get): the person's go too
    if (Array.isArray(structured.elicitations)) {
      structured.elicitations = structured.elicitations.filter((q: any) => !withheld.has(q?.id))
    }
    if (withheld.has(structured.elicitation?.id)) delete structured.elicitation
  }
  return withheld
}
