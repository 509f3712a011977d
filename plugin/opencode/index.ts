// mcpx in opencode: wiring only. Each concern lives in lib/: the daemon client, the level, session
// binding, what is appended to tool outputs (notify), and the person's dialogs (ask).
// docs/opencode.md is the design this follows.

import type { Hooks, Plugin, PluginInput, PluginModule, PluginOptions, ToolContext, ToolDefinition, ToolResult } from "@opencode-ai/plugin"

import { AskFlow, PERMISSION } from "./lib/ask.js"
import { Daemon, type Env } from "./lib/daemon.js"
import { LevelSource } from "./lib/level.js"
import { Notifier } from "./lib/notify.js"
import { prefixToolNames } from "./lib/output.js"
import { injectSession, isMcpxTool, shellEnv } from "./lib/session.js"
import { ASK_TOOL } from "./lib/tools.js"

export type McpxOptions = {
  /** the name of the opencode MCP entry that runs `mcpx serve` (its tools reach the model as `<entry>_<tool>`) */
  entry?: string
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

export function createHooks(_input: Pick<PluginInput, "directory"> & Partial<PluginInput>, options: McpxOptions = {},
  env: Env = process.env): Hooks {
  const entry = typeof options.entry === "string" && options.entry ? options.entry : "mcpx"
  const daemon = new Daemon(env)
  const level = new LevelSource(daemon, env)
  const prefix = `${entry}_` // opencode names the entry's tools <entry>_<tool>: the daemon's texts name them so
  const notifier = new Notifier(daemon, prefix)
  const ask = new AskFlow(daemon, level, notifier, prefix, { questionTool: () => questionToolAvailable(env) })

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

  return {
    config: guard("config", async (config) => askRule(config as { permission?: unknown })),
    tool: { [ASK_TOOL]: askPerson },
    "tool.execute.before": guard("tool.execute.before", async (input, output) => {
      if (input.tool === "question") ask.beforeQuestionTool(input, output)
      else injectSession(entry, input, output)
    }),
    "shell.env": guard("shell.env", async (input, output) => shellEnv(input, output)),
    "tool.execute.after": guard("tool.execute.after", async (input, output) => {
      if (isMcpxTool(entry, input.tool)) prefixToolNames(output, entry)
      if (input.tool === "question") await ask.afterQuestionTool(input, output)
      await notifier.after(input.sessionID, output, (await level.get()).level)
    }),
    event: guard("event", async ({ event }) => {
      // question.* events are not in the v1 Event union the plugin is typed with, but opencode sends them
      ask.onEvent(event as unknown as { type: string; properties?: unknown })
    }),
  }
}

export const McpxPlugin: Plugin = async (input: PluginInput, options?: PluginOptions) =>
  createHooks(input, (options ?? {}) as McpxOptions)

const plugin: PluginModule = { id: "mcpx", server: McpxPlugin }
export default plugin
