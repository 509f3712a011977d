// mcpx in opencode: wiring only. Each concern lives in lib/: the daemon client, the level, session
// binding, what is appended to tool outputs (notify), and the person's dialogs (ask).
// docs/opencode.md is the design this follows.

import type { Hooks, Plugin, PluginInput, PluginModule, PluginOptions, ToolContext, ToolDefinition, ToolResult } from "@opencode-ai/plugin"

import { Announcer, type ShowToast } from "./lib/server/announce.js"
import { AskFlow, PERMISSION } from "./lib/server/ask.js"
import { CallRunner, upstreamTools, type UpstreamTool } from "./lib/server/calls.js"
import { Daemon, type Env } from "./lib/shared/daemon.js"
import { follow } from "./lib/shared/events.js"
import { ASK_TOOL } from "./lib/shared/generated.js"
import { Host, hostCommand, type SessionReader } from "./lib/shared/host.js"
import { LevelSource, defaultLevel } from "./lib/shared/level.js"
import { Notifier } from "./lib/server/notify.js"
import { prefixToolNames } from "./lib/server/output.js"
import { injectSession, isMcpxTool, sessionOf, shellEnv } from "./lib/shared/session.js"
import { ensureDaemon } from "./lib/server/start.js"
import { TuiPresence } from "./lib/shared/tuilink.js"
import { withholdPersons } from "./lib/server/withhold.js"

export type McpxOptions = {
  /** the name of the opencode MCP entry that runs `mcpx serve` (its tools reach the model as `<entry>_<tool>`) */
  entry?: string
  /** the mcpx command line that starts a daemon when none runs (default: `mcpx` on PATH) */
  mcpx?: string[]
}

/** opencode registers the question tool only for these clients, or when OPENCODE_ENABLE_QUESTION_TOOL is set. */
function questionToolAvailable(env: Env): boolean {
  const flag = (env.OPENCODE_ENABLE_QUESTION_TOOL ?? "").toLowerCase()
  return ["app", "cli", "desktop"].includes(env.OPENCODE_CLIENT ?? "cli") || flag === "1" || flag === "true"
}

/** opencode allows an unknown permission silently unless its rule is "ask": make sure the person is asked.
 * An explicit "deny" stays (nobody is asked, and nothing is recorded); "allow" would record answers nobody gave. */
export function askRule(config: { permission?: unknown }): void {
  const current = config.permission
  if (current !== null && typeof current === "object" && !Array.isArray(current)) {
    const rules = current as Record<string, unknown>
    if (rules[PERMISSION] === "deny") return
    config.permission = { ...rules, [PERMISSION]: "ask" }
  } else {
    config.permission = { ...(typeof current === "string" ? { "*": current } : {}), [PERMISSION]: "ask" }
  }
}

/** A hook that never breaks the person's tool call: the plugin's own trouble goes to opencode's log. */
function guard<A extends unknown[]>(name: string, hook: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await hook(...args)
    } catch (error) {
      console.error(`[mcpx plugin] ${name} failed: ${String((error as Error)?.stack ?? error)}`)
    }
  }
}

/** opencode's toast, through the plugin's client (POST /tui/show-toast: a tui.toast.show event for the TUI). */
function toaster(client: PluginInput["client"] | undefined, durationMs: number): ShowToast {
  return async (toast) => {
    if (!client) return false
    const r = await client.tui.showToast({ body: { ...toast, duration: toast.duration ?? durationMs } })
    return r.data === true
  }
}

/** A session as opencode's client reads it (its rules tell a session `opencode run` made). */
function sessionReader(client: PluginInput["client"] | undefined): SessionReader | undefined {
  if (!client) return undefined
  return async (id) => {
    const r = await client.session.get({ path: { id } })
    if (r.error || !r.data) throw new Error(`opencode did not read session ${id}`)
    return r.data
  }
}

