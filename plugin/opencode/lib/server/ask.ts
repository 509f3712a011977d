// Level ask: the person's questions put to them in opencode's own dialogs, their replies recorded as
// person:opencode. A dialog can open only inside a tool the plugin defines (ctx.ask), and the
// question dialog only by the model's call, so the person is asked at the agent's next step:
//   confirmations and url-mode questions — the permission dialog, opened by mcpx_ask_person;
//   choices and free text — the `question` tool, whose exact call mcpx_ask_person returns; the reply
//   is taken from opencode's question.replied event (never from text the agent wrote);
//   credentials — no dialog: a terminal.
// What each dialog shows, and the content a reply stands for, is the daemon's (Question.render); the
// person's replies to the question dialog go back as they are, and the daemon types them.

import type { ToolContext } from "@opencode-ai/plugin"

import { Daemon, NoDaemon, problem, type Answer, type Question, type QuestionPrompt, type Reply } from "../shared/daemon.js"
import { isQuestionId, markedId } from "./ids.js"
import type { LevelSource } from "../shared/level.js"
import { clip, noDaemonText, resultText } from "./messages.js"
import type { Notifier } from "./notify.js"
import { append } from "./output.js"

export const PERMISSION = "mcpx_elicit"

type Dialog = { id: string; session: string; question: Question; prompts: QuestionPrompt[]; callID?: string; requestID?: string }
export type Outcome = { text: string; question?: Question; recorded: boolean }

export type Rejection = { kind: "rejected"; feedback?: string } | { kind: "denied"; message: string } | { kind: "other"; message: string }

/** What ctx.ask threw: the person's reject (with their words, if any), a config rule, or something else. */
export function readRejection(error: unknown): Rejection {
  const e = error as any
  const tag = String(e?._tag ?? e?.name ?? "")
  const message = String(e?.message ?? error)
  if (/Denied/.test(tag) || /specified a rule which prevents/.test(message)) return { kind: "denied", message }
  const feedback = typeof e?.feedback === "string" ? e.feedback : /with the following feedback: ([\s\S]*)$/.exec(message)?.[1]
  if (/Corrected/.test(tag) || feedback !== undefined) return { kind: "rejected", feedback: feedback?.trim() || undefined }
  if (/Rejected/.test(tag) || /rejected permission/.test(message)) return { kind: "rejected" }
  return { kind: "other", message }
}

/** opencode serialises permission metadata strictly: an `undefined` in it breaks GET /permission for everyone. */
function jsonSafe<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T
}

async function until<T>(get: () => T | undefined, ms: number): Promise<T | undefined> {
  const end = Date.now() + ms
  for (;;) {
    const v = get()
    if (v !== undefined || Date.now() >= end) return v
    await new Promise((r) => setTimeout(r, 25))
  }
}

export type AskOptions = { resultWaitS?: number; replyWaitMs?: number; questionTool?: () => boolean
  /** a permission dialog opened for question `id`: the person is shown it now */
  onDialog?: (id: string) => void
  /** question `id` ended (answered elsewhere, expired, abandoned), as the daemon's stream tells it */
  ended?: (id: string) => { ended: Promise<string>; stop: () => void }
  /** close opencode's permission request `requestID` of `session` (a question answered elsewhere) */
  closeDialog?: (session: string, requestID: string) => Promise<void>
  /** mcpx's own dialog (the TUI part of the plugin): whether it runs here, bringing a question in front of the person
   * there, and when its dialog opened (waiting up to `ms`) */
  own?: { present: () => boolean; bring: (id: string) => void; opened: (id: string, ms: number) => Promise<Date | undefined> } }

export class AskFlow {
  private dialogs = new Map<string, Dialog>()
  private byRequest = new Map<string, string>()
  private byCall = new Map<string, string>()
  private outcomes = new Map<string, Promise<Outcome>>()
  private readonly resultWaitS: number
  private readonly replyWaitMs: number
  private readonly questionTool: () => boolean
  private readonly onDialog?: (id: string) => void
  private readonly opts: AskOptions
  private permissions = new Map<string, { requestID: string; session: string }>() // question id → its open dialog

