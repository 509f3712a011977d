// A real mcpx daemon for the plugin's tests: `.venv/bin/python -m mcpx daemon` in a temporary MCPX_HOME.

import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

import { Daemon } from "../dist/lib/daemon.js"
import { createHooks } from "../dist/index.js"

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..")
const PYTHON = join(ROOT, ".venv", "bin", "python")

export async function startDaemon(config = { servers: {} }, { listen } = {}) {
  if (!existsSync(PYTHON)) throw new Error(`no ${PYTHON}: run ./dev test (or python3 -m venv .venv && .venv/bin/pip install -e .)`)
  const home = mkdtempSync(join(tmpdir(), "mcpx-plugin-test-"))
  const configPath = join(home, "config.json")
  writeFileSync(configPath, JSON.stringify(config))
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("MCPX_")))
  Object.assign(env, { MCPX_HOME: home, MCPX_CONFIG: configPath, PYTHONUNBUFFERED: "1" })
  const proc = spawn(PYTHON, ["-m", "mcpx", "daemon", ...(listen ? ["--listen", listen] : [])], { env, cwd: home, stdio: ["ignore", "ignore", "pipe"] })
  let stderr = ""
  proc.stderr.on("data", (c) => { stderr += c })
  const exited = new Promise((r) => (proc.exitCode !== null || proc.signalCode !== null ? r() : proc.once("exit", r)))
  // SIGTERM, then SIGKILL if it is still there after 10 s; resolves once it is gone
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM")
    const killer = setTimeout(() => proc.kill("SIGKILL"), 10000)
    await exited
    clearTimeout(killer)
    rmSync(home, { recursive: true, force: true })
  }
  const pluginEnv = { MCPX_HOME: home }
  const client = new Daemon(pluginEnv)
  // as long as a daemon takes to start on a loaded machine: the wait ends as soon as it answers
  const deadline = Date.now() + 60000
  for (;;) {
    try {
      if (proc.exitCode !== null) throw new Error(`the daemon exited ${proc.exitCode}: ${stderr}`)
      await client.health()
      break
    } catch (error) {
      const gone = proc.exitCode !== null
      if (gone || Date.now() > deadline) {
        await stop() // a daemon that did not start is not left running
        throw gone ? error : new Error(`the daemon did not start within 60 s: ${stderr}`)
      }
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  return {
    home, env: pluginEnv, client, configPath,
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

export function hooks(env, options = {}) {
  return createHooks({ directory: process.cwd() }, options, env)
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
