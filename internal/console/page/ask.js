// Ask from the page (internal/console/ask.go): the task box on the fleet
// and agent pages, a run page's Re-run button, and the sign-in page. A
// task is POSTed as JSON (the studio's check for actions); the ask is then
// followed on its server-sent event stream: notes and delegations as they
// happen, the answer as the model writes it, then the final answer. An
// elicitation is asked here, under a line of ours that says who asks;
// everything a server wrote is put in the page as text (textContent),
// never as markup.
(function () {
  "use strict";
  const body = document.body;

  function post(url, payload) {
    return fetch(url, {
      method: "POST", cache: "no-store", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify(payload),
    }).then(function (r) {
      if (r.status === 204) return {};
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

  // The live view of an ask: the task box's, or one made for a run page.
  function liveView() {
    let live = document.getElementById("ask-live");
    if (live) return live;
    live = el("div", "ask-live");
    live.id = "ask-live";
    const head = el("p", "ask-head");
    const state = el("span", "badge", "starting"); state.id = "ask-state";
    const who = el("span"); who.id = "ask-who";
    const run = el("a", "", "run page"); run.id = "ask-run"; run.href = "#";
    head.append(state, " ", who, " · ", run);
    const evs = el("ol", "ask-events"); evs.id = "ask-events";
    const eli = el("div", "ask-elicit"); eli.id = "ask-elicit"; eli.hidden = true;
    const ans = el("pre", "ask-answer"); ans.id = "ask-answer";
    live.append(head, evs, eli, ans);
    const anchor = document.getElementById("rerun");
    (anchor ? anchor.parentNode : document.querySelector("main")).after(live);
    return live;
  }

  let current = null; // the EventSource followed

  function follow(started) {
    const live = liveView();
    live.hidden = false;
    const state = document.getElementById("ask-state");
    const evs = document.getElementById("ask-events");
    const ans = document.getElementById("ask-answer");
    const eli = document.getElementById("ask-elicit");
    const run = document.getElementById("ask-run");
    evs.textContent = ""; ans.textContent = ""; eli.textContent = ""; eli.hidden = true;
    state.textContent = "running"; state.className = "badge tone-run";
    live.dataset.state = "running";
    live.dataset.ask = started.id;
    run.href = started.run_url;
    run.textContent = "run " + started.run.slice(0, 8);
    if (current) current.close();
    const es = new EventSource(started.events);
    current = es;
    function line(text, cls) { const li = el("li", cls, text); evs.append(li); return li; }
    function data(e) { return JSON.parse(e.data); }
    es.addEventListener("start", function (e) {
      const d = data(e);
      document.getElementById("ask-who").textContent = "agent " + d.agent + (d.model ? " · model " + d.model : "");
    });
    es.addEventListener("note", function (e) { line("· " + data(e).text, "note"); });
    es.addEventListener("delegation", function (e) {
      const d = data(e);
      const what = d.agent + "." + d.tool;
      if (d.phase === "start") { line("→ " + what, "deleg start"); return; }
      line((d.outcome === "ok" ? "✓ " : "✗ ") + what + " " + Math.round(d.duration_ms || 0) + " ms" +
        (d.outcome !== "ok" ? ": " + String(d.outcome).replace(/_/g, " ") + (d.message ? " " + d.message : "") : "") +
        (d.recovered ? " (recovered on a new session)" : d.retried ? " (retried once)" : ""), "deleg " + (d.outcome === "ok" ? "ok" : "bad"));
    });
    es.addEventListener("delta", function (e) {
      const d = data(e);
      if (d.discard) { ans.textContent = ""; return; }
      ans.textContent += d.text;
      live.dataset.streamed = "1";
    });
    es.addEventListener("elicit", function (e) { elicit(started.id, data(e), eli); });
    es.addEventListener("elicited", function (e) {
      const d = data(e);
      line("· the question was " + (d.action === "accept" ? "answered" : d.action + "d") + (d.why ? " (" + d.why + ")" : ""), "note");
      const f = eli.querySelector('[data-elicitation="' + d.elicitation + '"]');
      if (f) f.remove();
      eli.hidden = !eli.children.length;
    });
    es.addEventListener("answer", function (e) {
      const d = data(e);
      ans.textContent = d.answer || d.reason || "";
      state.textContent = d.status;
      state.className = "badge " + (d.status === "answered" ? "tone-ok" : "tone-bad");
      live.dataset.state = d.status;
      if (d.status !== "answered" && d.reason) line("· " + d.reason, "note");
    });
    es.addEventListener("error", function (e) {
      if (!e.data) return; // the stream's own error: EventSource reconnects
      const d = data(e);
      line("✗ " + d.message, "deleg bad");
      state.textContent = "failed"; state.className = "badge tone-bad";
      live.dataset.state = "failed";
    });
    es.addEventListener("end", function () {
      es.close();
      live.dataset.done = "1";
      const box = document.getElementById("ask-submit");
      if (box) box.disabled = false;
      const rr = document.getElementById("rerun");
      if (rr) rr.disabled = false;
    });
  }

  // elicit shows one question: ours first (who asks), then the server's
  // message and fields, as text.
  function elicit(ask, d, box) {
    box.hidden = false;
    const f = el("form", "elicit");
    f.dataset.elicitation = d.elicitation;
    f.append(el("p", "who", "? " + d.who + " asks you:"));
    const msg = el("pre", "server-text", d.message || "");
    f.append(msg);
    if (d.declined) {
      f.append(el("p", "muted", "declined: " + d.declined + (d.url ? " (" + d.url + ")" : "")));
      box.append(f);
      return;
    }
    const schema = d.schema || {};
    const props = schema.properties || {};
    const required = schema.required || [];
    Object.keys(props).sort().forEach(function (name) {
      const p = props[name] || {};
      const label = el("label", "field");
      label.append(el("span", "", (p.title ? p.title + " (" + name + ")" : name) + (required.indexOf(name) >= 0 ? " *" : "")));
      let input;
      if (Array.isArray(p.enum)) {
        input = el("select");
        p.enum.forEach(function (v) { const o = el("option", "", String(v)); o.value = String(v); input.append(o); });
      } else {
        input = el("input");
        input.type = p.type === "boolean" ? "checkbox" : (p.type === "integer" || p.type === "number") ? "number" : "text";
      }
      input.name = name;
      input.dataset.type = p.type || "string";
      if (p.default !== undefined) { if (input.type === "checkbox") input.checked = !!p.default; else input.value = String(p.default); }
      label.append(input);
      if (p.description) label.append(el("span", "muted", " " + p.description));
      f.append(label);
    });
    function answer(action) {
      const content = {};
      if (action === "accept") {
        f.querySelectorAll("[name]").forEach(function (i) {
          const t = i.dataset.type;
          if (t === "boolean") content[i.name] = i.checked;
          else if (i.value === "") return;
          else if (t === "integer" || t === "number") content[i.name] = Number(i.value);
          else content[i.name] = i.value;
        });
      }
      f.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      post("/api/asks/" + encodeURIComponent(ask) + "/elicit", { elicitation: d.elicitation, action: action, content: content })
        .catch(function (err) { f.append(el("p", "err", err.message)); });
    }
    const ok = el("button", "", "answer"); ok.type = "submit"; ok.id = "elicit-accept";
    const no = el("button", "", "decline"); no.type = "button"; no.id = "elicit-decline";
    no.addEventListener("click", function () { answer("decline"); });
    f.addEventListener("submit", function (e) { e.preventDefault(); answer("accept"); });
    f.append(ok, " ", no);
    box.append(f);
  }

  const form = document.getElementById("ask-form");
  if (form) {
    const sel = document.getElementById("ask-agent-select");
    const model = document.getElementById("ask-model");
    function showModel() {
      if (!sel || !model) return;
      const o = sel.selectedOptions[0];
      model.textContent = o && o.dataset.model ? "model " + o.dataset.model : "no model named";
    }
    if (sel) sel.addEventListener("change", showModel);
    showModel();
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      const agent = form.elements.agent.value;
      const task = form.elements.task.value;
      const submit = document.getElementById("ask-submit");
      submit.disabled = true;
      post("/api/agents/" + encodeURIComponent(agent) + "/ask", { task: task })
        .then(follow)
        .catch(function (err) {
          submit.disabled = false;
          const live = liveView(); live.hidden = false; live.dataset.state = "refused";
          document.getElementById("ask-events").textContent = "";
          document.getElementById("ask-events").append(el("li", "deleg bad", "✗ " + err.message));
        });
    });
  }

  const rerun = document.getElementById("rerun");
  if (rerun) {
    rerun.addEventListener("click", function () {
      rerun.disabled = true;
      post("/api/runs/" + encodeURIComponent(rerun.dataset.run) + "/rerun", {})
        .then(follow)
        .catch(function (err) {
          rerun.disabled = false;
          const live = liveView(); live.hidden = false; live.dataset.state = "refused";
          document.getElementById("ask-events").append(el("li", "deleg bad", "✗ " + err.message));
        });
    });
  }

  const logout = document.getElementById("logout");
  if (logout) {
    logout.addEventListener("click", function () {
      post("/logout", {}).then(function () { location.href = "/login"; });
    });
  }

  const login = document.getElementById("login-form");
  if (login) {
    login.addEventListener("submit", function (e) {
      e.preventDefault();
      const out = document.getElementById("login-result");
      out.textContent = "";
      post("/login", { token: login.elements.token.value })
        .then(function () { location.href = body.dataset.next || "/"; })
        .catch(function (err) { out.textContent = err.message; });
    });
    body.dataset.ready = "1";
  }
})();
