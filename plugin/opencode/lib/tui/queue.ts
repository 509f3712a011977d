// The person's questions in opencode's TUI: which wait here, which one is in front of the person, and what came
// of it. One dialog at a time: a question for the person (audience human, or one the agent declined) that opens
// in a session of this opencode is put in its dialog at once, the others wait in the order they opened; a badge
// counts them, and a command brings the next one back. A question answered elsewhere (a terminal, the web inbox,
// another opencode), expired or abandoned leaves: its dialog closes, saying so in one line.
//
// Only the person's own act answers: Accept, Decline or Cancel in the dialog. A dialog that closes any other way
// (Esc, opencode's own dialog replacing it, the plugin taking it down) records nothing, and the question waits on.
//
// The drawing is the Screen's (tui.tsx, lib/tui/dialog.tsx); what each question shows is the daemon's (render.form).

import { Daemon, NoDaemon, problem, type Question } from "../shared/daemon.js"
import type { DaemonEvent } from "../shared/events.js"
import type { Level } from "../shared/level.js"

const ENDED = new Set(["elicit.answered", "elicit.expired", "elicit.abandoned"])
const REMEMBERED = 5000

export type Toast = { variant: "info" | "success" | "warning" | "error"; title?: string; message: string; duration: number }

/** What came of the person's act in the dialog. */
export type Outcome =
  | { kind: "answered" } // recorded: the dialog is gone
  | { kind: "refused"; problems: Record<string, string>; message: string } // did not fit: the dialog stays
  | { kind: "ended"; note: string } // it was no longer waiting: the dialog is gone
  | { kind: "failed"; message: string } // mcpx did not take it (no daemon, say): the dialog stays

/** The question in front of the person, as the dialog acts on it. */
export type OpenQuestion = {
  question: Question
  answer: (action: "accept" | "decline" | "cancel", body: { form?: Record<string, string | string[]>; reason?: string }) => Promise<Outcome>
  /** the person said yes to opening a url-mode question's page: recorded, then opened */
  openPage: () => Promise<string>
  /** a question only the person's passkey accepts: the page where it does (the question's link, from the daemon) */
  passkeyPage: () => Promise<{ url?: string; line: string }>
  /** that page, opened in the person's browser; what happened, in a line */
  openPasskeyPage: () => Promise<string>
}

export interface Screen {
  /** a dialog that is not ours is open (opencode's own, another plugin's): ours waits until it closes */
  busy(): boolean
  /** draw the question's dialog; `closed` is called once if it closes other than by the desk's `hide` */
  show(open: OpenQuestion, closed: () => void): void
  /** take the desk's dialog down (nothing is recorded) */
  hide(): void
  toast(toast: Toast): void
  /** how many of the person's questions wait here */
  badge(count: number): void
  /** open a page in the person's browser; what happened, in a line */
  openUrl(url: string): Promise<string>
}

export type DeskOptions = {
  /** the plugin's level now: ask opens the dialog at once; notify only counts and tells; off and auto show nothing */
  level: () => Promise<Level>
  /** the command that brings the next question back, as the person types it (for the toasts) */
  command: string
  /** how often to look again while a dialog of opencode's own is open (ms) */
  retryMs?: number
}

type Waiting = { question: Question; aside: boolean; seq: number }

function plural(n: number): string {
  return `${n} question${n === 1 ? "" : "s"}`
}

export class QuestionQueue {
  private sessions = new Set<string>()
  private waiting = new Map<string, Waiting>()
  private current: string | undefined
  private answering: string | undefined // our own answer to it is on its way: its end is ours to report
  private seq = 0
  private retry: ReturnType<typeof setTimeout> | undefined
  private inflight = new Set<Promise<unknown>>()
  private said: { text: string; at: number } | undefined // the last line about a dialog that closed

  constructor(private readonly daemon: Daemon, private readonly prefix: string, private readonly screen: Screen,
    private readonly opts: DeskOptions) {}

  /** The question in front of the person, if any. */
  get showing(): string | undefined {
    return this.current
  }

  count(): number {
    return this.waiting.size
  }

  /** A session of this opencode (its events reached this TUI); the first time, its waiting questions are taken in. */
  bind(session: string | undefined): void {
    if (!session || this.sessions.has(session)) return
    if (this.sessions.size >= REMEMBERED) this.sessions.delete(this.sessions.values().next().value!)
    this.sessions.add(session)
    this.track(this.catchUp(session))
  }

  /** Take in every bound session's waiting questions again (the daemon's stream has just (re)connected). */
  resync(): void {
    for (const session of this.sessions) this.track(this.catchUp(session))
  }

  /** Once every fetch under way has ended (for tests). */
  async idle(): Promise<void> {
    while (this.inflight.size) await Promise.allSettled([...this.inflight])
  }

