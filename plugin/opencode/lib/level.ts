// Which level the plugin runs at: MCPX_PLUGIN_ELICIT in opencode's environment, else `plugin.elicit`
// in mcpx's config (the daemon's GET /v1/health says it as `pluginElicit`), else notify.

import { Daemon, type Env } from "./daemon.js"

export const LEVELS = ["off", "notify", "ask", "auto"] as const
export type Level = (typeof LEVELS)[number]
export const DEFAULT_LEVEL: Level = "notify"

export function isLevel(value: unknown): value is Level {
  return typeof value === "string" && (LEVELS as readonly string[]).includes(value)
}

export type Resolved = { level: Level; from: "env" | "config" | "default" }

export class LevelSource {
  private cached: { at: number; value: Resolved } | null = null

  constructor(private readonly daemon: Daemon, private readonly env: Env = process.env, private readonly ttlMs = 5000) {}

  /** The level now; the config's answer is kept a few seconds, so a change there applies without a restart. */
  async get(): Promise<Resolved> {
    const fromEnv = this.env.MCPX_PLUGIN_ELICIT?.trim().toLowerCase()
    if (isLevel(fromEnv)) return { level: fromEnv, from: "env" }
    const now = Date.now()
    if (this.cached && now - this.cached.at < this.ttlMs) return this.cached.value
    let value: Resolved = { level: DEFAULT_LEVEL, from: "default" }
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
