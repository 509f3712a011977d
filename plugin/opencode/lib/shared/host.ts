// What opencode is running: a TUI, the app or `opencode serve` (where a person can see a dialog), or
// `opencode run` (where nobody can: it rejects every permission request by itself, or with --auto allows
// it, and turns the question tool off). An answer from such a dialog would be an answer nobody gave.

/** The opencode command this process runs, from its arguments: "run", "serve", or "tui" for the rest. */
export function hostCommand(argv: readonly string[] = process.argv): "run" | "serve" | "tui" {
  // argv[0] is the runtime and argv[1] opencode's entry; the first word after them that is no option is the command
  const first = argv.slice(2).find((a) => !a.startsWith("-"))
  if (first === "run") return "run"
  if (first === "serve" || first === "web") return "serve"
  return "tui"
}

/** A session `opencode run` made: it denies the question tool (and plan mode) in the session's own rules. */
export function madeByRun(session: unknown): boolean {
  const rules = (session as { permission?: unknown } | null)?.permission
  return Array.isArray(rules) && rules.some((r) => r && r.permission === "question" && r.action === "deny" && r.pattern === "*")
}

export type SessionReader = (id: string) => Promise<unknown>

/** Whether a person can see a dialog in a session: not in `opencode run`, nor in a session it made (`run --attach`). */
export class Host {
  private seen = new Map<string, Promise<boolean>>()

  constructor(readonly command: "run" | "serve" | "tui", private readonly readSession?: SessionReader) {}

  /** Read once per session, and early (when the plugin first sees the session): a toast waits on no read. */
  dialogsSeen(session: string): Promise<boolean> {
    if (this.command === "run") return Promise.resolve(false)
    if (!this.readSession) return Promise.resolve(true)
    let known = this.seen.get(session)
    if (!known) {
      if (this.seen.size >= 5000) this.seen.delete(this.seen.keys().next().value!)
      // opencode could not say: its own process is no `opencode run`, so a person may be watching
      known = this.readSession(session).then((s) => !madeByRun(s), () => true)
      this.seen.set(session, known)
    }
    return known
  }
}