/** One of the servers' tools, as the plugin offers it: the MCP entry's name, description and argument schema. */
function upstreamTool(t: UpstreamTool, calls: CallRunner): ToolDefinition {
  return {
    description: t.description,
    // opencode takes JSON Schema properties as a plugin tool's args when they are not zod types (1.18.33)
    args: (t.inputSchema.properties ?? {}) as any,
    execute: async (args: Record<string, unknown>, ctx: ToolContext): Promise<ToolResult> => {
      try {
        return await calls.run(t, args ?? {}, ctx) // the session goes in the daemon's call body, not in the arguments
      } catch (error) {
        return `mcpx: ${t.server}.${t.tool} could not be run: ${String((error as Error)?.message ?? error)}`
      }
    },
  } as unknown as ToolDefinition
}

/** opencode lets an MCP tool shadow a plugin tool of its name: the MCP entry then offers only mcpx's own tools. */
export function serveOwnToolsOnly(config: { mcp?: Record<string, any> }, entry: string): void {
  const server = config.mcp?.[entry]
  if (!server || typeof server !== "object" || server.type !== "local") return
  server.environment = { ...(server.environment ?? {}), MCPX_SERVE_TOOLS: "mcpx" }
}

/** Close a permission request nobody needs to answer any more. With "once", not "reject": opencode rejects every
 * other pending request of the session with a reject (1.18.33), and another question's dialog closed that way would
 * read as the person's no. The plugin already stopped listening to this one, so what "once" resolves is ignored. */
function dialogCloser(client: PluginInput["client"] | undefined): ((session: string, requestID: string) => Promise<void>) | undefined {
  if (!client) return undefined
  return async (session, requestID) => {
    const r = await client.postSessionIdPermissionsPermissionId({ path: { id: session, permissionID: requestID }, body: { response: "once" } })
    if (r.error) throw new Error(`opencode did not close permission request ${requestID}: ${JSON.stringify(r.error)}`)
  }
}

export type TestSeams = { show?: ShowToast; argv?: readonly string[]; readSession?: SessionReader
  closeDialog?: (session: string, requestID: string) => Promise<void>
  /** the TUI part of this opencode (the link's view of it) */
  tui?: { present: boolean; open: (id: string) => void }
  /** where `opencode run`'s line for the person goes */
  print?: (line: string) => void }

