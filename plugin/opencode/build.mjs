// Builds the plugin into plugin/opencode/dist: every .ts and .tsx source as an ES module, with Babel (`npm run
// build`; `npm run typecheck` is tsc's check of the same sources). The TUI part's .tsx goes through solid's JSX
// transform for opentui, as opencode compiles its own TUI; opencode supplies solid-js and @opentui/* at run time.
// dist/package.json names the two entry points opencode looks for: ./server (opencode.json) and ./tui (tui.json);
// dist/entry/ holds what `mcpx opencode install` copies into a project to load this dist from the mcpx on PATH.

import { transformFileAsync } from "@babel/core"
import { cpSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const here = dirname(fileURLToPath(import.meta.url))
const out = join(here, "dist")

function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name)
    // lib/ and its halves (lib/server, lib/tui, lib/shared); nothing else at the top (dist, entry, test)
    if (e.isDirectory()) return dir !== here || e.name === "lib" ? sources(path) : []
    return /\.tsx?$/.test(e.name) && !e.name.endsWith(".d.ts") ? [path] : []
  })
}

const typescript = ["@babel/preset-typescript", { onlyRemoveTypeImports: false }]
const solid = ["babel-preset-solid", { generate: "universal", moduleName: "@opentui/solid" }]

rmSync(out, { recursive: true, force: true })
for (const file of sources(here)) {
  const tsx = file.endsWith(".tsx")
  const done = await transformFileAsync(file, {
    babelrc: false, configFile: false, sourceMaps: false, comments: true,
    presets: tsx ? [solid, [typescript[0], { ...typescript[1], isTSX: true, allExtensions: true }]] : [typescript],
  })
  const target = join(out, relative(here, file).replace(/\.tsx?$/, ".js"))
  mkdirSync(dirname(target), { recursive: true })
  writeFileSync(target, done.code + "\n")
}
// the entry points `mcpx opencode install` writes into a project, as they are (plain JS: they load this dist)
cpSync(join(here, "entry"), join(out, "entry"), { recursive: true })
writeFileSync(join(out, "package.json"), JSON.stringify({
  name: "mcpx-opencode", type: "module", exports: { "./server": "./index.js", "./tui": "./tui.js" },
}, null, 2) + "\n")