  /** The daemon's event stream. */
  onEvent(event: DaemonEvent): void {
    const id = event.elicit
    if (!id) return
    if (ENDED.has(event.kind)) return this.ended(id)
    if (!event.session || !this.sessions.has(event.session)) return
    if ((event.kind === "elicit.open" && event.data?.audience === "human") || event.kind === "elicit.escalated") {
      this.track(this.admit(id))
    }
  }

  /** The command: the oldest question waiting here, in front of the person (set aside or not). */
  next(): void {
    const oldest = [...this.waiting.entries()].sort((a, b) => a[1].seq - b[1].seq)[0]
    if (!oldest) {
      this.screen.toast({ variant: "info", message: "mcpx: no question waits for you here.", duration: 3000 })
      return
    }
    if (this.current === oldest[0]) return
    if (this.current) this.setAside(this.current, false)
    oldest[1].aside = false
    this.present(true)
  }

  /** Bring question `id` in front of the person (the agent's mcpx_ask_person, through the server part). */
  bring(id: string): void {
    this.track((async () => {
      if (!this.waiting.has(id)) await this.admit(id, false)
      const w = this.waiting.get(id)
      if (!w || this.current === id) return
      if (this.current) this.setAside(this.current, false)
      w.aside = false
      await this.present(true, id)
    })())
  }

  private track(work: Promise<unknown>): void {
    const done = work.catch((e) => console.error(`[mcpx tui] ${String(e?.message ?? e)}`)).finally(() => this.inflight.delete(done))
    this.inflight.add(done)
  }

  private async catchUp(session: string): Promise<void> {
    let pending: Question[]
    try {
      pending = await this.daemon.pending(session, this.prefix)
    } catch (e) {
      if (e instanceof NoDaemon) return // the stream's (re)connect calls resync
      throw e
    }
    for (const q of pending) if (q.session === session && forDialog(q)) this.take(q)
    this.changed()
  }

  private async admit(id: string, present = true): Promise<void> {
    const r = await this.daemon.question(id, this.prefix)
    if (r.status !== 200) return
    const q = r.body.elicitation
    if (q.state !== "pending" || !forDialog(q)) return
    this.take(q)
    this.screen.badge(this.waiting.size)
    if (present) await this.present(false)
  }

  private take(q: Question): void {
    const known = this.waiting.get(q.id)
    if (known) known.question = q
    else this.waiting.set(q.id, { question: q, aside: false, seq: this.seq++ })
  }

  private changed(): void {
    this.screen.badge(this.waiting.size)
    void this.present(false)
  }

  /** Put the next question (or `prefer`) in front of the person, if none is and the level says to (or the person
   * asked). */
  private async present(asked: boolean, prefer?: string): Promise<void> {
    if (this.current || !this.waiting.size) return
    const level = await this.opts.level()
    if (level === "off" || level === "auto") return
    const preferred = prefer ? this.waiting.get(prefer) : undefined
    const next = preferred ? [prefer!, preferred] as const
      : [...this.waiting.entries()].filter(([, w]) => !w.aside).sort((a, b) => a[1].seq - b[1].seq)[0]
    if (!next) return
    if (level !== "ask" && !asked) {
      this.screen.toast({ variant: "warning", title: `● ${plural(this.waiting.size)} for you`,
        message: `${next[1].question.render.form.toast} — ${this.opts.command} to answer`, duration: 10_000 })
      next[1].aside = true // told once; the command brings it
      return
    }
    if (this.screen.busy()) {
      // opencode's own dialog is open: the person is busy with it; ours comes once it closes
      if (!this.retry) {
        this.retry = setTimeout(() => {
          this.retry = undefined
          void this.present(asked, prefer)
        }, this.opts.retryMs ?? 250)
        this.retry.unref?.()
      }
      return
    }
    if (this.current) return // another present() got there during the await
    this.show(next[0], next[1].question)
  }

  private show(id: string, q: Question): void {
    this.current = id
    const open: OpenQuestion = {
      question: q,
      answer: (action, body) => this.answer(q, action, body),
      openPage: () => this.openPage(q),
      passkeyPage: () => this.passkeyPage(q),
      openPasskeyPage: async () => {
        const page = await this.passkeyPage(q)
        return page.url ? this.screen.openUrl(page.url) : page.line
      },
    }
    this.screen.show(open, () => this.closed(id))
    // one toast at a time: the line about the dialog that just closed stays, ahead of this one's
    const before = this.said && Date.now() - this.said.at < 5000 ? `${this.said.text}\n` : ""
    this.said = undefined
    this.screen.toast({ variant: "warning", title: `● ${plural(this.waiting.size)} for you`,
      message: `${before}${q.render.form.toast} — answer in the dialog`, duration: 6000 })
    this.track(this.daemon.shown(id).then((r) => {
      if (r.status === 410 && this.current === id) this.ended(id) // it ended on the way: the stream will say how
    }))
  }

