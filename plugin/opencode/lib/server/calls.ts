// Level ask: the tools of the servers behind mcpx, offered by the plugin itself — the names, schemas and
// descriptions the MCP entry would give them (<entry>_<server>_<tool>) — and run through the daemon's /v1 call
// routes, so that a question the call raises reaches the person inside the very call, with no model step in
// between. Where mcpx's own dialog shows the person's questions (the TUI part of the plugin), the call simply
// waits for their answer there, and its output says what they answered and then the call's real result. Where it
// does not (no TUI part: `opencode serve` with an app), a confirmation or a url-mode question opens opencode's
// permission dialog in the call (ctx.ask), recorded as person:opencode; what a permission dialog cannot carry
// (choices, free text, credentials) ends the call early, as mcpx serve's result would, with the daemon's texts.
// The agent's own questions always end the call early, with the calls that answer them; the call keeps running
// in the daemon.
//
// opencode lets an MCP tool shadow a plugin tool of the same name, so while the plugin offers them the MCP
// entry offers only mcpx's own tools (the config hook sets MCPX_SERVE_TOOLS=mcpx in its environment).

import type { ToolContext } from "@opencode-ai/plugin"

import type { AskFlow } from "./ask.js"
import { Daemon, NoDaemon, problem, type Question, type Reply, type ShownIn } from "../shared/daemon.js"
import { MCPX_TOOL, type CallInputRequired, type ToolsList } from "../shared/generated.js"
import { clip, noDaemonText, resultText } from "./messages.js"

export type UpstreamTool = { name: string; server: string; tool: string; description: string; inputSchema: Record<string, any> }

/** The servers' tools as the MCP entry `entry` would name them, from the daemon (GET /v1/tools); [] without one.
 * Bounded like the MCP entry's own listing, which starts the same servers: a server's first start takes seconds. */
export async function upstreamTools(daemon: Daemon, entry: string, timeoutMs = 15_000): Promise<UpstreamTool[]> {
  let r: Reply<ToolsList>
  try {
    r = await daemon.request<ToolsList>("GET", "/v1/tools", { timeoutMs })
  } catch {
    return []
  }
  if (r.status !== 200 || !r.body?.servers) return []
  const out: UpstreamTool[] = []
  for (const [server, tools] of Object.entries<any>(r.body.servers)) {
    if (!Array.isArray(tools)) continue // a server that could not list its tools: the MCP entry leaves it out too
    for (const t of tools) {
      if (!t || typeof t.name !== "string") continue
      out.push({ name: `${entry}_${server}_${t.name}`, server, tool: t.name, description: String(t.description ?? ""),
        inputSchema: t.inputSchema && typeof t.inputSchema === "object" ? t.inputSchema : { type: "object", properties: {} } })
    }
  }
  return out
}


export type CallOptions = {
  /** true where a person can see a dialog in this session (not `opencode run`) */
  dialogs: (session: string) => Promise<boolean>
  /** mcpx's own dialog puts the question in front of the person (the TUI part runs here, or one attached from
   * elsewhere showed the session's questions) */
  inDialog: (q: Question) => boolean
  /** the person's questions this output puts to the agent with the call that opens their dialog: not again */
  shown: (session: string, ids: string[]) => void
  /** when the person was shown a question in opencode (a toast), if they were */
  shownAt: (id: string) => Date | undefined
  /** and what showed it: the question's own dialog, or a toast */
  shownIn: (id: string) => ShownIn | undefined
  waitS?: number
}

export class CallRunner {
  private readonly waitS: number

  constructor(private readonly daemon: Daemon, private readonly prefix: string, private readonly ask: AskFlow,
    private readonly opts: CallOptions) {
    this.waitS = opts.waitS ?? 30
  }

