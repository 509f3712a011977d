// The passkey ceremonies of the inbox's pages (docs/presence.md): creating one (enrolment), and accepting a
// question that needs the person's presence. The browser makes and signs; the daemon checks (py_webauthn).
(function () {
  "use strict";

  function say(text, bad) {
    const status = document.getElementById("passkey-status");
    if (status) {
      status.textContent = text;
      status.className = bad ? "error-box" : "notice";
    }
  }

  async function post(url, body, json) {
    const response = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: json ? { "Content-Type": "application/json" } : {},
      body: json ? JSON.stringify(body) : body,
    });
    let data = {};
    try { data = await response.json(); } catch (e) { data = { message: "the daemon answered " + response.status }; }
    return { ok: response.ok, data: data };
  }

  const enroll = document.getElementById("enroll");
  if (enroll) {
    enroll.addEventListener("click", async () => {
      const url = enroll.dataset.url;
      try {
        const asked = await post(url + "/options", "", false);
        if (!asked.ok) return say(asked.data.message, true);
        const options = PublicKeyCredential.parseCreationOptionsFromJSON(asked.data.options);
        const credential = await navigator.credentials.create({ publicKey: options });
        const done = await post(url, { credential: credential.toJSON() }, true);
        say(done.data.message, !done.ok);
        if (done.ok) enroll.disabled = true;
      } catch (e) {
        say("No passkey was created: " + e.message, true);
      }
    });
  }

  const form = document.getElementById("answer");
  if (form && form.dataset.challenge) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      event.stopImmediatePropagation();
      try {
        const asked = await post(form.dataset.challenge, new URLSearchParams(new FormData(form)), false);
        if (!asked.ok) return say(asked.data.message, true);
        const options = PublicKeyCredential.parseRequestOptionsFromJSON(asked.data.options);
        const credential = await navigator.credentials.get({ publicKey: options });
        const done = await post(form.dataset.accept,
          { nonce: asked.data.nonce, content: asked.data.content, credential: credential.toJSON() }, true);
        say(done.data.message, !done.ok);
      } catch (e) {
        say("Nothing was signed: " + e.message, true);
      }
    }, true);
  }
})();