  /** `prefix`: what the MCP entry puts before mcpx's tool names, for the daemon's rendering. */
  constructor(private readonly daemon: Daemon, private readonly level: LevelSource, private readonly notifier: Notifier,
    private readonly prefix: string, options: AskOptions = {}) {
    this.resultWaitS = options.resultWaitS ?? 40
    this.replyWaitMs = options.replyWaitMs ?? 10_000
    this.questionTool = options.questionTool ?? (() => true)
    this.onDialog = options.onDialog
    this.opts = options
  }

  // ---- the plugin's tool: mcpx_ask_person {id}

  async askPerson(args: { id?: unknown }, ctx: ToolContext): Promise<string> {
    const id = typeof args?.id === "string" ? args.id.trim() : ""
    if (!isQuestionId(id)) return `mcpx: ${JSON.stringify(args?.id ?? null)} is not a question id (elc- and 16 hex digits).`
    let reply: Reply<{ elicitation: Question; answer: Answer | null }>
    try {
      reply = await this.daemon.question(id, this.prefix)
    } catch (e) {
      if (e instanceof NoDaemon) return noDaemonText(this.daemon.describe())
      throw e
    }
    if (reply.status !== 200) return `mcpx: ${problem(reply).message || `no question ${id}`}`
    const q = reply.body.elicitation
    const r = q.render
    if (q.session !== ctx.sessionID) return `mcpx: ${id} belongs to another session; a question is put to the person only in the session that raised it.`
    if (q.state !== "pending") return `mcpx: ${r.status} Nothing to ask.`
    const level = await this.level.in(ctx.sessionID)
    if (level === "notify" && (await this.level.get()).level === "ask") return r.askPerson.noDialog
    if (level !== "ask") {
      return `mcpx: the plugin opens dialogs for the person only at level ask (now ${level}), so ${id} was not ` +
        `put to them. ${r.waits}`
    }
    const own = this.opts.own
    if (own?.present()) {
      // mcpx's own dialog shows every kind of question, a credential too (its value goes to the daemon alone)
      own.bring(id)
      const at = await own.opened(id, 5000)
      if (!at) {
        return `mcpx: the dialog for ${id} did not open within 5 s (another dialog may be in front of the person); it ` +
          `stays open for them. ${r.waits}`
      }
      // rendered again with the moment it opened, which the daemon's words then give
      const since = (await this.daemon.question(id, this.prefix, { shownAt: at, shownIn: "dialog" })).body?.elicitation?.render
      return (since ?? r).askPerson.inFront
    }
    if (r.dialog === "terminal") return (r.person ?? r.agent)!.notify // a credential: always the person's
    if (r.dialog === "question") {
      if (!this.questionTool()) return r.askPerson.noQuestionTool!
      this.dialogs.set(id, { id, session: q.session, question: q, prompts: r.questions ?? [] })
      return r.askPerson.questionCall!
    }
    return this.permissionDialog(q, ctx)
  }

  private async permissionDialog(q: Question, ctx: ToolContext): Promise<string> {
    const outcome = await this.confirm(q, ctx)
    return outcome.text + (outcome.question ? "\n\n" + await this.resultFor(outcome.question, ctx.abort) : "")
  }

