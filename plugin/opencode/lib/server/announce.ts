// The person hears at once: a question for them (audience human, or one the agent declined and mcpx
// escalated) that opens in a session of this opencode reaches them with no model turn, at every level but off
// and auto. Where mcpx's own dialog shows it — the TUI part of the plugin (tui.tsx), in this process (the link
// says so) or in a TUI attached from another process (a question of the session shown in its dialog, as the
// daemon's elicit.shown records say) — that is all it needs. Where none does, a toast in the daemon's words
// (render.toast) points to where they answer; under `opencode run`, where no TUI draws anything, one line on the
// terminal does.
//
// A session "of this opencode" is one this process has seen: a tool call or shell of it (the hooks), or any
// opencode event about it (the event hook: a session created, a message). Not every session opencode's
// storage lists: two opencode processes in one project share that list, and each would toast the other's.

import { Daemon, type Question, type ShownIn } from "../shared/daemon.js"
import type { DaemonEvent } from "../shared/events.js"
import type { Level } from "../shared/level.js"

const REMEMBERED = 5000
const ENDED = new Set(["elicit.answered", "elicit.expired", "elicit.abandoned"])

export type Toast = { title: string; message: string; variant: "warning" | "info"; duration?: number }
/** Show a toast in opencode's TUI; true when opencode took it. */
export type ShowToast = (toast: Toast) => Promise<boolean>

export type AnnounceOptions = {
  level: () => Promise<Level>
  show: ShowToast
  /** false where no person sees opencode's TUI (`opencode run`, a session it made): nothing is shown there, so
   * nothing is said to be */
  seen: (session: string) => Promise<boolean>
  /** the TUI part of the plugin runs in this process: its dialog shows the person's questions */
  tui?: () => boolean
  /** `opencode run`: one line on its terminal for each of the person's questions */
  print?: (line: string) => void
  durationMs?: number
}

type Shown = { at: Date; how: ShownIn }

export class Announcer {
  private sessions = new Set<string>()
  private waiting = new Map<string, string>() // the person's pending questions here: id → session
  private shown = new Map<string, Shown>() // when each was put in front of the person, and how
  private toasted = new Map<string, number>() // when each toast of ours went up (ms), while it may still be up
  private inflight = new Set<Promise<void>>()
  private enders = new Map<string, Set<(kind: string) => void>>()
  private dialogWaiters = new Map<string, Set<(at: Date) => void>>()
  private printed = new Set<string>()
  private dialogSessions = new Set<string>() // sessions a TUI attached from elsewhere showed a question of in its dialog
  /** every toast shown, newest last (for the plugin's tests and the bench) */
  readonly toasts: { id: string; at: Date; toast: Toast }[] = []

  constructor(private readonly daemon: Daemon, private readonly prefix: string, private readonly opts: AnnounceOptions) {}

  private get duration(): number {
    return this.opts.durationMs ?? 60_000
  }

  /** A session of this opencode. The first time, its person's questions already waiting are announced. */
  bind(session: string | undefined): void {
    if (!session || this.sessions.has(session)) return
    if (this.sessions.size >= REMEMBERED) this.sessions.delete(this.sessions.values().next().value!)
    this.sessions.add(session)
    void this.opts.seen(session) // read now, so that a toast waits on nothing but the daemon
    this.track(this.catchUp(session).catch(() => {})) // no daemon yet: the stream brings what opens later
  }

  owns(session: string | null | undefined): boolean {
    return !!session && this.sessions.has(session)
  }

  /** When the person was shown question `id` in opencode, if they were. */
  shownAt(id: string): Date | undefined {
    return this.shown.get(id)?.at
  }

  /** What showed it to them: the question's own dialog, or a toast. */
  shownIn(id: string): ShownIn | undefined {
    return this.shown.get(id)?.how
  }

  /** mcpx's own dialog puts question `id` of `session` in front of the person: the TUI part runs here, or it showed
   * this question (or one of the session before: the person watches that session in a TUI attached from elsewhere). */
  inOwnDialog(id: string, session?: string): boolean {
    return !!this.opts.tui?.() || this.shown.get(id)?.how === "dialog" || (!!session && this.dialogSessions.has(session))
  }

  markShown(id: string, at: Date = new Date(), how: ShownIn = "toast"): void {
    if (this.shown.size >= REMEMBERED) this.shown.delete(this.shown.keys().next().value!)
    const known = this.shown.get(id)
    if (!known || (how === "dialog" && known.how !== "dialog")) this.shown.set(id, { at, how })
    if (how === "dialog") {
      for (const resolve of this.dialogWaiters.get(id) ?? []) resolve(at)
      this.dialogWaiters.delete(id)
    }
  }

