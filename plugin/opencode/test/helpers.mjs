// A real mcpx daemon for the plugin's tests, started by the suite's one daemon harness (tests/harness.py): its
// `daemon` command starts one in a temporary MCPX_HOME, prints where it is once it serves, and stops it and removes
// the home when its stdin closes (or it is sent SIGTERM), so it goes with this process however the tests end.

import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

import { Daemon } from "../dist/lib/shared/daemon.js"
import { createHooks } from "../dist/index.js"

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..")
const PYTHON = join(ROOT, ".venv", "bin", "python")
const HARNESS = join(ROOT, "tests", "harness.py")
// the harness gives a daemon 60 s to start (a loaded machine) and 20 s to stop; these bound the harness itself
const START_BOUND_MS = 90000
const STOP_BOUND_MS = 30000

export async function startDaemon(config = { servers: {} }, { listen } = {}) {
  if (!existsSync(PYTHON)) throw new Error(`no ${PYTHON}: run ./dev test (or python3 -m venv .venv && .venv/bin/pip install -e .)`)
  const args = [HARNESS, "daemon", "--config", JSON.stringify(config), ...(listen ? ["--listen", listen] : [])]
  const proc = spawn(PYTHON, args, { stdio: ["pipe", "pipe", "pipe"] })
  let stderr = ""
  proc.stderr.on("data", (c) => { stderr += c })
  proc.stdin.on("error", () => {}) // EPIPE: the harness has gone already, which is what stop() asks of it
  const exited = new Promise((r) => (proc.exitCode !== null || proc.signalCode !== null ? r() : proc.once("exit", r)))
  // closing its stdin is the harness's cue: it stops the daemon, removes the home and exits
  const stop = async () => {
    proc.stdin.end()
    const killer = setTimeout(() => proc.kill("SIGKILL"), STOP_BOUND_MS)
    await exited
    clearTimeout(killer)
  }
  let where
  try {
    where = await new Promise((resolve, reject) => {
      let out = ""
      const timer = setTimeout(() => reject(new Error(`the harness did not start a daemon within ${START_BOUND_MS / 1000} s: ${stderr}`)), START_BOUND_MS)
      proc.stdout.on("data", (c) => {
        out += c
        const end = out.indexOf("\n")
        if (end >= 0) { clearTimeout(timer); resolve(JSON.parse(out.slice(0, end))) }
      })
      exited.then(() => { clearTimeout(timer); reject(new Error(`the harness exited ${proc.exitCode} without a daemon: ${stderr}`)) })
    })
  } catch (error) {
    await stop() // a daemon that did not start is not left running
    throw error
  }
  const home = where.home
  const pluginEnv = { MCPX_HOME: home }
  const client = new Daemon(pluginEnv)
  return {
    home, env: pluginEnv, client, configPath: where.config,
    async ask(body) {
      const r = await client.request("POST", "/v1/elicit", { body: { message: "Which repository?", ...body } })
      if (r.status !== 201) throw new Error(`could not open a question: ${JSON.stringify(r.body)}`)
      return r.body.elicitation
    },
    async get(id) {
      return (await client.question(id)).body
    },
    stop,
  }
}

/** The plugin's hooks, as opencode gets them; no test has the TUI part in its process unless it says so (seams.tui). */
export function hooks(env, options = {}, seams = {}) {
  return createHooks({ directory: process.cwd() }, options, env, { tui: { present: false, open: () => {} }, ...seams })
}

/** opencode's toast, as the plugin's client would show it: each toast kept, taken (or not) as `took` says. */
export function toastCatcher(took = true) {
  const toasts = []
  const waiters = []
  return {
    toasts,
    show: async (toast) => {
      toasts.push({ ...toast, at: Date.now() })
      for (const w of waiters.splice(0)) w()
      return took
    },
    /** the n-th toast (1-based), once it is shown; bounded */
    async nth(n, ms = 20000) {
      const end = Date.now() + ms
      while (toasts.length < n) {
        if (Date.now() > end) throw new Error(`no toast ${n} within ${ms} ms (saw ${toasts.length})`)
        await new Promise((r) => { waiters.push(r); setTimeout(r, 200) })
      }
      return toasts[n - 1]
    },
  }
}

/** A tool output as opencode hands it to tool.execute.after: an MCP tool's raw result, or a built-in's. */
export const mcpOutput = (text, meta) => ({ content: [{ type: "text", text }], ...(meta ? { _meta: meta } : {}) })
export const builtinOutput = (text) => ({ title: "", output: text, metadata: {} })

export function appended(output) {
  return Array.isArray(output.content) ? output.content.slice(1).map((c) => c.text).join("\n") : output.output
}

/** A ToolContext as opencode passes it to a plugin tool; `ask` plays the person's permission dialog. */
export function toolContext(sessionID, ask) {
  const seen = { asked: [], metadata: [] }
  return {
    seen,
    ctx: {
      sessionID, messageID: "msg_test", agent: "build", directory: ROOT, worktree: ROOT,
      abort: new AbortController().signal,
      metadata(input) { seen.metadata.push(input) },
      async ask(input) { seen.asked.push(input); return ask(input) },
    },
  }
}

export const SCHEMAS = {
  repo: { type: "object", properties: { repo: { type: "string", description: "owner/name" } }, required: ["repo"] },
  confirm: { type: "object", properties: { confirm: { type: "boolean", default: false, description: "delete it?" } } },
  color: { type: "object", properties: { color: { type: "string", enum: ["red", "green"] } }, required: ["color"] },
  token: { type: "object", properties: { api_token: { type: "string" } }, required: ["api_token"] },
  issue: {
    type: "object", required: ["title", "count"], properties: {
      title: { type: "string", minLength: 3 }, count: { type: "integer", minimum: 1, maximum: 10 },
      color: { type: "string", enum: ["red", "green"], default: "red" }, notify: { type: "boolean", default: true },
    },
  },
}

/** Wait for `probe` to hold (a state seen through an API, or a value), bounded; its value. */
export async function eventually(probe, what, ms = 20000, everyMs = 25) {
  const end = Date.now() + ms
  for (;;) {
    const v = await probe()
    if (v) return v
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`)
    await new Promise((r) => setTimeout(r, everyMs))
  }
}