  /** Run `tool` of `server` for the session of `ctx`, putting the person's confirmations to them on the way. */
  async run(t: UpstreamTool, args: Record<string, unknown>, ctx: ToolContext): Promise<string> {
    try {
      let r = await this.daemon.request("POST", `/v1/call/${encodeURIComponent(t.server)}/${encodeURIComponent(t.tool)}?wait=${this.waitS}`,
        { body: { arguments: args ?? {}, session: ctx.sessionID }, timeoutMs: (this.waitS + 30) * 1000 })
      const said: string[] = [] // what the person answered on the way, for the agent
      const asked = new Set<string>() // the person's questions mcpx's own dialog put to them during this call
      const told = async () => [...said, ...await this.answered([...asked])]
      for (;;) {
        if (r.status === 200 && r.body?.result) return [...await told(), resultText(r.body.result)].join("\n\n")
        if (r.status === 200) return [...await told(), this.ended(r.body)].join("\n\n") // the task document: it failed, or was cancelled
        if (r.status !== 202) return [...await told(), `mcpx: ${t.server}.${t.tool} failed: ${clip(problem(r).message, 1000)}`].join("\n\n")
        const waiting = r.body as CallInputRequired
        const questions = await this.rendered(waiting.elicitations.map((q) => q.id))
        const dialogs = ctx.abort.aborted ? false : await this.opts.dialogs(ctx.sessionID)
        const persons = questions.filter((q) => q.audience === "human")
        const inDialog = dialogs && persons.length === questions.length && persons.length > 0 &&
          persons.every((q) => this.opts.inDialog(q))
        const confirm = questions.find((q) => q.audience === "human" && (q.render.dialog === "confirm" || q.render.dialog === "url"))
        if (inDialog) {
          persons.forEach((q) => asked.add(q.id)) // the call waits while the person answers in mcpx's dialog
        } else if (confirm && dialogs && questions.every((q) => q.audience === "human")) {
          const outcome = await this.ask.confirm(confirm, ctx)
          said.push(outcome.text)
          if (!outcome.recorded) return [...await told(), this.early(waiting.task, questions, ctx.sessionID, false)].join("\n\n")
        } else if (waiting.status === "input-required" && questions.length) {
          return [...await told(), this.early(waiting.task, questions, ctx.sessionID, dialogs)].join("\n\n")
        }
        if (ctx.abort.aborted) return [...await told(), this.later(waiting.task, questions)].join("\n\n")
        r = await this.daemon.request("GET", `/v1/tasks/${encodeURIComponent(waiting.task)}/result?wake=question&timeout=${this.waitS}`,
          { timeoutMs: (this.waitS + 30) * 1000 })
      }
    } catch (e) {
      if (e instanceof NoDaemon) return noDaemonText(this.daemon.describe())
      throw e
    }
  }

  /** What became of the questions the person was asked in mcpx's dialog, in the daemon's words: when they were
   * shown it (as the daemon recorded it), and how it ended. */
  private async answered(ids: string[]): Promise<string[]> {
    const out: string[] = []
    for (const id of ids) {
      const r = await this.daemon.question(id, this.prefix, { shownAt: this.opts.shownAt(id), shownIn: this.opts.shownIn(id) })
      if (r.status === 200) out.push(r.body.elicitation.render.asked)
    }
    return out
  }

  private async rendered(ids: string[]): Promise<Question[]> {
    const out: Question[] = []
    for (const id of ids) {
      const r = await this.daemon.question(id, this.prefix, { shownAt: this.opts.shownAt(id), shownIn: this.opts.shownIn(id) })
      if (r.status === 200 && r.body.elicitation.state === "pending") out.push(r.body.elicitation)
    }
    return out
  }

  /** The call waits for what cannot be asked here: the daemon's early result, with each question as it renders it
   * for the agent. */
  private early(task: string, questions: Question[], session: string, dialogs: boolean): string {
    this.opts.shown(session, questions.filter((q) => q.audience === "human").map((q) => q.id))
    // the person's: at ask, the call that opens their dialog (choices, free text) — where a dialog can be seen
    const texts = questions.map((q) => (q.audience === "human" ? q.render.person![dialogs ? "ask" : "notify"] : q.render.agent!.ask))
    return [questions[0]?.render.callWaits, ...texts, this.later(task, questions)].filter((t) => t).join("\n\n")
  }

  /** How to collect the call's result later, in the daemon's words (any of its questions renders them). */
  private later(task: string, questions: Question[]): string {
    return questions[0]?.render.collectLater ??
      // the call asked nothing yet: no question to render it, so the plainest words that name the call
      `Collect the call's result later with ${this.prefix}${MCPX_TOOL.taskResult} ${JSON.stringify({ task, wait: true })}.`
  }

  private ended(doc: any): string {
    return `mcpx: the call ${String(doc?.state ?? "ended")}: ${clip(doc?.error ?? "", 1000)}`
  }
}
