// How the plugin recognises a question: by its id (the pattern is mcpx's own, generated from sidecar/mcpx/shared/ids.py),
// in the question dialogs it asked for.

import { ID_PATTERN, ID_PATTERNS } from "../shared/generated.js"

const QUESTION_ID = new RegExp(ID_PATTERNS.elc)

export function isQuestionId(text: string): boolean {
  return QUESTION_ID.test(text)
}

/** The question id a `question` call or request carries in a prompt's header (or text), if any. */
export function markedId(questions: unknown): string | undefined {
  if (!Array.isArray(questions)) return undefined
  for (const p of questions) {
    if (!p || typeof p !== "object") continue
    const m = ID_PATTERN.exec(String((p as any).header ?? "")) ?? ID_PATTERN.exec(String((p as any).question ?? ""))
    if (m) return m[0]
  }
  return undefined
}
