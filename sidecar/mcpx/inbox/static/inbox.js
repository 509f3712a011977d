// The inbox's little script: time left counting down, deadlines on the viewer's own clock, and the pages kept
// current from the daemon's own event stream (/v1/events, authorised by the inbox's cookie). What the pages show
// is rendered by the daemon; this only swaps it in.
"use strict";
(function () {
  const started = performance.now();
  function fmt(s) {
    if (s <= 0) return "ended";
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = Math.floor(s % 60);
    return h ? `${h}h${String(m).padStart(2, "0")}m` : m ? `${m}m${String(r).padStart(2, "0")}s` : `${r}s`;  // as mcpx writes it
  }
  function tick() {
    for (const el of document.querySelectorAll("[data-left]")) {
      const base = Number(el.dataset.left), since = Number(el.dataset.since || started);
      el.textContent = fmt(base - (performance.now() - since) / 1000);
    }
  }
  setInterval(tick, 1000);
  tick();

  // a deadline as the viewer's clock reads it (the daemon wrote it on its own): "until 14:05", the day too if not today
  for (const el of document.querySelectorAll("time[data-until]")) {
    const at = new Date(el.dateTime);
    if (Number.isNaN(at.getTime())) continue;
    const shape = { hour: "2-digit", minute: "2-digit" };
    if (at.toDateString() !== new Date().toDateString()) shape.weekday = "short";
    el.textContent = `until ${at.toLocaleString([], shape)}`;
  }

  // the one stream both pages follow: every elicit event from `query` on, each handed to `heard(kind, event)`
  function follow(query, heard) {
    query.set("kinds", "elicit");
    const source = new EventSource(`/v1/events?${query}`);
    const live = document.getElementById("live");
    source.onopen = () => { if (live) live.textContent = "live"; };
    source.onerror = () => { if (live) live.textContent = "reconnecting…"; };
    for (const kind of ["elicit.open", "elicit.answered", "elicit.expired", "elicit.abandoned", "elicit.escalated"]) {
      source.addEventListener(kind, (event) => heard(kind, event));
    }
    return source;
  }
  if (!window.EventSource) return;

  // the list: its rows fetched again whenever a question opens, ends or changes hands
  const list = document.getElementById("rows");
  if (list) {
    const params = new URLSearchParams(location.search);
    const query = new URLSearchParams();
    for (const k of ["session", "server"]) if (params.get(k)) query.set(k, params.get(k));
    let pending = null;
    async function refresh() {
      pending = null;
      const resp = await fetch(`/inbox/rows?${query}`, { credentials: "same-origin", cache: "no-store" });
      if (!resp.ok) { document.getElementById("live").textContent = "signed out: run `mcpx inbox` again"; return; }
      list.innerHTML = await resp.text();
      const count = list.querySelectorAll("tr[data-id]").length;
      const badge = document.getElementById("badge");
      if (badge) {
        badge.textContent = count ? `● ${count} question${count === 1 ? "" : "s"}` : "no questions";
        badge.className = count ? "badge" : "badge quiet";
      }
      const now = String(performance.now());
      for (const el of list.querySelectorAll("[data-left]")) el.dataset.since = now;
      tick();
    }
    const stream = new URLSearchParams();
    if (params.get("session")) stream.set("session", params.get("session"));
    follow(stream, () => { if (!pending) pending = setTimeout(refresh, 0); });
  }

  // a question's page, signed in: from where the log stood when the page read the question, so nothing that
  // came after is missed. Should the question end by another way, what became of it takes the form's place.
  const now = document.getElementById("now");
  if (now && now.dataset.follow !== undefined) {
    const id = now.dataset.id;
    let sent = false;  // this page posted an answer: the event that follows is its own, and the next page says it
    const source = follow(new URLSearchParams({ lastEventId: now.dataset.follow }), (kind, event) => {
      if (sent || !["elicit.answered", "elicit.expired", "elicit.abandoned"].includes(kind)) return;
      let record;
      try { record = JSON.parse(event.data); } catch (_) { return; }
      if (record.elicit !== id) return;
      source.close();
      ended(kind.slice("elicit.".length));
    });
    now.addEventListener("submit", (event) => {
      if (!event.target.target) { sent = true; source.close(); }  // a post that opens a new tab leaves this page here
    });

    async function ended(state) {
      for (const el of now.querySelectorAll("button, input, select, textarea")) el.disabled = true;
      const shown = document.getElementById("state");
      if (shown) shown.textContent = state;  // the countdown and the deadline stop
      for (const box of document.querySelectorAll("#error, #notice")) box.remove();  // about a post now moot
      let card = null;
      try {
        const resp = await fetch(`/inbox/q/${encodeURIComponent(id)}/outcome${location.search}`,
                                 { credentials: "same-origin", cache: "no-store" });
        if (resp.ok) card = await resp.text();
      } catch (_) { /* said below */ }
      if (card) { now.innerHTML = card; return; }
      const line = document.createElement("p");
      line.className = "error-box";
      line.id = "outcome";
      line.textContent = `This question has ended (${state}); reload the page to see how. Nothing entered here was sent.`;
      now.replaceChildren(line);
    }
  }
})();