  /** Put a confirmation or a url-mode question to the person in opencode's permission dialog, in the tool call
   * `ctx` belongs to, and record their reply as person:opencode; what came of it, for the agent. */
  async confirm(q: Question, ctx: ToolContext): Promise<Outcome> {
    const p = q.render.permission
    if (!p) return { text: `mcpx: the daemon gave no permission dialog for ${q.id}; nothing was recorded.`, recorded: false }
    ctx.metadata(jsonSafe({ title: p.title, metadata: { question: q.id, server: q.server, tool: q.tool, url: q.url } }))
    let action: "accept" | "decline" = "accept"
    let reason: string | undefined
    const elsewhere = this.opts.ended?.(q.id)
    try {
      const asked = ctx.ask({
        permission: PERMISSION,
        patterns: [p.pattern],
        always: [],
        // for an app that draws them (opencode 1.18.33's TUI draws neither): the server's words, why it is the
        // person's, what Allow answers, the page and the deadline
        metadata: jsonSafe({ id: q.id, server: q.server, tool: q.tool, title: p.title, message: p.message, url: q.url,
          fields: p.fields, why: q.render.form.why, allow: q.render.form.acceptMeans, expiresAt: q.expiresAt }),
      })
      this.onDialog?.(q.id) // the person sees it now
      const ended = elsewhere ? elsewhere.ended.then((kind) => ({ kind })) : new Promise<never>(() => {})
      const first = await Promise.race([asked.then(() => undefined), ended])
      if (first) {
        // answered from a terminal, expired, abandoned while the dialog was open: it is closed, and nothing recorded
        asked.catch(() => {})
        await this.close(q.id)
        return { text: `${q.id} ended while its dialog was open (${first.kind.replace("elicit.", "")} elsewhere); the dialog ` +
          "was closed and nothing was recorded from it.", question: q.task ? q : undefined, recorded: true }
      }
    } catch (error) {
      if (ctx.abort?.aborted) {
        // the session was interrupted: opencode rejected its pending dialogs, the person answered nothing
        return { text: `The call was interrupted while ${q.id}'s dialog was open; nothing was recorded.`, recorded: false }
      }
      const rejection = readRejection(error)
      if (rejection.kind === "denied") {
        return { text: `mcpx: a permission rule in opencode's config denies ${PERMISSION}, so nobody was asked and ${q.id} is not answered. ` +
          q.render.waits, recorded: false }
      }
      if (rejection.kind === "other") {
        return { text: `mcpx: the dialog for ${q.id} ended without an answer (${clip(rejection.message, 300)}); nothing was recorded.`, recorded: false }
      }
      action = "decline"
      reason = rejection.feedback
    } finally {
      elsewhere?.stop()
      this.permissions.delete(q.id)
    }
    const content = action === "accept" ? p.content ?? undefined : undefined // a lone yes/no is answered yes
    const said = action === "accept" ? "allowed it" : reason ? `rejected it, saying “${clip(reason, 500)}”` : "rejected it"
    return this.record(q, action, { content, reason }, `The person ${said} in opencode's permission dialog`)
  }

  /** POST the person's answer; the text that tells the agent what came of it. */
  private async record(q: Question, action: "accept" | "decline" | "cancel",
    body: { content?: Record<string, unknown>; reason?: string; replies?: string[][] }, said: string): Promise<Outcome> {
    let r: Reply
    try {
      r = await this.daemon.answer(q.id, action, q.session, body)
    } catch (e) {
      if (e instanceof NoDaemon) return { text: `${said}, but ${noDaemonText(this.daemon.describe())}`, recorded: false }
      throw e
    }
    if (r.status === 200) {
      const recorded = `${said}: recorded for ${q.id} as ${action} by person:opencode; ${q.render.server} received it.`
      return { text: recorded, question: q.task ? q : undefined, recorded: true }
    }
    const p = problem(r)
    if (r.status === 422) {
      this.notifier.forget(q.session, q.id)
      const fields = Object.entries(p.fields ?? {}).map(([k, v]) => `${k}: ${v}`).join("; ")
      return { text: `${said}, but the answer did not fit ${q.id} (${fields || clip(p.message, 500)}). It is still open: ` +
        `call ${q.render.askCall} to ask the person again.`, recorded: false }
    }
    return { text: `${said}, but mcpx did not take it: ${clip(p.message, 500)}`, recorded: false }
  }

  /** The real result of the call that asked `q`, waited for a while (the person answered; the server goes on). */
  private async resultFor(q: Question, abort?: AbortSignal): Promise<string> {
    const task = q.task!
    const stop = new Promise<null>((resolve) => abort?.addEventListener("abort", () => resolve(null), { once: true }))
    let r: Reply | null
    try {
      r = await Promise.race([this.daemon.taskResult(task, this.resultWaitS), stop])
    } catch (e) {
      if (e instanceof NoDaemon) return noDaemonText(this.daemon.describe())
      throw e
    }
    const collect = q.render.collect
    if (r === null) return `Collect the call's result later with ${collect}.`
    if (r.status === 200) {
      const doc = r.body ?? {}
      if (doc.state === "completed") return `The call finished (${task}); its result:\n${resultText(doc.result)}`
      return `The call ended ${clip(doc.state ?? "?", 50)} (${task})` + (doc.error ? `: ${clip(doc.error, 500)}` : ".")
    }
    if (r.status === 202) {
      const ids = (r.body?.elicitations ?? []).map((e: any) => e.id).filter(Boolean)
      return ids.length ? `The call goes on and now waits for another answer (${ids.join(", ")}); see below.`
        : `The call is still running; collect its result with ${collect}.`
    }
    return `mcpx: the result of ${task} could not be read: ${clip(problem(r).message, 300)}`
  }

