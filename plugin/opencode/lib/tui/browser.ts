// Opening a url-mode question's page in the person's browser: only after they chose Open page in its dialog.

import { spawn } from "node:child_process"

/** Open `url` with the platform's opener; what happened, in a line for the dialog. */
export function openInBrowser(url: string, platform: string = process.platform): Promise<string> {
  const [command, args] = platform === "darwin" ? ["open", [url]] : platform === "win32" ? ["cmd", ["/c", "start", "", url]]
    : ["xdg-open", [url]]
  return new Promise((resolve) => {
    const failed = (why: string) => resolve(`Could not open a browser here (${why}): copy the page's address above.`)
    try {
      const child = spawn(command as string, args as string[], { detached: true, stdio: "ignore" })
      child.on("error", (e) => failed(e.message))
      child.on("spawn", () => {
        child.unref()
        resolve("Opened in your browser. Accept once you have done what the page asks.")
      })
    } catch (e) {
      failed(String((e as Error)?.message ?? e))
    }
  })
}
