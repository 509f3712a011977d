// First use: no daemon runs yet when opencode starts (the MCP entry's `mcpx serve` starts one too, but opencode
// starts its MCP servers after its plugins). The plugin starts one as `mcpx serve` does — `mcpx daemon start`,
// detached, so it is nobody's child and outlives opencode — and waits for it to serve, so that its tools and
// dialogs work from the first call.

import { spawn } from "node:child_process"

import { Daemon, NoDaemon } from "../shared/daemon.js"

export type Started = { ok: true; started: boolean } | { ok: false; why: string }

async function up(daemon: Daemon): Promise<boolean> {
  try {
    await daemon.health()
    return true
  } catch (e) {
    if (e instanceof NoDaemon) return false
    throw e
  }
}

/** The daemon `daemon` reaches, started with `mcpx` (a command line: the MCP entry's, without `serve`) if none
 * answers; a daemon elsewhere (MCPX_DAEMON_URL) is never started here. Bounded by `timeoutMs`. */
export async function ensureDaemon(daemon: Daemon, mcpx: string[], timeoutMs = 20_000): Promise<Started> {
  if (await up(daemon)) return { ok: true, started: false }
  if (daemon.where.url) return { ok: false, why: `no daemon answers at ${daemon.describe()} (MCPX_DAEMON_URL: it is not mine to start)` }
  const [command, ...args] = mcpx
  if (!command) return { ok: false, why: "no mcpx command to start a daemon with" }
  const said: string[] = []
  const exited = new Promise<number | null>((resolve) => {
    const child = spawn(command, [...args, "daemon", "start"], { env: daemon.env as NodeJS.ProcessEnv, stdio: ["ignore", "ignore", "pipe"] })
    child.stderr?.on("data", (c: Buffer) => said.push(c.toString("utf8")))
    child.on("error", (e) => {
      said.push(e.message)
      resolve(null)
    })
    child.on("exit", (code) => resolve(code))
  })
  const end = Date.now() + timeoutMs
  // `mcpx daemon start` returns once the daemon serves (or says why it could not); a racing `mcpx serve` may win
  const code = await Promise.race([exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), timeoutMs).unref?.())])
  while (Date.now() < end) {
    if (await up(daemon)) return { ok: true, started: true }
    if (code !== undefined && code !== 0) break
    await new Promise((r) => setTimeout(r, 200))
  }
  if (await up(daemon)) return { ok: true, started: true }
  return { ok: false, why: `\`${mcpx.join(" ")} daemon start\` ${code === null ? "could not run" : `exited ${code ?? "late"}`}: ${said.join("").trim().slice(-500) || "no output"}` }
}