  /** Our dialog closed without an answer: Esc, or another dialog took its place. Nothing is recorded. */
  private closed(id: string): void {
    if (this.current !== id) return
    this.setAside(id, true)
  }

  private setAside(id: string, tell: boolean): void {
    if (this.current === id) this.current = undefined
    const w = this.waiting.get(id)
    if (!w) return
    w.aside = true
    if (tell) {
      this.screen.toast({ variant: "info", title: `● ${plural(this.waiting.size)} for you`,
        message: `Not answered: it waits until ${w.question.render.form.clock}. ${this.opts.command} brings it back.`,
        duration: 6000 })
    }
    void this.present(false) // one that was never shown comes next
  }

  /** A question ended (answered elsewhere, expired, abandoned): it leaves; its dialog closes, saying how in the
   * daemon's words (read first, so that the line comes before the next dialog's toast). */
  private ended(id: string): void {
    if (!this.waiting.has(id) || this.answering === id) return // our own answer: answer() reports it
    this.track(this.endedNote(id).then((note) => {
      if (!this.waiting.has(id) || this.answering === id) return
      this.waiting.delete(id)
      if (this.current !== id) return this.changed()
      this.tell({ variant: "info", message: note, duration: 5000 })
      return this.moveOn()
    }))
  }

  /** The question in the dialog is done with: the next one's dialog takes its place, or, when none follows, the
   * dialog is taken down. What follows is decided first (the level may take a request to the daemon): a dialog
   * taken down and another opened a moment later would meet the prompt taking the focus back, and its keys. */
  private async moveOn(): Promise<void> {
    this.current = undefined
    this.screen.badge(this.waiting.size)
    await this.present(false)
    if (this.current === undefined) this.screen.hide()
  }

  /** The line for a question's dialog that closed because it ended elsewhere. */
  private async endedNote(id: string): Promise<string> {
    try {
      const r = await this.daemon.question(id, this.prefix)
      const ended = r.status === 200 ? r.body.elicitation.render.ended : undefined
      if (ended) return ended.dialog
    } catch {
      // no daemon to say how: the plugin's own words, that it no longer waits
    }
    return `${id} no longer waits; its dialog is closed.`
  }

  private async answer(q: Question, action: "accept" | "decline" | "cancel",
    body: { form?: Record<string, string | string[]>; reason?: string }): Promise<Outcome> {
    this.answering = q.id
    let outcome: Outcome
    try {
      const r = await this.daemon.answer(q.id, action, q.session, q.render.form.confirm && action === "accept"
        ? { content: q.render.form.confirm } : body)
      if (r.status === 200) outcome = { kind: "answered" }
      else if (r.status === 422) outcome = { kind: "refused", problems: problem(r).fields ?? {}, message: problem(r).message }
      else if (r.status === 409 || r.status === 410) outcome = { kind: "ended", note: `${q.id}: ${problem(r).message}` }
      else outcome = { kind: "failed", message: `mcpx did not take it: ${problem(r).message}` }
    } catch (e) {
      outcome = { kind: "failed", message: e instanceof NoDaemon ? e.message : String((e as Error)?.message ?? e) }
    } finally {
      this.answering = undefined
    }
    if (outcome.kind === "answered" || outcome.kind === "ended") {
      this.waiting.delete(q.id)
      const said = outcome.kind === "answered" ? `${q.render.server} has your answer (${action}).` : outcome.note
      this.tell({ variant: outcome.kind === "answered" ? "success" : "info", message: said, duration: 3000 })
      if (this.current === q.id) await this.moveOn()
      else this.changed()
    }
    return outcome
  }

  /** A line about a dialog that closed: a toast now, and the start of the next dialog's toast if one follows. */
  private tell(toast: Toast): void {
    this.said = { text: toast.message, at: Date.now() }
    this.screen.toast(toast)
  }

  /** Where the person's passkey accepts `q`: its link, which the daemon hands to the person's side only. */
  private async passkeyPage(q: Question): Promise<{ url?: string; line: string }> {
    try {
      const r = await this.daemon.link(q.id)
      if (r.status === 200) return { url: r.body.url, line: `Passkey page: ${r.body.url}` }
      return { line: `No passkey page: ${problem(r).message}` }
    } catch (e) {
      return { line: `No passkey page: ${e instanceof NoDaemon ? e.message : String((e as Error)?.message ?? e)}` }
    }
  }

  private async openPage(q: Question): Promise<string> {
    const url = q.url
    if (!url) return "This question has no page."
    const r = await this.daemon.consent(q.id, true)
    if (r.status !== 200) return `Not opened: ${problem(r).message}`
    return this.screen.openUrl(url)
  }
}

/** A question this dialog can answer: the person's, unless only named approvers' own links answer it (the toast
 * says where its approvals stand; an answer from here would be refused). */
function forDialog(q: Question): boolean {
  return q.audience === "human" && !q.approvals
}
