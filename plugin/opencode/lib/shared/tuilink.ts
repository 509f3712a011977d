// The two halves of the plugin in one opencode: the TUI part (tui.tsx, in the TUI's thread) and the server part
// (index.ts, in opencode's server worker) speak over a BroadcastChannel, which reaches every thread of the
// process. The TUI part says it is there; the server part then leaves the person's questions to it — no toast, no
// permission dialog — because mcpx's own dialog shows them. Where the TUI runs in another process (`opencode
// attach` to a server), the channel is silent and the server part learns it from the daemon instead: a question's
// elicit.shown record says its dialog opened (lib/server/announce.ts).

export const CHANNEL = "mcpx.opencode.tui"

export type LinkMessage =
  | { kind: "present" } // the TUI part is loaded and shows the person's questions in its dialog
  | { kind: "ping" } // the server part asks who is there
  | { kind: "open"; id: string } // bring question `id` in front of the person (mcpx_ask_person)

type Channel = { postMessage(m: unknown): void; onmessage: ((e: { data: unknown }) => void) | null; close(): void }

function channel(): Channel | undefined {
  const Ctor = (globalThis as unknown as { BroadcastChannel?: new (name: string) => Channel }).BroadcastChannel
  if (!Ctor) return undefined
  const ch = new Ctor(CHANNEL)
  ;(ch as { unref?: () => void }).unref?.() // the channel never keeps opencode running
  return ch
}

function isMessage(data: unknown): data is LinkMessage {
  const kind = (data as { kind?: unknown } | null)?.kind
  return kind === "present" || kind === "ping" || (kind === "open" && typeof (data as { id?: unknown }).id === "string")
}

/** The server part's view: whether the TUI part of this very process is there, and a way to ask it to open one. */
export class TuiPresence {
  private seen = false
  private readonly ch: Channel | undefined

  constructor(make: () => Channel | undefined = channel) {
    this.ch = make()
    if (this.ch) {
      this.ch.onmessage = (e) => {
        if (isMessage(e.data) && e.data.kind === "present") this.seen = true
      }
      this.ch.postMessage({ kind: "ping" } satisfies LinkMessage) // a TUI part that started first answers
    }
  }

  get present(): boolean {
    return this.seen
  }

  open(id: string): void {
    this.ch?.postMessage({ kind: "open", id } satisfies LinkMessage)
  }

  close(): void {
    this.ch?.close()
  }
}

/** The TUI part's side: say it is there (now, and to every ping), and take requests to open a question. */
export function announcePresence(open: (id: string) => void, make: () => Channel | undefined = channel): () => void {
  const ch = make()
  if (!ch) return () => {}
  ch.onmessage = (e) => {
    if (!isMessage(e.data)) return
    if (e.data.kind === "ping") ch.postMessage({ kind: "present" } satisfies LinkMessage)
    else if (e.data.kind === "open") open(e.data.id)
  }
  ch.postMessage({ kind: "present" } satisfies LinkMessage)
  return () => ch.close()
}
