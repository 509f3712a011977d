// The mcpx daemon's /v1 API, over its unix socket (or MCPX_DAEMON_URL with the bearer token), with
// node:http alone. The plugin starts nothing: when no daemon answers, requests fail with NoDaemon.

import { readFileSync } from "node:fs"
import { request as httpRequest, type ClientRequest, type RequestOptions } from "node:http"
import { request as httpsRequest } from "node:https"
import { homedir } from "node:os"
import { join } from "node:path"

import { HEADERS, type Answer as WireAnswer, type ElicitationList, type Health, type ShownBody, type DialogForm as WireDialogForm, type FormField as WireFormField,
  type QuestionPrompt as WireQuestionPrompt, type RenderedElicitation, type Rendering, type Texts as WireTexts } from "./generated.js"

export type Env = Record<string, string | undefined>

export const ANSWERER = "person:opencode"

function expand(path: string): string {
  return path === "~" || path.startsWith("~/") ? join(homedir(), path.slice(1)) : path
}

/** mcpx's state directory: $MCPX_HOME, else $XDG_STATE_HOME/mcpx, else ~/.local/state/mcpx. */
export function stateDir(env: Env = process.env): string {
  if (env.MCPX_HOME) return expand(env.MCPX_HOME)
  if (env.XDG_STATE_HOME) return join(expand(env.XDG_STATE_HOME), "mcpx")
  return join(homedir(), ".local", "state", "mcpx")
}

export type Where = { socket: string; url?: undefined } | { url: URL; socket?: undefined }

export function locate(env: Env = process.env): Where {
  if (env.MCPX_DAEMON_URL) return { url: new URL(env.MCPX_DAEMON_URL) }
  return { socket: join(stateDir(env), "daemon.sock") }
}

/** No daemon answers where the plugin looks for one. */
export class NoDaemon extends Error {
  constructor(readonly where: string, readonly why: string) {
    super(`no mcpx daemon answers at ${where} (${why})`)
    this.name = "NoDaemon"
  }
}

export type Reply<T = any> = { status: number; body: T }

/** A refusal from the daemon: {error: {code, message, fields?}}. */
export function problem(reply: Reply): { code: string; message: string; fields?: Record<string, string> } {
  const err = reply.body?.error
  if (err && typeof err === "object") return { code: String(err.code ?? reply.status), message: String(err.message ?? ""), fields: err.fields }
  return { code: String(reply.status), message: typeof reply.body === "string" ? reply.body : JSON.stringify(reply.body) }
}

/** A question's rendering: every text, call and dialog the plugin shows, as the daemon renders it
 * (sidecar/mcpx/presentation/rendering.py and dialogs.py). The plugin shows these as given. The shapes are the daemon's own
 * (lib/shared/generated.ts, from /v1/openapi.json). */
export type Render = Rendering
export type Texts = WireTexts
export type DialogKind = Rendering["dialog"] // confirm and url: the permission dialog; question: the question dialog; terminal: none (credentials)
export type QuestionPrompt = WireQuestionPrompt
/** One field of a question's own dialog (render.form): its kind, words, hint, choices and start value are the
 * daemon's (sidecar/mcpx/presentation/dialog_form.py); the dialog sends back entries (text, choice tokens, "true"/"false"). */
export type FormField = WireFormField
/** A question as its own dialog draws it (render.form). */
export type DialogForm = WireDialogForm
/** A question as the plugin reads it: always asked for with its rendering (?render=true). */
export type Question = RenderedElicitation & { render: Rendering }

function rendered(prefix: string): string {
  return `render=true&toolPrefix=${encodeURIComponent(prefix)}`
}

export type ShownIn = ShownBody["how"]

export type Answer = WireAnswer

export class Daemon {
  readonly where: Where

  constructor(readonly env: Env = process.env) {
    this.where = locate(env)
  }

  describe(): string {
    return this.where.socket !== undefined ? this.where.socket : this.where.url.toString()
  }

  private token(): string | undefined {
    if (this.env.MCPX_TOKEN) return this.env.MCPX_TOKEN
    try {
      return readFileSync(join(stateDir(this.env), "token"), "utf8").trim() || undefined
    } catch {
      return undefined
    }
  }

  /** How a request to `path` reaches the daemon: its unix socket, or its URL with the bearer token. */
  private target(method: string, path: string, headers: Record<string, string>): { options: RequestOptions; send: typeof httpRequest } {
    if (this.where.socket !== undefined) {
      return { options: { socketPath: this.where.socket, path, method, headers: { ...headers, Host: "mcpx" } }, send: httpRequest }
    }
    const url = new URL(path, this.where.url)
    const token = this.token()
    if (token) headers.Authorization = `Bearer ${token}`
    return {
      options: { protocol: url.protocol, hostname: url.hostname, port: url.port, path: url.pathname + url.search, method, headers },
      send: url.protocol === "https:" ? httpsRequest : httpRequest,
    }
  }

