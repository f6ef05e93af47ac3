// The studio's pages are rendered by the server; this script keeps their
// live part current, draws the agent page's charts, and drives its buttons
// and tool forms. It never builds HTML from strings of data: updates are the
// server's own escaped HTML for the same page (?fragment=1), parsed with
// DOMParser; everything else is built with textContent.
"use strict";

(function () {
  const every = 1000;
  const body = document.body;
  const regions = document.querySelectorAll("[data-live]");
  // The version of the page as the server rendered it: the first refresh
  // is then a 304 unless something changed, instead of replacing the whole
  // live part at the very moment the person starts using the page.
  let etag = body.dataset.etag || "";
  let polls = 0;
  let timer = 0;

  function two(n) { return (n < 10 ? "0" : "") + n; }

  // A time with its date and zone, as the server writes them.
  function when(d) {
    const off = -d.getTimezoneOffset();
    const zone = "UTC" + (off === 0 ? "" : (off > 0 ? "+" : "-") + two(Math.floor(Math.abs(off) / 60)) + ":" + two(Math.abs(off) % 60));
    return d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + " " +
      two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds()) + " " + zone;
  }

  function status(state, text) {
    const u = document.getElementById("updated");
    if (!u) return;
    u.dataset.state = state;
    u.textContent = text;
  }

  function keys(root, sel, attr) {
    const out = new Set();
    root.querySelectorAll(sel).forEach(function (e) { out.add(e.getAttribute(attr)); });
    return out;
  }

  // swap replaces the live part with the server's new rendering, keeping
  // what the person opened open and flashing rows that are new (for two
  // seconds, across the swaps that come meanwhile).
  const flashed = new Map();
  function swap(html) {
    const doc = new DOMParser().parseFromString(html, "text/html");
    const now = Date.now();
    flashed.forEach(function (t, k) { if (now - t > 2000) flashed.delete(k); });
    regions.forEach(function (live) {
      const next = doc.getElementById(live.id);
      if (!next) return;
      const open = keys(live, "details[open][data-key]", "data-key");
      const seen = new Set([...keys(live, "tr[data-id]", "data-id")].map(function (k) { return "d" + k; })
        .concat([...keys(live, "tr[data-run]", "data-run")].map(function (k) { return "r" + k; })));
      next.querySelectorAll("details[data-key]").forEach(function (d) {
        if (open.has(d.getAttribute("data-key"))) d.open = true;
      });
      next.querySelectorAll("tr[data-id], tr[data-run]").forEach(function (tr) {
        const k = tr.hasAttribute("data-id") ? "d" + tr.getAttribute("data-id") : "r" + tr.getAttribute("data-run");
        if (!seen.has(k) && !flashed.has(k)) flashed.set(k, now);
        if (flashed.has(k)) tr.classList.add("new");
      });
      live.replaceChildren.apply(live, Array.from(next.childNodes));
    });
  }

  // A swap between a button's press and its release would replace the
  // element being clicked, and the click would be lost (the browser sends
  // no click to an element the press was not on): while the pointer is
  // down, an update waits, and is applied after the click. A press that
  // began before this script ran (the page still loading) shows as an
  // element in the :active state, and counts too.
  let pressing = document.querySelector(":active") !== null;
  let held = null;
  function released() {
    pressing = false;
    setTimeout(function () {
      if (!pressing && held != null) { const h = held; held = null; apply(h); }
    }, 0);
  }
  document.addEventListener("pointerdown", function () { pressing = true; }, true);
  document.addEventListener("pointerup", released, true);
  document.addEventListener("pointercancel", released, true);

  function apply(html) {
    swap(html);
    if (body.dataset.page === "agent") charts();
    // A step that was open is open again in the new rendering: show what
    // was fetched for it, without asking the agent again.
    document.querySelectorAll("details.span-step[open] .step-content[data-step-url]").forEach(loadStep);
  }

  // A model step's messages and response are fetched when its bar is
  // opened (the agent rebuilds them from its run journal), kept for the
  // page's life, and built with textContent only: every string in them is
  // the model's, a tool's or a person's.
  const steps = new Map(); // step URL → its answer
  function text(tag, s, cls) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    e.textContent = s;
    return e;
  }
  function stepMessage(m, label) {
    const role = String(m.role || "").replace(/[^a-z]/g, "");
    const box = document.createElement("div");
    box.className = "step-msg role-" + role;
    let head = label + " · " + (m.role || "(no role)");
    if (m.tool_call_id) head += " · answers " + m.tool_call_id;
    if (m.cut) head += " · " + m.cut + " bytes cut";
    box.appendChild(text("div", head, "msg-head"));
    if (m.reasoning) box.appendChild(text("pre", m.reasoning, "msg-reasoning"));
    if (m.content) box.appendChild(text("pre", m.content, "msg-text"));
    (m.tool_calls || []).forEach(function (tc) {
      box.appendChild(text("pre", "→ " + tc.name + " (" + tc.id + ") " + tc.arguments, "msg-call"));
    });
    return box;
  }
  function showStep(box, v) {
    const parts = [];
    let head = (v.messages || []).length + " messages sent, " + v.tools + " tools offered · run " + v.run + " (" + v.state + "), step " + v.step + " of " + v.steps + " journaled";
    parts.push(text("p", head, "muted step-head"));
    if (!v.exact) parts.push(text("p", v.note || "rebuilt from the journal, not exactly as sent", "failure step-note"));
    (v.messages || []).forEach(function (m, i) { parts.push(stepMessage(m, "sent " + (i + 1))); });
    parts.push(stepMessage(v.response || {}, "response" + (v.finish_reason ? " · finish reason " + v.finish_reason : "")));
    if (v.left_out) parts.push(text("p", v.left_out + " bytes left out past what one step's answer holds", "muted"));
    box.replaceChildren.apply(box, parts);
    box.dataset.state = "shown";
  }
  function loadStep(box) {
    if (box.dataset.state) return;
    const url = box.dataset.stepUrl;
    const had = steps.get(url);
    if (had) { showStep(box, had); return; }
    box.dataset.state = "loading";
    box.replaceChildren(text("p", "reading the step from the agent's run journal…", "muted"));
    fetch(url, { cache: "no-store" })
      .then(function (r) {
        return r.json().then(function (v) {
          if (!r.ok) throw new Error(v.error || r.status + " " + r.statusText);
          return v;
        });
      })
      .then(function (v) { steps.set(url, v); showStep(box, v); })
      .catch(function (err) {
        box.replaceChildren(text("p", err.message, "failure step-error"));
        box.dataset.state = "failed";
      });
  }
  document.addEventListener("toggle", function (e) {
    const d = e.target;
    if (!d.open || !d.matches || !d.matches("details.span-step")) return;
    const box = d.querySelector(".step-content[data-step-url]");
    if (box) loadStep(box);
  }, true);

  function fragmentURL() {
    const q = new URLSearchParams(location.search);
    q.set("fragment", "1");
    return location.pathname + "?" + q.toString();
  }

  function poll() {
    clearTimeout(timer);
    const headers = { "Accept": "text/html" };
    if (etag) headers["If-None-Match"] = etag;
    fetch(fragmentURL(), { cache: "no-store", headers: headers })
      .then(function (r) {
        if (r.status === 304) return null;
        if (!r.ok) throw new Error(r.status + " " + r.statusText);
        etag = r.headers.get("ETag") || "";
        return r.text();
      })
      .then(function (html) {
        if (html != null) {
          if (pressing) held = html;
          else apply(html);
        }
        polls++;
        body.dataset.polls = String(polls);
        status("live", "live · updated " + when(new Date()));
      })
      .catch(function (e) { status("error", "not updating: " + e.message); })
      .finally(function () { timer = setTimeout(poll, every); });
  }

  function refreshNow() { etag = ""; poll(); }

  // The run filter narrows the list as the person types, and keeps the
  // address so that the filtered list can be shared or reloaded.
  const filter = document.getElementById("run-filter");
  if (filter) {
    let wait = 0;
    const apply = function () {
      const q = new URLSearchParams();
      new FormData(filter).forEach(function (v, k) { if (v) q.set(k, v); });
      const s = q.toString();
      history.replaceState(null, "", location.pathname + (s ? "?" + s : ""));
      refreshNow();
    };
    filter.addEventListener("input", function () { clearTimeout(wait); wait = setTimeout(apply, 150); });
    filter.addEventListener("submit", function (e) { e.preventDefault(); apply(); });
  }

  function post(url, payload) {
    // A JSON body and no credentials but the page's own origin: the
    // studio's check for actions (checkMutation).
    return fetch(url, {
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

  // A Resume button (an agent's journaled runs, a run's journal) resumes
  // the run through the agent's ask and shows what it answered.
  document.addEventListener("click", function (e) {
    const b = e.target.closest("button[data-resume]");
    if (!b || b.disabled) return;
    const out = document.getElementById("resume-result") || document.getElementById("action-result");
    b.disabled = true;
    out.textContent = "resuming run " + b.dataset.resume + "…";
    post("/api/agents/" + encodeURIComponent(b.dataset.agent) + "/runs/" + encodeURIComponent(b.dataset.resume) + "/resume", {})
      .then(function (v) {
        out.dataset.outcome = v.is_error ? "error" : "ok";
        out.textContent = "run " + v.run + (v.resumed ? " resumed (" + v.replayed_steps + " model steps and " + v.replayed_delegations + " delegations replayed): " : " is over: ") + (v.answer || v.text);
        refreshNow();
      })
      .catch(function (err) { out.dataset.outcome = "refused"; out.textContent = err.message; b.disabled = false; });
  });

  const agent = body.dataset.agent;
  if (body.dataset.page === "agent" && agent) {
    const api = "/api/agents/" + encodeURIComponent(agent);
    const result = document.getElementById("action-result");
    // The buttons are part of the live region (their state follows the
    // agent's), so one listener serves whichever are there.
    document.addEventListener("click", function (e) {
      const b = e.target.closest("button[data-action]");
      if (!b || b.disabled) return;
      const action = b.dataset.action;
      result.textContent = action + "…";
      post(api + "/" + action, { reason: action + " from the agent page" })
        .then(function () { result.textContent = action + " asked at " + when(new Date()); refreshNow(); })
        .catch(function (err) { result.textContent = err.message; });
    });
    fetch(api, { cache: "no-store" }).then(function (r) { return r.json(); }).then(function (d) {
      (d.tool_schemas || []).forEach(function (t) {
        const form = document.querySelector('form.tool-form[data-tool="' + CSS.escape(t.name) + '"]');
        if (form) buildForm(form, t, api);
      });
      drawCharts(d.series || []);
    }).finally(function () { body.dataset.ready = "1"; });
  }

  // buildForm makes a form from a tool's JSON Schema: a field per
  // property (text, number, checkbox, a list for an enum, JSON for the
  // rest), required ones marked.
  function buildForm(form, tool, api) {
    let schema = {};
    try { schema = JSON.parse(typeof tool.input_schema === "string" ? tool.input_schema : JSON.stringify(tool.input_schema || {})) || {}; } catch (e) { schema = {}; }
    const props = schema.properties || {};
    const required = new Set(schema.required || []);
    form.replaceChildren();
    const fields = [];
    Object.keys(props).forEach(function (name) {
      const p = props[name] || {};
      const type = Array.isArray(p.type) ? p.type.find(function (t) { return t !== "null"; }) : p.type;
      const label = document.createElement("label");
      label.className = "field";
      const title = document.createElement("span");
      title.textContent = name + (required.has(name) ? " *" : "");
      label.appendChild(title);
      let input;
      if (Array.isArray(p.enum)) {
        input = document.createElement("select");
        if (!required.has(name)) input.appendChild(new Option("", ""));
        p.enum.forEach(function (v) { input.appendChild(new Option(String(v), JSON.stringify(v))); });
      } else if (type === "boolean") {
        input = document.createElement("input");
        input.type = "checkbox";
      } else if (type === "number" || type === "integer") {
        input = document.createElement("input");
        input.type = "number";
        input.step = type === "integer" ? "1" : "any";
      } else if (type === "string") {
        input = document.createElement("input");
        input.type = "text";
      } else {
        input = document.createElement("textarea");
        input.placeholder = "JSON";
        input.rows = 3;
      }
      input.name = name;
      if (required.has(name) && input.type !== "checkbox") input.required = true;
      if (p.description) {
        const hint = document.createElement("small");
        hint.textContent = p.description;
        label.appendChild(input);
        label.appendChild(hint);
      } else {
        label.appendChild(input);
      }
      fields.push({ name: name, type: type, input: input, isEnum: Array.isArray(p.enum) });
      form.appendChild(label);
    });
    const submit = document.createElement("button");
    submit.type = "submit";
    submit.textContent = "call " + tool.name;
    form.appendChild(submit);
    const out = form.parentElement.querySelector(".tool-result");
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      const args = {};
      try {
        fields.forEach(function (f) {
          const v = f.input.value;
          if (f.input.type === "checkbox") { args[f.name] = f.input.checked; return; }
          if (v === "") return;
          if (f.isEnum) args[f.name] = JSON.parse(v);
          else if (f.type === "number" || f.type === "integer") args[f.name] = Number(v);
          else if (f.type === "string") args[f.name] = v;
          else args[f.name] = JSON.parse(v);
        });
      } catch (err) {
        out.hidden = false;
        out.className = "tool-result failure";
        out.textContent = "not valid JSON: " + err.message;
        return;
      }
      out.hidden = false;
      out.className = "tool-result";
      out.textContent = "calling " + tool.name + "…";
      post(api + "/call", { tool: tool.name, arguments: args })
        .then(function (r) {
          out.className = "tool-result " + (r.is_error ? "failure" : "ok");
          out.textContent = (r.is_error ? "the tool answered with an error:\n" : "") + (r.text || JSON.stringify(r.result, null, 2));
          refreshNow();
        })
        .catch(function (err) { out.className = "tool-result failure"; out.textContent = err.message; });
    });
  }

  let lastCharts = 0;
  function charts() {
    if (Date.now() - lastCharts < 10000) return;
    fetch("/api/agents/" + encodeURIComponent(agent), { cache: "no-store" })
      .then(function (r) { return r.json(); })
      .then(function (d) { drawCharts(d.series || []); });
  }

  const NS = "http://www.w3.org/2000/svg";
  function el(name, attrs, text) {
    const e = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text != null) e.textContent = text;
    return e;
  }

  // chart draws one small chart of series (each {key, cls, label}) over
  // the minutes, bars for counts or lines for latencies.
  function chart(title, points, series, kind, unit) {
    const W = 300, H = 96, top = 28, bottom = 14;
    let maxV = 0;
    points.forEach(function (p) { series.forEach(function (s) { maxV = Math.max(maxV, p[s.key] || 0); }); });
    const svg = el("svg", { viewBox: "0 0 " + W + " " + H, class: "chart", role: "img", "aria-label": title });
    svg.appendChild(el("text", { x: 0, y: 11, class: "chart-title" }, title + (maxV ? " · max " + fmt(maxV, unit) : " · none")));
    const n = points.length || 1;
    const bw = W / n;
    const y = function (v) { return H - bottom - (maxV ? (v / maxV) * (H - top - bottom) : 0); };
    svg.appendChild(el("line", { x1: 0, x2: W, y1: H - bottom, y2: H - bottom, class: "axis" }));
    series.forEach(function (s, si) {
      if (kind === "bars") {
        points.forEach(function (p, i) {
          const v = p[s.key] || 0;
          if (!v) return;
          const w = bw / series.length;
          const r = el("rect", { x: i * bw + si * w, y: y(v), width: Math.max(w - 0.5, 0.5), height: H - bottom - y(v), class: s.cls });
          r.appendChild(el("title", {}, when(new Date(p.time)) + ": " + v + " " + s.label));
          svg.appendChild(r);
        });
      } else {
        let d = "";
        points.forEach(function (p, i) {
          const v = p[s.key] || 0;
          if (!v) return;
          d += (d ? " L" : "M") + (i * bw + bw / 2).toFixed(1) + " " + y(v).toFixed(1);
        });
        if (d) svg.appendChild(el("path", { d: d, class: "line " + s.cls }));
      }
    });
    let lx = 0;
    series.forEach(function (s) {
      svg.appendChild(el("rect", { x: lx, y: 16, width: 7, height: 7, class: s.cls }));
      svg.appendChild(el("text", { x: lx + 10, y: 22.5, class: "legend" }, s.label));
      lx += 14 + 6 * s.label.length;
    });
    svg.appendChild(el("text", { x: 0, y: H - 2, class: "legend" }, points.length ? when(new Date(points[0].time)).slice(11, 16) : ""));
    svg.appendChild(el("text", { x: W, y: H - 2, class: "legend end" }, "now"));
    return svg;
  }

  function fmt(v, unit) {
    if (unit === "ms") return v >= 1000 ? (v / 1000).toFixed(1) + " s" : Math.round(v) + " ms";
    return String(v);
  }

  function drawCharts(points) {
    const box = document.getElementById("charts");
    if (!box) return;
    lastCharts = Date.now();
    box.replaceChildren(
      chart("calls / min", points, [{ key: "calls", cls: "s-calls", label: "calls" }], "bars"),
      chart("errors / min", points, [{ key: "errors", cls: "s-errors", label: "errors" }], "bars"),
      chart("latency (upper bounds)", points, [{ key: "p50_ms", cls: "s-p50", label: "p50" }, { key: "p95_ms", cls: "s-p95", label: "p95" }, { key: "p99_ms", cls: "s-p99", label: "p99" }], "lines", "ms"),
      chart("sessions / min", points, [{ key: "initializes", cls: "s-init", label: "initialize" }, { key: "expired", cls: "s-expired", label: "expired" }], "bars"));
    box.dataset.drawn = String(points.length);
  }

  // data-ready: the page is built (an agent page's forms and charts are
  // there), so what is on screen no longer moves under the pointer.
  if (body.dataset.page !== "agent" || !agent) body.dataset.ready = "1";
  if (regions.length) poll();
})();
