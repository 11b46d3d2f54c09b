// offstage dashboard: the list and a task's detail, kept live by
// server-sent events. No polling: the server pushes what changes.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const rows = new Map(); // "session/id" -> <tr>
  let list = null, detail = null, limit = 200, current = null;
  // For the browser test and benchmark: when things arrived.
  window.offstage = { snapshots: 0, snapshotAt: 0, events: 0, changedAt: {} };

  const key = (t) => t.session + "/" + t.id;
  const clock = (ms) => {
    if (!ms) return "-";
    const d = new Date(ms), now = new Date();
    return d.toDateString() === now.toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
  };
  const span = (ms) => {
    if (ms < 1000) return ms + "ms";
    const s = Math.floor(ms / 1000);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m";
    if (s < 172800) return Math.floor(s / 3600) + "h";
    return Math.floor(s / 86400) + "d";
  };
  const took = (t) => !t.started ? "-" : !t.finished ? "running since " + clock(t.started) : span(t.finished - t.started);
  const taskHref = (t) => "#task/" + encodeURIComponent(t.session) + "/" + encodeURIComponent(t.id);

  function cell(tr, label, cls) {
    const td = document.createElement("td");
    td.dataset.label = label;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }
  function stateBadge(el, state) {
    el.textContent = "";
    const b = document.createElement("span");
    b.className = "state " + state;
    b.textContent = state.replace("_", " ");
    el.appendChild(b);
  }
  function fill(tr, t) {
    tr.dataset.key = key(t);
    tr.dataset.state = t.state;
    tr.dataset.created = t.created;
    const c = tr.children;
    stateBadge(c[0], t.state);
    c[1].textContent = "";
    const a = document.createElement("a");
    a.href = taskHref(t);
    a.textContent = t.id + (t.owner ? " ← " + t.owner : "");
    a.setAttribute("aria-label", "Task " + t.id + " of session " + t.session + ", " + t.state);
    c[1].appendChild(a);
    c[2].textContent = t.label;
    c[3].textContent = t.host || "?";
    c[4].textContent = t.session;
    c[5].textContent = clock(t.created);
    c[6].textContent = took(t);
  }
  function makeRow(t) {
    const tr = document.createElement("tr");
    cell(tr, "State"); cell(tr, "Task", "mono"); cell(tr, "Label", "label"); cell(tr, "Instance");
    cell(tr, "Session", "mono"); cell(tr, "Created"); cell(tr, "Took");
    fill(tr, t);
    return tr;
  }
  function summary(more) {
    const n = rows.size;
    $("summary").textContent = n === 0 ? "No tasks match." :
      (more ? "The newest " + n + " tasks that match (older ones are left out; filter to see them)." : n + (n === 1 ? " task." : " tasks."));
  }
  let more = false;
  function upsert(t) {
    const tbody = $("tasks").tBodies[0], k = key(t);
    let tr = rows.get(k);
    if (tr) {
      fill(tr, t);
    } else {
      tr = makeRow(t);
      rows.set(k, tr);
      let before = null; // newest first
      for (const r of tbody.rows) {
        if (Number(r.dataset.created) <= t.created) { before = r; break; }
      }
      tbody.insertBefore(tr, before);
      while (rows.size > limit) {
        const last = tbody.rows[tbody.rows.length - 1];
        rows.delete(last.dataset.key);
        last.remove();
        more = true;
      }
    }
    window.offstage.events++;
    window.offstage.changedAt[k + "@" + t.state] = Date.now();
  }

  function filterParams() {
    const p = new URLSearchParams();
    for (const el of $("filters").elements) {
      if (el.name && el.value.trim()) p.set(el.name, el.value.trim());
    }
    return p;
  }
  function connectList() {
    if (list) list.close();
    const p = filterParams();
    history.replaceState(null, "", "?" + p.toString() + location.hash);
    list = new EventSource("events?" + p.toString());
    list.onopen = () => { $("conn").textContent = "Live"; };
    list.onerror = () => { $("conn").textContent = "Reconnecting…"; };
    list.addEventListener("snapshot", (e) => {
      const d = JSON.parse(e.data), tbody = $("tasks").tBodies[0];
      limit = d.limit; more = d.more;
      rows.clear();
      const frag = document.createDocumentFragment();
      for (const t of d.tasks) {
        const tr = makeRow(t);
        rows.set(key(t), tr);
        frag.appendChild(tr);
      }
      tbody.replaceChildren(frag);
      summary(more);
      $("trouble").hidden = !d.why;
      $("trouble").textContent = d.why || "";
      window.offstage.snapshots++;
      window.offstage.snapshotAt = performance.now();
    });
    list.addEventListener("task", (e) => { upsert(JSON.parse(e.data)); summary(more); });
    list.addEventListener("gone", (e) => {
      const d = JSON.parse(e.data), tr = rows.get(key(d));
      if (tr) { tr.remove(); rows.delete(key(d)); summary(more); }
    });
    list.addEventListener("trouble", (e) => {
      const m = JSON.parse(e.data).message;
      $("trouble").hidden = !m;
      $("trouble").textContent = m;
    });
  }

  function fact(dl, name, value, mono) {
    if (value === undefined || value === null || value === "") return;
    const dt = document.createElement("dt"), dd = document.createElement("dd");
    dt.textContent = name;
    if (name === "State") stateBadge(dd, value); else dd.textContent = value;
    if (mono) dd.className = "mono";
    dl.append(dt, dd);
  }
  function tokens(n) {
    if (n < 1000) return String(n);
    const short = (v, unit) => v.toFixed(1).replace(/\.0$/, "") + unit;
    return n < 1e6 ? short(n / 1e3, "k") : short(n / 1e6, "M");
  }
  function money(c) { return c < 0.01 ? c.toFixed(4) : c.toFixed(2); }
  function showTask(t) {
    current = t;
    $("task-h").textContent = t.id + " · " + t.label;
    const dl = $("facts");
    dl.textContent = "";
    dl.dataset.state = t.state;
    fact(dl, "State", t.state);
    fact(dl, "Kind", t.kind);
    fact(dl, "Session", t.session, true);
    fact(dl, "Instance", t.host);
    fact(dl, "Started by", t.owner);
    fact(dl, "Created", clock(t.created));
    fact(dl, "Took", took(t));
    if (t.exit !== undefined) fact(dl, "Exit code", String(t.exit));
    if (t.ports) fact(dl, "Ports", t.ports.join(", ") + " (leased" + (t.finished ? ", released at its end)" : ", $PORT is " + t.ports[0] + ")"));
    if (t.ended_by) fact(dl, "Ended by", t.ended_by + (t.end_reason ? " (" + t.end_reason + ")" : ""));
    if (t.usage) fact(dl, "Tokens", tokens(t.usage.input_tokens) + " in" +
      (t.usage.cached_input_tokens ? " (" + tokens(t.usage.cached_input_tokens) + " cached)" : "") +
      ", " + tokens(t.usage.output_tokens) + " out, " + t.usage.model_calls + " model call" + (t.usage.model_calls === 1 ? "" : "s") +
      (t.cost !== undefined ? ", cost " + money(t.cost) : ""));
    fact(dl, "Error", t.error);
    fact(dl, "Result", t.result);
    fact(dl, "Output log", t.log, true);
    const finished = !["queued", "running"].includes(t.state);
    const stop = $("stop");
    if (finished) {
      stop.disabled = true;
      if (!$("stop-note").dataset.fixed) $("stop-note").textContent = "This task has ended (" + t.state + ").";
    }
  }
  function openTask(session, id) {
    closeTask();
    $("list-view").hidden = true;
    $("task-view").hidden = false;
    $("output").textContent = "";
    $("output").hidden = false;
    $("output-state").textContent = "Following its output…";
    $("task-trouble").hidden = true;
    $("stop-note").textContent = "";
    delete $("stop-note").dataset.fixed;
    $("reason").value = "";
    const q = "session=" + encodeURIComponent(session) + "&id=" + encodeURIComponent(id);
    fetch("api/task?" + q, { credentials: "same-origin" }).then(async (r) => {
      if (!r.ok) throw new Error(await r.text());
      return r.json();
    }).then((t) => {
      const stop = $("stop");
      stop.disabled = !t.can_cancel;
      if (!t.can_cancel) { $("stop-note").textContent = t.cancel_note; $("stop-note").dataset.fixed = "1"; }
      showTask(t);
      $("task-h").focus();
    }).catch((err) => { $("task-trouble").hidden = false; $("task-trouble").textContent = String(err.message || err); });
    detail = new EventSource("output?" + q);
    detail.addEventListener("begin", () => { $("output").textContent = ""; });
    detail.addEventListener("task", (e) => { const t = JSON.parse(e.data); showTask(t); window.offstage.changedAt["detail@" + t.state] = Date.now(); });
    detail.addEventListener("output", (e) => {
      const pre = $("output");
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append(JSON.parse(e.data).text);
      if (atEnd) pre.scrollTop = pre.scrollHeight;
    });
    detail.addEventListener("end", () => { $("output-state").textContent = "Its output has ended."; detail.close(); detail = null; });
    detail.addEventListener("trouble", (e) => {
      $("output-state").textContent = JSON.parse(e.data).message;
      $("output").hidden = !$("output").textContent; // no empty box above the reason
    });
  }
  function closeTask() {
    if (detail) { detail.close(); detail = null; }
    current = null;
  }
  function route() {
    const m = location.hash.match(/^#task\/([^/]+)\/(.+)$/);
    if (m) {
      openTask(decodeURIComponent(m[1]), decodeURIComponent(m[2]));
    } else {
      closeTask();
      $("task-view").hidden = true;
      $("list-view").hidden = false;
    }
  }

  $("stop-form").addEventListener("submit", (e) => {
    e.preventDefault();
    if (!current) return;
    const stop = $("stop");
    stop.disabled = true;
    $("stop-note").textContent = "Stopping…";
    const body = new URLSearchParams({ session: current.session, id: current.id, reason: $("reason").value });
    fetch("api/cancel", { method: "POST", credentials: "same-origin", headers: { "X-Offstage-Action": "cancel" }, body }).then(async (r) => {
      const text = await r.text();
      if (!r.ok) throw new Error(text);
      const t = JSON.parse(text);
      $("stop-note").textContent = "Stop sent; the task is " + t.state + " now.";
      showTask(t);
    }).catch((err) => { $("stop-note").textContent = "Not stopped: " + (err.message || err); stop.disabled = false; });
  });
  $("filters").addEventListener("submit", (e) => { e.preventDefault(); connectList(); });
  $("filters").addEventListener("change", () => connectList());
  $("back").addEventListener("click", (e) => { e.preventDefault(); history.pushState(null, "", location.pathname + location.search); route(); $("list-h").focus(); });
  window.addEventListener("hashchange", route);

  const p = new URLSearchParams(location.search);
  for (const el of $("filters").elements) {
    if (el.name && p.has(el.name)) el.value = p.get(el.name);
  }
  connectList();
  route();
})();
