// At off and auto the plugin shows the person nothing, so no tool output may carry a person's question or an
// invitation to answer it. mcpx serve's early result (and mcpx_elicit_list, _get, _task_result) show every
// question of a call, rendered by the daemon, which cannot know the plugin's level; so a result that shows a
// person's question carries, in its _meta (META.withheld, docs/opencode.md), the same content with each of them
// stood in for, rendered by the daemon too: here that content takes the place of the result's. Nothing is read out
// of the text. The agent's own questions stay: answering them is mcpx serve's contract with any MCP host, not the
// plugin's to take away.

import { META } from "../shared/generated.js"
import { isMcpResult } from "./output.js"

/** Replace every person's question in an MCP tool's output by what the daemon says stands for it; the ids withheld. */
export function withholdPersons(output: any): Set<string> {
  const withheld = new Set<string>()
  if (!isMcpResult(output)) return withheld
  const meta = output._meta?.[META.withheld]
  if (!meta || !Array.isArray(meta.content) || !Array.isArray(meta.elicitations)) return withheld
  for (const id of meta.elicitations) if (typeof id === "string") withheld.add(id)
  output.content.splice(0, output.content.length, ...meta.content) // the very array opencode hands on
  delete output._meta![META.withheld] // the person's words are in it: it goes no further
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
