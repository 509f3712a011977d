// Written by `mcpx opencode install`: mcpx's opencode plugin (its TUI part: mcpx's own dialog for the person's
// questions), from the mcpx on this machine's PATH (or $MCPX_BIN). It names no path of any machine, so it can be
// committed; `mcpx opencode install --uninstall` removes it.
import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { pathToFileURL } from "node:url"

let plugin
try {
  const dir = execFileSync(process.env.MCPX_BIN || "mcpx", ["opencode", "plugin-dir"], { encoding: "utf8", timeout: 30000 })
  plugin = (await import(pathToFileURL(join(dir.trim(), "tui.js")).href)).default
} catch (error) {
  const why = `mcpx's plugin did not load: ${String(error?.message ?? error).split("\n")[0]}. Is mcpx on PATH (or MCPX_BIN set)?`
  plugin = {
    id: "mcpx",
    tui: async (api) => api.ui.toast({ variant: "error", title: "mcpx", message: why, duration: 15000 }),
  }
}
export default plugin