export function createHooks(input: Pick<PluginInput, "directory"> & Partial<PluginInput>, options: McpxOptions = {},
  env: Env = process.env, seams: TestSeams = {}): Hooks & { announcer: Announcer; ready: Promise<void> } {
  const entry = typeof options.entry === "string" && options.entry ? options.entry : "mcpx"
  const daemon = new Daemon(env)
  const prefix = `${entry}_` // opencode names the entry's tools <entry>_<tool>: the daemon's texts name them so
  const command = hostCommand(seams.argv)
  const host = new Host(command, seams.readSession ?? sessionReader(input.client))
  const level = new LevelSource(daemon, env, undefined, defaultLevel(command), host)
  const tui = seams.tui ?? (command === "run" ? undefined : new TuiPresence()) // `opencode run` has no TUI
  const announcer = new Announcer(daemon, prefix, {
    level: async () => (await level.get()).level,
    show: seams.show ?? toaster(input.client, 60_000),
    seen: (session) => host.dialogsSeen(session), // `opencode run` draws no toast: nobody would see it
    tui: () => !!tui?.present,
    // `opencode run` writes its transcript to stdout: the line for the person at that terminal goes to stderr
    print: command === "run" ? seams.print ?? ((line) => process.stderr.write(line + "\n")) : undefined,
  })
  follow(daemon).on((event) => announcer.onEvent(event))
  const notifier = new Notifier(daemon, prefix, (id) => {
    const at = announcer.shownAt(id)
    return at ? { at, how: announcer.shownIn(id) ?? "toast" } : undefined
  }, (id, session) => announcer.inOwnDialog(id, session))
  const ask = new AskFlow(daemon, level, notifier, prefix, {
    questionTool: () => questionToolAvailable(env),
    onDialog: (id) => announcer.markShown(id),
    ended: (id) => announcer.ended(id),
    closeDialog: seams.closeDialog ?? dialogCloser(input.client),
    own: tui && { present: () => tui.present, bring: (id) => tui.open(id), opened: (id, ms) => announcer.inDialog(id, ms) },
  })
  const calls = new CallRunner(daemon, prefix, ask, {
    // the level now, in this session: a config changed to notify, off or auto opens no dialog from then on
    dialogs: async (session) => (await level.in(session)) === "ask",
    inDialog: (q) => announcer.inOwnDialog(q.id, q.session),
    shown: (session, ids) => ids.forEach((id) => ["h", "k"].forEach((k) => notifier.markShown(session, `${k}:${id}`))),
    shownAt: (id) => announcer.shownAt(id),
    shownIn: (id) => announcer.shownIn(id),
  })
  const tools: Record<string, ToolDefinition> = {}
  let offered: UpstreamTool[] = []
  /** At level ask, where a person can see a dialog, the servers' tools are the plugin's own (lib/server/calls.ts). */
  const ready = (async () => {
    if (command === "run") return
    const up = await ensureDaemon(daemon, options.mcpx?.length ? options.mcpx : ["mcpx"])
    if (!up.ok) console.error(`[mcpx plugin] no mcpx daemon, and none could be started: ${up.why}`)
    if ((await level.get()).level !== "ask") return
    offered = await upstreamTools(daemon, entry)
    for (const t of offered) tools[t.name] = upstreamTool(t, calls)
  })().catch((e) => console.error(`[mcpx plugin] listing the servers' tools failed: ${String(e?.message ?? e)}`))

  // opencode takes a plugin tool's args as JSON Schema properties when they are not zod types
  // (1.18.33, ToolRegistry): no zod at run time, so the plugin needs nothing but node itself.
  const askPerson = {
    description: "Put a question that an MCP server behind mcpx asked to the person, in opencode's own dialog: a " +
      "permission dialog for confirmations and sign-in pages, or (it tells you the exact call) opencode's question " +
      "dialog for choices and free text. Use it when a tool output says a question is for the person and tells you " +
      "to; never answer such a question yourself.",
    args: { id: { type: "string", description: "the question's id: elc- and 16 hex digits" } },
    execute: async (args: { id?: unknown }, ctx: ToolContext): Promise<ToolResult> => {
      try {
        return await ask.askPerson(args, ctx)
      } catch (error) {
        return `mcpx: ${ASK_TOOL} failed: ${String((error as Error)?.message ?? error)}; nothing was recorded.`
      }
    },
  } as unknown as ToolDefinition

  Object.assign(tools, { [ASK_TOOL]: askPerson })
  return {
    announcer,
    ready,
    config: guard("config", async (config) => {
      askRule(config as { permission?: unknown })
      await ready
      if (offered.length) serveOwnToolsOnly(config as { mcp?: Record<string, any> }, entry)
    }),
    tool: tools,
    "tool.execute.before": guard("tool.execute.before", async (input, output) => {
      announcer.bind(input.sessionID)
      if (input.tool === "question") ask.beforeQuestionTool(input, output)
      // the plugin's own tools know their session (ctx.sessionID): only the MCP entry's calls carry it as an argument
      else if (!(input.tool in tools)) injectSession(entry, input, output)
    }),
    "shell.env": guard("shell.env", async (input, output) => {
      announcer.bind(input.sessionID)
      shellEnv(input, output)
    }),
    "tool.execute.after": guard("tool.execute.after", async (input, output) => {
      const now = await level.in(input.sessionID)
      if (isMcpxTool(entry, input.tool)) {
        if (now === "off" || now === "auto") withholdPersons(output) // first: what stands in names tools too
        prefixToolNames(output, entry)
      }
      if (input.tool === "question") await ask.afterQuestionTool(input, output)
      await notifier.after(input.sessionID, output, now)
    }),
    event: guard("event", async ({ event }) => {
      // question.* events are not in the v1 Event union the plugin is typed with, but opencode sends them
      const e = event as unknown as { type: string; properties?: any }
      announcer.bind(sessionOf(e))
      ask.onEvent(e)
    }),
  }
}

export const McpxPlugin: Plugin = async (input: PluginInput, options?: PluginOptions) => {
  const { announcer: _announcer, ready, ...hooks } = createHooks(input, (options ?? {}) as McpxOptions)
  await ready // the servers' tools are the plugin's at level ask: listed before opencode reads the hooks
  return hooks // opencode is handed its hooks and nothing else
}

const plugin: PluginModule = { id: "mcpx", server: McpxPlugin }
export default plugin
