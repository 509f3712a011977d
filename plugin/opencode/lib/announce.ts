// The person hears at once: a question for them (audience human, or one the agent declined and mcpx
// escalated) that opens in a session of this opencode is shown in opencode's TUI as a toast, from the
// daemon's event stream, with no model turn — at every level but off and auto. The toast's words are the
// daemon's (render.toast); the plugin only counts the person's questions that wait here.
//
// A session "of this opencode" is one this process has seen: a tool call or shell of it (the hooks), or any
// opencode event about it (the event hook: a session created, a message). Not every session opencode's
// storage lists: two opencode processes in one project share that list, and each would toast the other's.

import { Daemon, type Question } from "./daemon.js"
import type { DaemonEvent } from "./events.js"
import type { Level } from "./level.js"

const REMEMBERED = 5000
const ENDED = new Set(["elicit.answered", "elicit.expired", "elicit.abandoned"])

export type Toast = { title: string; message: string; variant: "warning" }
/** Show a toast in opencode's TUI; true when opencode took it. */
export type ShowToast = (toast: Toast) => Promise<boolean>

export type AnnounceOptions = {
  level: () => Promise<Level>
  show: ShowToast
  /** false where no person sees opencode's TUI (`opencode run`, a session it made): nothing is shown there, so
   * nothing is said to be */
  seen: (session: string) => Promise<boolean>
  durationMs?: number
}

export class Announcer {
  private sessions = new Set<string>()
  private waiting = new Map<string, string>() // the person's pending questions here: id → session
  private shown = new Map<string, Date>() // when each was shown to the person: a toast or a dialog
  private inflight = new Set<Promise<void>>()
  private enders = new Map<string, Set<(kind: string) => void>>()
  /** every toast shown, newest last (for the plugin's tests and the bench) */
  readonly toasts: { id: string; at: Date; toast: Toast }[] = []

  constructor(private readonly daemon: Daemon, private readonly prefix: string, private readonly opts: AnnounceOptions) {}

  /** A session of this opencode. The first time, its person's questions already waiting are announced. */
  bind(session: string | undefined): void {
    if (!session || this.sessions.has(session)) return
    if (this.sessions.size >= REMEMBERED) this.sessions.delete(this.sessions.values().next().value!)
    this.sessions.add(session)
    void this.opts.seen(session) // read now, so that a toast waits on nothing but the daemon
    this.track(this.catchUp(session).catch(() => {})) // no daemon yet: the stream brings what opens later
  }

  owns(session: string | undefined): boolean {
    return !!session && this.sessions.has(session)
  }

  /** When the person was shown question `id` in opencode, if they were. */
  shownAt(id: string): Date | undefined {
    return this.shown.get(id)
  }

  markShown(id: string, at: Date = new Date()): void {
    if (this.shown.size >= REMEMBERED) this.shown.delete(this.shown.keys().next().value!)
    if (!this.shown.has(id)) this.shown.set(id, at)
  }

  /** The daemon's event stream. */
  onEvent(event: DaemonEvent): void {
    const id = event.elicit
    if (!id) return
    if (ENDED.has(event.kind)) {
      this.waiting.delete(id)
      for (const resolve of this.enders.get(id) ?? []) resolve(event.kind)
      this.enders.delete(id)
      return
    }
    if (!this.owns(event.session)) return
    const forPerson = (event.kind === "elicit.open" && event.data?.audience === "human") || event.kind === "elicit.escalated"
    if (forPerson) this.track(this.announce(id, event.session!))
  }

  /** A promise of question `id`'s end (answered, expired, abandoned) as the daemon's stream tells it, and what
   * stops waiting for it. */
  ended(id: string): { ended: Promise<string>; stop: () => void } {
    let resolve!: (kind: string) => void
    const ended = new Promise<string>((r) => (resolve = r))
    const set = this.enders.get(id) ?? new Set()
    set.add(resolve)
    this.enders.set(id, set)
    return { ended, stop: () => { set.delete(resolve); if (!set.size) this.enders.delete(id) } }
  }

  /** Once every announcement under way has ended (shown, or not). */
  async idle(): Promise<void> {
    while (this.inflight.size) await Promise.allSettled([...this.inflight])
  }

  private track(work: Promise<void>): void {
    const done = work.catch((e) => console.error(`[mcpx plugin] announcing failed: ${String(e?.message ?? e)}`))
      .finally(() => this.inflight.delete(done))
    this.inflight.add(done)
  }

  private async catchUp(session: string): Promise<void> {
    for (const q of await this.daemon.pending(session, this.prefix)) {
      if (q.session === session && q.audience === "human") await this.announce(q.id, session)
    }
  }

  /** Toast question `id`, once; the title counts every question of the person waiting here. */
  async announce(id: string, session: string): Promise<void> {
    if (this.waiting.has(id)) return
    const level = await this.opts.level()
    if (level === "off" || level === "auto" || !(await this.opts.seen(session))) return
    this.waiting.set(id, session)
    const reply = await this.daemon.question(id, this.prefix, { waiting: this.waiting.size })
    const q: Question | undefined = reply.status === 200 ? reply.body.elicitation : undefined
    if (!q || q.state !== "pending") {
      this.waiting.delete(id)
      return
    }
    const toast = q.render.toast
    if (await this.opts.show(toast)) {
      const at = new Date()
      this.markShown(id, at)
      this.toasts.push({ id, at, toast })
      if (this.toasts.length > 100) this.toasts.shift()
    }
  }
}