  request<T = any>(method: string, path: string, opts: { body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<Reply<T>> {
    const payload = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body))
    const headers: Record<string, string> = { Accept: "application/json", ...(opts.headers ?? {}) }
    if (payload) {
      headers["Content-Type"] = "application/json"
      headers["Content-Length"] = String(payload.length)
    }
    const { options, send } = this.target(method, path, headers)
    const where = this.describe()
    const timeoutMs = opts.timeoutMs ?? 5000
    return new Promise((resolve, reject) => {
      const req = send(options, (res) => {
        const chunks: Buffer[] = []
        res.on("data", (c: Buffer) => chunks.push(c))
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8")
          let body: any = text
          try {
            body = text ? JSON.parse(text) : null
          } catch {
            // not JSON: keep the text, the caller shows it
          }
          resolve({ status: res.statusCode ?? 0, body })
        })
        res.on("error", (e) => reject(new NoDaemon(where, e.message)))
      })
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`no reply within ${Math.round(timeoutMs / 1000)} s`)))
      req.on("error", (e: NodeJS.ErrnoException) => reject(new NoDaemon(where, e.code ?? e.message)))
      if (payload) req.write(payload)
      req.end()
    })
  }

  async health(): Promise<Health> {
    const r = await this.request<Health>("GET", "/v1/health", { timeoutMs: 3000 })
    if (r.status !== 200) throw new NoDaemon(this.describe(), `health answered ${r.status}`)
    return r.body
  }

  /** The session's pending questions, rendered with `prefix` before mcpx's tool names (the MCP entry's, and _). */
  async pending(session: string, prefix = ""): Promise<Question[]> {
    const r = await this.request<ElicitationList>("GET", `/v1/elicit?session=${encodeURIComponent(session)}&state=pending&${rendered(prefix)}`)
    if (r.status !== 200) throw new Error(`it answered ${r.status}: ${problem(r).message}`)
    return (r.body.elicitations ?? []) as Question[] // asked with render=true: each has its rendering
  }

  /** One question, rendered; `where`: how many of the person's questions wait (the toast counts them) and when the
   * plugin showed it to the person, if it did (the texts for the agent say so). */
  question(id: string, prefix = "", where: { waiting?: number; shownAt?: Date; shownIn?: ShownIn } = {}): Promise<Reply<{ elicitation: Question; answer: Answer | null }>> {
    const extra = (where.waiting ? `&waiting=${where.waiting}` : "") +
      (where.shownAt ? `&shownAt=${encodeURIComponent(where.shownAt.toISOString())}` : "") +
      (where.shownAt && where.shownIn ? `&shownIn=${where.shownIn}` : "")
    return this.request("GET", `/v1/elicit/${encodeURIComponent(id)}?${rendered(prefix)}${extra}`)
  }

  /** A long-lived GET (the event stream): `onData` gets its text as it comes; the request is returned to end it. */
  stream(path: string, headers: Record<string, string>, on: { response: (status: number) => void; data: (text: string) => void;
    end: (why: string) => void }, idleMs: number): ClientRequest {
    const { options, send } = this.target("GET", path, { Accept: "text/event-stream", ...headers })
    let ended = false
    let responded = false
    const end = (why: string) => {
      if (!ended) {
        ended = true
        on.end(why)
      }
    }
    const req = send(options, (res) => {
      responded = true
      on.response(res.statusCode ?? 0)
      res.setEncoding("utf8")
      res.on("data", (text: string) => on.data(text))
      res.on("end", () => end("the stream ended"))
      res.on("error", (e) => end(e.message))
      res.on("close", () => end("closed"))
    })
    // a stream that says nothing for longer than the daemon's heartbeat is dead (a network gone quiet): end it
    req.setTimeout(idleMs, () => req.destroy(new Error(`nothing for ${Math.round(idleMs / 1000)} s`)))
    req.on("error", (e: NodeJS.ErrnoException) => end(e.code ?? e.message))
    // Once the response has begun, the stream ends with it. Bun, opencode's runtime, closes the request as soon
    // as the response's headers are in, while the response streams on: taken as the end, that had the follower
    // open another stream every 250 ms and leave the last one open, until Bun's 256 connections were all the
    // daemon's event streams and opencode's request to its model waited for one forever
    req.on("close", () => {
      if (!responded) end("closed")
    })
    // the stream must never keep opencode running (`opencode run` ends when its work is done)
    req.on("socket", (socket) => socket.unref())
    req.end()
    return req
  }

  /** Record the person's answer, as person:opencode, from the session it belongs to. `replies`: what they
   * picked or typed in each prompt of the question dialog; `form`: the entries of the question's own dialog; the
   * daemon turns either into content. */
  answer(id: string, action: "accept" | "decline" | "cancel", session: string,
    body: { content?: Record<string, unknown>; reason?: string; replies?: string[][]; form?: Record<string, string | string[]> } = {}): Promise<Reply> {
    return this.request("POST", `/v1/elicit/${encodeURIComponent(id)}/${action}`, {
      body, headers: { [HEADERS.answerer]: ANSWERER, [HEADERS.session]: session },
    })
  }

  /** Say the question is in front of the person now (elicit.shown, audited): its dialog opened in opencode. */
  shown(id: string, how: ShownIn = "dialog"): Promise<Reply> {
    return this.request("POST", `/v1/elicit/${encodeURIComponent(id)}/shown`, {
      body: { where: "opencode", how }, headers: { [HEADERS.answerer]: ANSWERER },
    })
  }

  /** The person's yes or no to opening a url-mode question's page (elicit.consent, audited). */
  consent(id: string, open: boolean): Promise<Reply> {
    return this.request("POST", `/v1/elicit/${encodeURIComponent(id)}/consent`, {
      body: { open }, headers: { [HEADERS.answerer]: ANSWERER },
    })
  }

  /** A question's link, which opens its page (for one that needs presence: where the person's passkey signs). The
   * daemon hands it only to a process outside an agent's shell, as it takes the person's answers. */
  link(id: string): Promise<Reply<{ url: string }>> {
    return this.request("GET", `/v1/elicit/${encodeURIComponent(id)}/link`)
  }

  /** A call's real result, waiting up to `seconds` for it: 200 when it finished, 202 while it runs or asks again. */
  taskResult(task: string, seconds: number): Promise<Reply> {
    return this.request("GET", `/v1/tasks/${encodeURIComponent(task)}/result?timeout=${seconds}`, { timeoutMs: (seconds + 10) * 1000 })
  }
}