  /** When question `id`'s own dialog opened in a TUI (this one's or one attached from elsewhere), waiting up to `ms`
   * for it; undefined if it did not. */
  inDialog(id: string, ms: number): Promise<Date | undefined> {
    const known = this.shown.get(id)
    if (known?.how === "dialog") return Promise.resolve(known.at)
    if (ms <= 0) return Promise.resolve(undefined)
    return new Promise((resolve) => {
      const set = this.dialogWaiters.get(id) ?? new Set()
      const done = (at: Date | undefined) => {
        clearTimeout(timer)
        set.delete(done)
        if (!set.size) this.dialogWaiters.delete(id)
        resolve(at)
      }
      const timer = setTimeout(() => done(undefined), ms)
      timer.unref?.()
      set.add(done)
      this.dialogWaiters.set(id, set)
    })
  }

  /** The daemon's event stream. */
  onEvent(event: DaemonEvent): void {
    const id = event.elicit
    if (!id) return
    if (event.kind === "elicit.shown") {
      const how = event.data?.how === "dialog" ? "dialog" : "toast"
      if (how === "dialog" && event.session && this.owns(event.session)) {
        if (this.dialogSessions.size >= REMEMBERED) this.dialogSessions.delete(this.dialogSessions.values().next().value!)
        this.dialogSessions.add(event.session)
      }
      this.markShown(id, new Date(Date.parse(event.at ?? "") || Date.now()), how)
      return
    }
    if (ENDED.has(event.kind)) {
      this.waiting.delete(id)
      for (const resolve of this.enders.get(id) ?? []) resolve(event.kind)
      this.enders.delete(id)
      this.track(this.withdraw(id))
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

  /** Put question `id` before the person where nothing else does: a toast (the title counts every question of
   * theirs waiting here), or the line `opencode run` prints. */
  async announce(id: string, session: string): Promise<void> {
    // claimed before anything is awaited: the session's catch-up and the stream's elicit.open, arriving together,
    // announce it once; and let go of on every way out but "it waits here", so no count stays one too high
    if (this.waiting.has(id)) return
    this.waiting.set(id, session)
    let waits = false
    try {
      waits = await this.announceClaimed(id, session)
    } finally {
      if (!waits) this.waiting.delete(id)
    }
  }

  /** Announce a question claimed in `waiting`; whether it waits here (false: not the person's to be told of here,
   * or no longer pending). */
  private async announceClaimed(id: string, session: string): Promise<boolean> {
    const level = await this.opts.level()
    if (level === "off" || level === "auto") return false
    if (!(await this.opts.seen(session))) {
      if (this.opts.print && !this.printed.has(id)) await this.printLine(id)
      return true
    }
    if (this.inOwnDialog(id, session)) return true // mcpx's own dialog shows it: no toast stands in for it
    const reply = await this.daemon.question(id, this.prefix, { waiting: this.waiting.size })
    const q: Question | undefined = reply.status === 200 ? reply.body.elicitation : undefined
    if (!q || q.state !== "pending") return false
    const toast: Toast = { ...q.render.toast, variant: q.render.toast.variant ?? "warning", duration: this.duration }
    if (await this.opts.show(toast)) {
      const at = new Date()
      this.markShown(id, at)
      this.toasted.set(id, at.getTime())
      this.toasts.push({ id, at, toast })
      if (this.toasts.length > 100) this.toasts.shift()
    }
    return true
  }

  private async printLine(id: string): Promise<void> {
    const r = await this.daemon.question(id, this.prefix)
    if (r.status !== 200 || r.body.elicitation.state !== "pending") return
    if (this.printed.size >= REMEMBERED) this.printed.delete(this.printed.values().next().value!)
    this.printed.add(id)
    this.opts.print!(r.body.elicitation.render.line)
  }

  /** A question whose toast may still be up ended: a toast of its end, in the daemon's words, takes its place, so
   * none claims it waits. */
  private async withdraw(id: string): Promise<void> {
    const at = this.toasted.get(id)
    this.toasted.delete(id)
    if (at === undefined || Date.now() - at > this.duration) return
    const r = await this.daemon.question(id, this.prefix) // the event came once its end was stored
    const ended = r.status === 200 ? r.body.elicitation.render.ended : undefined
    if (!ended) return
    const left = this.waiting.size
    await this.opts.show({ title: left ? `● ${left} question${left === 1 ? "" : "s"} for you` : "mcpx",
      message: ended.toast, variant: "info", duration: 4000 })
  }
}
