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
    return { ok: response.ok, status: response.status, data: data };
  }

  const enroll = document.getElementById("enroll");
  const vouch = document.getElementById("vouch");
  if (enroll) {
    let vouching = null; // the options an enrolled passkey signs to add the one just created (202: held)
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
        if (done.status === 202 && vouch) {
          vouching = done.data.vouch;
          vouch.hidden = false;
        }
      } catch (e) {
        say("No passkey was created: " + e.message, true);
      }
    });
    // a second press, not a chain: the person may plug in or bring near the passkey that vouches, and a browser may
    // ask for a passkey only on a press
    if (vouch) {
      vouch.addEventListener("click", async () => {
        try {
          const options = PublicKeyCredential.parseRequestOptionsFromJSON(vouching);
          const credential = await navigator.credentials.get({ publicKey: options });
          const done = await post(enroll.dataset.url + "/vouch", { credential: credential.toJSON() }, true);
          say(done.data.message, !done.ok);
          if (done.ok) vouch.disabled = true;
        } catch (e) {
          say("Nothing was signed: " + e.message, true);
        }
      });
    }
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
