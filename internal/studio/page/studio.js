// The studio page keeps itself current by polling /api/overview, the same
// data the server rendered the page from. It builds rows with textContent
// only: agent names, tool names and error messages are never parsed as HTML.
"use strict";

(function () {
  const every = 1000;
  let polls = 0;
  let newest = 0;

  function cell(text, cls) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text == null ? "" : String(text);
    return td;
  }

  function badge(text, cls, title) {
    const td = document.createElement("td");
    const span = document.createElement("span");
    span.className = "badge " + cls;
    span.textContent = text;
    if (title) span.title = title;
    td.appendChild(span);
    return td;
  }

  function fill(id, rows, empty, cols) {
    const body = document.querySelector("#" + id + " tbody");
    const frag = document.createDocumentFragment();
    if (rows.length === 0) {
      const tr = document.createElement("tr");
      tr.className = "empty";
      const td = cell(empty);
      td.colSpan = cols;
      tr.appendChild(td);
      frag.appendChild(tr);
    }
    for (const tr of rows) frag.appendChild(tr);
    body.replaceChildren(frag);
  }

  function time(s) {
    const d = new Date(s);
    return isNaN(d) ? "" : d.toTimeString().slice(0, 8);
  }

  function ms(v) {
    if (v == null) return "";
    if (v >= 1000) return (v / 1000).toFixed(2) + " s";
    return v.toFixed(1) + " ms";
  }

  function render(o) {
    fill("agents", (o.agents || []).map(function (a) {
      const tr = document.createElement("tr");
      tr.dataset.agent = a.name;
      const name = cell(a.name, "name");
      name.title = a.description || "";
      tr.append(name, badge(a.state, "state-" + a.state), cell(a.restarts, "num"), cell(a.pid || "", "num"),
        cell((a.tools || []).join(", ") + (a.tools_error ? " " + a.tools_error : ""), "tools"), cell(a.last_error || "", "err"));
      return tr;
    }), "no agents under agents/", 6);

    fill("pools", (o.pools || []).map(function (p) {
      const tr = document.createElement("tr");
      tr.dataset.process = p.process;
      tr.append(cell(p.process, "name"), cell(p.open, "num"), cell(p.in_use, "num"), cell(p.idle, "num"),
        cell(p.dials, "num"), cell(p.reinitializations, "num"), cell(p.retries, "num"), cell(p.invalidations, "num"));
      return tr;
    }), "no pools", 8);

    const ds = o.delegations || [];
    fill("delegations", ds.map(function (d) {
      const tr = document.createElement("tr");
      tr.dataset.id = d.id;
      tr.dataset.live = "1";
      if (polls > 0 && d.id > newest) tr.className = "new";
      tr.append(cell(time(d.start)), cell(d.from || "client"), cell(d.agent, "name"), cell(d.tool),
        badge(d.outcome, "outcome-" + d.outcome, d.message), cell(d.outcome === "running" ? "" : ms(d.duration_ms), "num"),
        cell(d.recovery || ""), cell((d.run_id || "").slice(0, 8), "run"));
      return tr;
    }), "no delegations yet: run switchboard ask \"…\"", 8);
    for (const d of ds) newest = Math.max(newest, d.id);
  }

  function poll() {
    fetch("/api/overview", { cache: "no-store", headers: { "Accept": "application/json" } })
      .then(function (r) {
        if (!r.ok) throw new Error(r.status + " " + r.statusText);
        return r.json();
      })
      .then(function (o) {
        render(o);
        polls++;
        document.body.dataset.polls = String(polls);
        const u = document.getElementById("updated");
        u.dataset.state = "live";
        u.textContent = "live · updated " + time(o.time);
      })
      .catch(function (e) {
        const u = document.getElementById("updated");
        u.dataset.state = "error";
        u.textContent = "not updating: " + e.message;
      })
      .finally(function () { setTimeout(poll, every); });
  }

  poll();
})();