  // ---- the question dialog: opencode's built-in `question` tool, and its events

  /** tool.execute.before for `question`: the dialog shows mcpx's rendering, whatever the agent wrote. */
  beforeQuestionTool(input: { sessionID: string; callID: string }, output: { args: any }): void {
    const id = markedId(output.args?.questions)
    const d = id ? this.dialogs.get(id) : undefined
    if (!d || d.session !== input.sessionID) return
    output.args.questions = d.prompts.map((p) => ({ ...p, options: p.options.map((o) => ({ ...o })) }))
    d.callID = input.callID
    this.byCall.set(input.callID, d.id)
  }

  private async close(id: string): Promise<void> {
    const open = this.permissions.get(id)
    if (!open || !this.opts.closeDialog) return
    try {
      await this.opts.closeDialog(open.session, open.requestID)
    } catch (e) {
      console.error(`[mcpx plugin] closing the dialog of ${id} failed: ${String((e as Error)?.message ?? e)}`)
    }
  }

  /** The `event` hook: question.asked ties opencode's request to the question; replied/rejected answer it;
   * permission.asked names the permission dialog of a question (to close it if it is answered elsewhere). */
  onEvent(event: { type: string; properties?: any }): void {
    const p = event.properties ?? {}
    if (event.type === "permission.asked" && p.permission === PERMISSION && isQuestionId(String(p.metadata?.id ?? ""))) {
      this.permissions.set(p.metadata.id, { requestID: String(p.id), session: String(p.sessionID) })
      return
    }
    if (event.type === "question.asked") {
      const id = (p.tool?.callID && this.byCall.get(p.tool.callID)) || markedId(p.questions)
      const d = id ? this.dialogs.get(id) : undefined
      if (!d || d.session !== p.sessionID || typeof p.id !== "string") return
      d.requestID = p.id
      this.byRequest.set(p.id, d.id)
      if (p.tool?.callID && !d.callID) {
        d.callID = p.tool.callID
        this.byCall.set(p.tool.callID, d.id)
      }
      return
    }
    if (event.type !== "question.replied" && event.type !== "question.rejected") return
    const id = this.byRequest.get(p.requestID)
    const d = id ? this.dialogs.get(id) : undefined
    if (!d || d.session !== p.sessionID) return
    this.byRequest.delete(p.requestID)
    this.dialogs.delete(d.id)
    const outcome = event.type === "question.replied" && Array.isArray(p.answers)
      ? this.recordReply(d, p.answers)
      : this.record(d.question, "cancel", { reason: "the person dismissed opencode's question dialog" },
        "The person dismissed the question dialog")
    const guarded = outcome.catch((e): Outcome => ({ text: `mcpx: recording the person's reply failed: ${String(e?.message ?? e)}`, recorded: false }))
    this.outcomes.set(d.id, guarded)
    if (!d.callID) void guarded.then((o) => this.notifier.notice(d.session, o.text)) // no question call to report in
  }

  private recordReply(d: Dialog, answers: unknown[]): Promise<Outcome> {
    const replies = answers.map((a) => (Array.isArray(a) ? a.map(String) : a == null ? [] : [String(a)]))
    return this.record(d.question, "accept", { replies }, "The person answered in opencode's question dialog")
  }

  /** tool.execute.after for `question`: what came of the person's reply, and the call's result. */
  async afterQuestionTool(input: { callID: string }, output: any): Promise<void> {
    const id = this.byCall.get(input.callID)
    if (!id) return
    this.byCall.delete(input.callID)
    await until(() => (this.outcomes.has(id) ? true : undefined), this.replyWaitMs)
    let outcome = this.outcomes.get(id)
    if (!outcome) {
      // the replied event did not reach the plugin in time: opencode's own record of the reply, in the tool's metadata
      const d = this.dialogs.get(id)
      const answers = output?.metadata?.answers
      if (d && Array.isArray(answers)) {
        this.dialogs.delete(id)
        outcome = this.recordReply(d, answers)
      }
    }
    if (!outcome) return
    this.outcomes.delete(id)
    const o = await outcome
    append(output, "[mcpx plugin] " + o.text + (o.question ? "\n\n" + await this.resultFor(o.question) : ""))
  }
}
