// After each tool call of a session: the session's pending questions not yet shown are appended to
// that tool's output, each once — the agent's as questions it may answer, the person's as
// announcements (at level ask, with the call that opens the person's dialog). The texts are the
// daemon's rendering of each question, for the plugin's level.

import { Daemon, NoDaemon, type Question, type ShownIn } from "../shared/daemon.js"
import type { Level } from "../shared/level.js"
import { block, noDaemonText } from "./messages.js"
import { append, ownIds } from "./output.js"

const REMEMBERED = 5000

export class Notifier {
  private shown = new Map<string, Set<string>>()
  private notices = new Map<string, string[]>()
  private saidNoDaemon = new Set<string>()

  /** `shown`: when and how the person was shown a question in opencode (a toast, its own dialog), if they were;
   * `inDialog`: mcpx's own dialog puts it in front of them (the TUI part runs here, or its dialog opened). */
  constructor(private readonly daemon: Daemon, private readonly prefix: string,
    private readonly shown_: (id: string) => { at: Date; how: ShownIn } | undefined = () => undefined,
    private readonly inDialog: (id: string, session: string) => boolean = () => false) {}

  /** The person's question as the daemon renders it for the agent: saying it was shown to the person when it was. */
  private async told(q: Question): Promise<Question> {
    const shown = this.shown_(q.id)
    if (!shown) return q
    const r = await this.daemon.question(q.id, this.prefix, { shownAt: shown.at, shownIn: shown.how })
    return r.status === 200 ? r.body.elicitation : q
  }

  private seen(session: string): Set<string> {
    let set = this.shown.get(session)
    if (!set) {
      if (this.shown.size >= REMEMBERED) this.shown.delete(this.shown.keys().next().value!)
      set = new Set()
      this.shown.set(session, set)
    }
    return set
  }

  /** A note for the agent at the session's next tool output (an answer that did not fit, say). */
  notice(session: string, text: string): void {
    this.notices.set(session, [...(this.notices.get(session) ?? []), text])
  }

  /** Show a question again (its dialog needs opening once more). */
  forget(session: string, id: string): void {
    const set = this.shown.get(session)
    for (const key of [`a:${id}`, `h:${id}`, `k:${id}`]) set?.delete(key)
  }

  markShown(session: string, key: string): void {
    this.seen(session).add(key)
  }

  /** The text to append for this session now, or "" — marking what it shows as shown. */
  async pendingText(session: string, level: Level, own: Set<string> = new Set()): Promise<string> {
    const parts = this.notices.get(session) ?? []
    this.notices.delete(session)
    if (level === "off" || level === "auto") return parts.join("\n\n")
    let pending: Question[]
    try {
      pending = await this.daemon.pending(session, this.prefix)
    } catch (e) {
      // said once per session: the daemon is missing, or refuses the plugin (a wrong token, say)
      if (!this.saidNoDaemon.has(session)) {
        this.saidNoDaemon.add(session)
        parts.push(e instanceof NoDaemon ? noDaemonText(this.daemon.describe())
          : `[mcpx plugin] The mcpx daemon at ${this.daemon.describe()} did not list this session's questions: ` +
            `${String((e as Error)?.message ?? e)}. Questions from MCP servers behind mcpx cannot be shown here until it does.`)
      }
      return parts.join("\n\n")
    }
    const seen = this.seen(session)
    const shown: string[] = []
    const at = level === "ask" ? "ask" : "notify"
    for (const q of pending) {
      if (q.session !== session) continue // the daemon filters; this keeps it so whatever it returns
      const r = q.render // its `agent` texts for the agent's questions, `person` for the person's
      if (q.audience !== "human") {
        const key = `a:${q.id}`
        if (seen.has(key)) continue
        seen.add(key)
        if (!own.has(q.id)) shown.push(r.agent![at])
        continue
      }
      const key = `h:${q.id}`
      const mine = this.inDialog(q.id, q.session) // mcpx's own dialog shows it: nothing for the agent to open
      const dialog = level === "ask" && r.dialog !== "terminal" && !mine
      if (!seen.has(key)) {
        seen.add(key)
        const told = (await this.told(q)).render
        // an escalated question is announced as the person's even though the decline's output names it
        if (!own.has(q.id) || q.escalated) {
          shown.push(mine && told.person!.dialog ? told.person!.dialog : told.person![at])
          if (dialog) seen.add(`k:${q.id}`)
          continue
        }
        // the output shows the question already (mcpx serve's early result): whether the person saw it, where they answer
        if (!dialog && told.note) shown.push(told.note)
      }
      if (dialog && !seen.has(`k:${q.id}`)) {
        // the tool's own output showed the question; it cannot know the person's dialog opens with the plugin's tool
        seen.add(`k:${q.id}`)
        shown.push(r.askAbove)
      }
    }
    if (shown.length) parts.push(block(shown))
    return parts.join("\n\n")
  }

  /** tool.execute.after */
  async after(session: string, output: any, level: Level): Promise<void> {
    const text = await this.pendingText(session, level, ownIds(output))
    if (text) append(output, text)
  }
}
