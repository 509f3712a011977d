// The inbox's little script: time left counting down, and the list kept current from the daemon's own event
// stream (/v1/events, authorised by the inbox's cookie). Rows are rendered by the daemon; this only swaps them in.
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

  const list = document.getElementById("rows");
  if (!list || !window.EventSource) return;
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
  const stream = new URLSearchParams({ kinds: "elicit" });
  if (params.get("session")) stream.set("session", params.get("session"));
  const source = new EventSource(`/v1/events?${stream}`);
  const live = document.getElementById("live");
  source.onopen = () => { if (live) live.textContent = "live"; };
  source.onerror = () => { if (live) live.textContent = "reconnecting…"; };
  for (const kind of ["elicit.open", "elicit.answered", "elicit.expired", "elicit.abandoned", "elicit.escalated"]) {
    source.addEventListener(kind, () => { if (!pending) pending = setTimeout(refresh, 0); });
  }
})();
