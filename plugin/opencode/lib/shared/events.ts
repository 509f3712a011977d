// The daemon's event stream (GET /v1/events, server-sent events), followed over one connection per opencode
// process: each opencode instance's plugin listens on it. A dropped stream is taken up again after a bounded
// backoff with Last-Event-ID, and the daemon replays what was missed, so no question is missed while mcpx
// restarts or before it is started at all.

import type { ClientRequest } from "node:http"

import type { Daemon } from "./daemon.js"
import type { AuditRecord } from "./generated.js"

/** An audit record as the daemon sends it: its seq is the event's id. */
export type DaemonEvent = AuditRecord
export type Listener = (event: DaemonEvent) => void

export type FollowOptions = {
  kinds?: string // the kinds followed (the daemon's groups: elicit names every elicit.* kind)
  minBackoffMs?: number
  maxBackoffMs?: number
  idleMs?: number // no byte for this long (the daemon's heartbeat is 15 s): the stream is dead
}

export class EventFollower {
  private listeners = new Set<Listener>()
  private connectListeners = new Set<() => void>()
  private last: number | undefined
  private req: ClientRequest | undefined
  private timer: NodeJS.Timeout | undefined
  private backoffMs: number
  private buffer = ""
  private stopped = false
  private readonly opts: Required<FollowOptions>
  /** connected: the stream is open now; connects: how many times it was (re)opened. */
  readonly state = { connected: false, connects: 0, lastError: "" }

  constructor(private readonly daemon: Daemon, options: FollowOptions = {}) {
    this.opts = { kinds: "elicit", minBackoffMs: 250, maxBackoffMs: 5000, idleMs: 45_000, ...options }
    this.backoffMs = this.opts.minBackoffMs
  }

  /** Listen; the stream opens with the first listener. Returns what stops listening. */
  on(listener: Listener): () => void {
    this.listeners.add(listener)
    if (!this.req && !this.timer && !this.stopped) this.connect()
    return () => this.listeners.delete(listener)
  }

  /** Called each time the stream opens (again): what opened while it was down comes by replay, except before the
   * first open, which replays nothing — a listener that needs the state then reads it. */
  onConnect(listener: () => void): () => void {
    this.connectListeners.add(listener)
    if (this.state.connected) listener()
    return () => this.connectListeners.delete(listener)
  }

  stop(): void {
    this.stopped = true
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    this.req?.destroy()
    this.req = undefined
  }

  private connect(): void {
    this.timer = undefined
    this.buffer = ""
    const headers: Record<string, string> = this.last !== undefined ? { "Last-Event-ID": String(this.last) } : {}
    this.req = this.daemon.stream(`/v1/events?kinds=${encodeURIComponent(this.opts.kinds)}`, headers, {
      response: (status) => {
        if (status === 200) {
          this.state.connected = true
          this.state.connects += 1
          this.backoffMs = this.opts.minBackoffMs
          for (const listener of this.connectListeners) {
            try {
              listener()
            } catch (error) {
              console.error(`[mcpx plugin] a connect listener failed: ${String((error as Error)?.stack ?? error)}`)
            }
          }
        } else {
          this.state.lastError = `the daemon answered ${status}`
          this.req?.destroy()
        }
      },
      data: (text) => this.feed(text),
      end: (why) => this.retry(why),
    }, this.opts.idleMs)
  }

  private retry(why: string): void {
    this.state.connected = false
    this.state.lastError = why
    this.req?.destroy() // whatever ended it, the stream given up is closed: never two at once
    this.req = undefined
    if (this.stopped || this.timer) return
    const wait = this.backoffMs
    this.backoffMs = Math.min(this.opts.maxBackoffMs, this.backoffMs * 2)
    this.timer = setTimeout(() => this.connect(), wait)
    this.timer.unref() // a retry never keeps opencode running
  }

  /** Server-sent events: frames end with a blank line; `id:` is the record's seq, `data:` the record. */
  private feed(text: string): void {
    this.buffer += text.replace(/\r\n?/g, "\n")
    let end: number
    while ((end = this.buffer.indexOf("\n\n")) >= 0) {
      const frame = this.buffer.slice(0, end)
      this.buffer = this.buffer.slice(end + 2)
      let data = ""
      for (const line of frame.split("\n")) {
        if (line.startsWith("id:")) {
          const id = Number(line.slice(3).trim())
          if (Number.isSafeInteger(id) && id >= 0) this.last = id // an id-only frame says where the log stands
        } else if (line.startsWith("data:")) {
          data += line.slice(5).trimStart()
        }
      }
      if (!data) continue
      let event: DaemonEvent
      try {
        event = JSON.parse(data)
      } catch {
        continue // not a record: nothing to act on
      }
      for (const listener of this.listeners) {
        try {
          listener(event)
        } catch (error) {
          console.error(`[mcpx plugin] an event listener failed: ${String((error as Error)?.stack ?? error)}`)
        }
      }
    }
  }
}

const followers = new Map<string, EventFollower>()

/** The one follower of this process for the daemon `daemon` reaches (every plugin instance shares it). */
export function follow(daemon: Daemon, options: FollowOptions = {}): EventFollower {
  const key = daemon.describe()
  let follower = followers.get(key)
  if (!follower) {
    follower = new EventFollower(daemon, options)
    followers.set(key, follower)
  }
  return follower
}

/** Stop every follower of this process (the plugin's tests; opencode itself just exits). */
export function stopFollowing(): void {
  for (const follower of followers.values()) follower.stop()
  followers.clear()
}
