// How the plugin recognises a question: by its id, in a tool's output and in the question dialogs it asked for.

export const ID_PATTERN = /elc-[0-9a-f]{16}/

export function isQuestionId(text: string): boolean {
  return new RegExp(`^${ID_PATTERN.source}$`).test(text)
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
