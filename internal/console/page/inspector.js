// The inspector page (internal/console/inspector.go): read a resource, get
// a prompt with its arguments, and show the JSON-RPC history again after
// each. Reads and gets are POSTed as JSON (the studio's check for
// actions). Everything a server wrote is put in the page as text
// (textContent), never as markup.
(function () {
  "use strict";
  const body = document.body;
  const base = "/api/agents/" + encodeURIComponent(body.dataset.agent) + "/servers/" + encodeURIComponent(body.dataset.server);

  function post(op, payload) {
    return fetch(base + "/" + op, {
      method: "POST", cache: "no-store", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify(payload),
    }).then(function (r) {
      return r.json().then(function (v) {
        if (!r.ok) throw new Error(v && v.error ? v.error : r.status + " " + r.statusText);
        return v;
      });
    });
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function pretty(raw) {
    try { return JSON.stringify(raw, null, 2); } catch (e) { return String(raw); }
  }

  // show puts an answer (description, contents) into out.
  function show(out, a) {
    out.replaceChildren();
    if (a.description) out.append(el("p", "muted", a.description));
    (a.contents || []).forEach(function (c) {
      const head = [c.role, c.kind, c.uri, c.mimeType, c.size + " bytes"].filter(Boolean).join(" · ");
      out.append(el("p", "muted", head + (c.cut ? " (cut)" : "")));
      if (c.kind === "text" || c.text) out.append(el("pre", "", c.text || ""));
    });
    if (!(a.contents || []).length) out.append(el("p", "muted", "no contents"));
  }

  function fail(out, err) {
    out.replaceChildren(el("p", "err", err.message));
  }

  function refreshRPC() {
    return fetch(base + "/rpc", { cache: "no-store", credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { return r.ok ? r.json() : []; })
      .then(function (entries) {
        const box = document.getElementById("rpc");
        box.replaceChildren();
        if (!entries.length) box.append(el("p", "muted", "no requests yet"));
        entries.forEach(function (e) {
          const d = el("details", "rpc" + (e.failed ? " err" : ""));
          d.dataset.rpc = e.id;
          const s = el("summary", "", "#" + e.id + " ");
          s.append(el("b", "", e.method), " ", el("span", "muted", e.durationMs.toFixed(1) + " ms"));
          if (e.failed) s.append(" ", el("span", "err", "error"));
          d.append(s, el("pre", "rpc-request", pretty(e.request)), el("pre", "rpc-response", pretty(e.response)));
          box.append(d);
        });
      });
  }

  function read(uri) {
    const out = document.getElementById("read-result");
    out.replaceChildren(el("p", "muted", "reading " + uri + "…"));
    post("read", { uri: uri }).then(function (a) { show(out, a); }, function (e) { fail(out, e); }).then(refreshRPC);
  }

  document.addEventListener("click", function (ev) {
    const b = ev.target.closest("button[data-read]");
    if (!b) return;
    document.getElementById("read-uri").value = b.dataset.read;
    read(b.dataset.read);
  });
  const rf = document.getElementById("read-form");
  if (rf) rf.addEventListener("submit", function (ev) {
    ev.preventDefault();
    const uri = document.getElementById("read-uri").value.trim();
    if (uri) read(uri);
  });
  document.querySelectorAll("form.prompt-form").forEach(function (f) {
    f.addEventListener("submit", function (ev) {
      ev.preventDefault();
      const args = {};
      f.querySelectorAll("input[name]").forEach(function (i) { if (i.value !== "") args[i.name] = i.value; });
      const out = f.parentNode.querySelector(".prompt-result");
      out.replaceChildren(el("p", "muted", "getting " + f.dataset.prompt + "…"));
      post("prompt", { name: f.dataset.prompt, arguments: args }).then(function (a) { show(out, a); }, function (e) { fail(out, e); }).then(refreshRPC);
    });
  });
  body.dataset.ready = "1";
})();
