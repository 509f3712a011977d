// Which level the plugin runs at: MCPX_PLUGIN_ELICIT in opencode's environment, else `plugin.elicit`
// in mcpx's config (the daemon's GET /v1/health says it as `pluginElicit`), else by what opencode runs:
// ask where a person sits at a TUI or app, notify under `opencode run`, where nobody can see a dialog.

import { Daemon, type Env } from "./daemon.js"
import { LEVELS } from "./generated.js"
import type { Host } from "./host.js"

export { LEVELS }
export type Level = (typeof LEVELS)[number]
/** The level when none is set: ask in a TUI or app (or `opencode serve`), notify under `opencode run`. */
export function defaultLevel(command: "run" | "serve" | "tui"): Level {
  return command === "run" ? "notify" : "ask"
}

export function isLevel(value: unknown): value is Level {
  return typeof value === "string" && (LEVELS as readonly string[]).includes(value)
}

export type Resolved = { level: Level; from: "env" | "config" | "default" }

export class LevelSource {
  private cached: { at: number; value: Resolved } | null = null

  constructor(private readonly daemon: Daemon, private readonly env: Env = process.env, private readonly ttlMs = 5000,
    private readonly fallback: Level = "notify", private readonly host?: Host) {}

  /** The level in one session: no dialog opens where nobody can see it (`opencode run`, or a session it made), so
   * ask is notify there — the question stays open and is announced, and no answer is recorded that nobody gave. */
  async in(session: string): Promise<Level> {
    const { level } = await this.get()
    if (level === "ask" && this.host && !(await this.host.dialogsSeen(session))) return "notify"
    return level
  }

  /** The level now; the config's answer is kept a few seconds, so a change there applies without a restart. */
  async get(): Promise<Resolved> {
    const fromEnv = this.env.MCPX_PLUGIN_ELICIT?.trim().toLowerCase()
    if (isLevel(fromEnv)) return { level: fromEnv, from: "env" }
    const now = Date.now()
    if (this.cached && now - this.cached.at < this.ttlMs) return this.cached.value
    let value: Resolved = { level: this.fallback, from: "default" }
    try {
      const health = await this.daemon.health()
      if (isLevel(health.pluginElicit)) value = { level: health.pluginElicit, from: "config" }
    } catch {
      // no daemon: the default; the tool output says the daemon is missing
    }
    this.cached = { at: now, value }
    return value
  }
}
