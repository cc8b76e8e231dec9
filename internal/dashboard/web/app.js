// Wharf dashboard: fetches the JSON API every 2 s and redraws each section.
// Every value from the cluster goes into the page as text (textContent),
// never as markup, so a topic name or a message body cannot inject any.
"use strict";

const REFRESH_MS = 2000;
const $ = (sel) => document.querySelector(sel);
const tid = (id) => document.querySelector(`[data-testid="${id}"]`);

// el builds an element: attrs are set as attributes (data-*, class...),
// children are nodes or strings (strings become text nodes).
function el(tag, attrs, ...children) {
  const e = tag === "svg" || SVG_TAGS.has(tag)
    ? document.createElementNS("http://www.w3.org/2000/svg", tag)
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null && v !== false) e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c !== undefined && c !== null) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
const SVG_TAGS = new Set(["polyline", "line", "text", "g", "rect", "circle"]);

const num = (n) => el("td", { class: "num" }, n);
const fmtInt = (n) => Number(n).toLocaleString("en-US");
const fmtRate = (n) => (n >= 100 ? n.toFixed(0) : n.toFixed(1));
const ago = (ms) => (ms ? `${Math.max(0, Math.round((Date.now() - ms) / 1000))} s ago` : "");

async function api(path, opts) {
  const resp = await fetch(path, opts);
  const body = await resp.json().catch(() => ({ error: `${resp.status} ${resp.statusText}` }));
  if (!resp.ok && !body.error) body.error = `${resp.status} ${resp.statusText}`;
  return body;
}

// showError puts a section's error in its box (or hides the box).
function showError(name, msg) {
  const box = tid(`${name}-error`);
  box.hidden = !msg;
  box.textContent = msg || "";
}

function table(testid, head, rows) {
  return el("table", { "data-testid": testid },
    el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

// ---- cluster ----

function renderCluster(c) {
  showError("cluster", c.error);
  if (c.error) return;
  tid("namesrv").textContent = `name server ${c.nameServer}`;
  // The controller numbers a group's replicas its own way (the name server
  // lists a master as id 0): match them by address.
  const ctl = {};
  for (const g of (c.controller && c.controller.groups) || []) ctl[g.group] = g;
  const rows = c.brokers.map((b) => {
    const g = ctl[b.group];
    const rep = g && g.replicas.find((r) => r.addr === b.addr);
    const inSync = rep ? (g.syncStateSet.includes(rep.id) ? "yes" : "no") : "";
    return el("tr", { "data-testid": "broker-row", "data-addr": b.addr, "data-group": b.group },
      el("td", {}, b.group), num(b.id), el("td", {}, b.addr),
      el("td", { "data-testid": "broker-role" }, b.role),
      el("td", { "data-testid": "broker-health", class: `health-${b.health}`, title: b.error || "" },
        b.health + (b.registered ? "" : " (lease expired)")),
      num(g ? g.masterEpoch : ""), el("td", { "data-testid": "broker-insync" }, inSync), el("td", {}, b.version || ""),
      ...(b.health === "up"
        ? [num(b.connections), num(`${(b.diskUsedRatio * 100).toFixed(1)} %`),
          el("td", { class: "num", "data-testid": "broker-put" }, fmtInt(b.msgPutTotal)), num(fmtInt(b.msgGetTotal))]
        : [el("td", { colspan: 4, class: "health-down" }, b.error || "")]),
      el("td", {}, ago(b.lastHeartbeatMs)));
  });
  tid("cluster-table").querySelector("tbody").replaceChildren(...rows);
  const box = tid("controller");
  if (!c.controller) { box.replaceChildren(); return; }
  box.replaceChildren(c.controller.error
    ? el("div", { class: "error" }, `controller ${c.controller.addr}: ${c.controller.error}`)
    : el("p", {}, `Controller leader ${c.controller.leader}, raft term ${c.controller.term}.`));
}

// ---- charts ----

const COLORS = ["#2f6fde", "#e0782a", "#1a9a5b", "#a13bbf"];

// chart draws lines (each {name, values: [[t, v]...]}) over a shared time
// axis as an SVG; values below zero are unknown and break the line.
function chart(testid, title, unit, lines) {
  const W = 420, H = 140, L = 44, R = 8, T = 8, B = 18;
  const all = lines.flatMap((l) => l.values.filter(([, v]) => v >= 0));
  const ts = lines.flatMap((l) => l.values.map(([t]) => t));
  const t0 = Math.min(...ts), t1 = Math.max(...ts);
  const vmax = Math.max(1e-9, ...all.map(([, v]) => v)) * 1.1;
  const x = (t) => L + (t1 > t0 ? ((t - t0) / (t1 - t0)) * (W - L - R) : 0);
  const y = (v) => T + (1 - v / vmax) * (H - T - B);
  const svg = el("svg", { class: "chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-testid": testid, role: "img", "aria-label": title });
  for (const f of [0, 0.5, 1]) {
    svg.append(el("line", { class: "grid", x1: L, x2: W - R, y1: y(vmax * f / 1.1), y2: y(vmax * f / 1.1) }),
      el("text", { x: 2, y: y(vmax * f / 1.1) + 3 }, fmtRate(vmax * f / 1.1)));
  }
  if (ts.length) {
    svg.append(el("text", { x: L, y: H - 4 }, `${Math.round((t1 - t0) / 1000)} s ago`), el("text", { x: W - R - 20, y: H - 4 }, "now"));
  }
  lines.forEach((l, i) => {
    const pts = l.values.filter(([, v]) => v >= 0).map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`);
    const color = COLORS[i % COLORS.length];
    svg.append(el("polyline", { "data-testid": "chart-line", "data-name": l.name, "data-points": pts.length,
      points: pts.join(" "), fill: "none", stroke: color, "stroke-width": 1.5 }));
    if (pts.length) { // the latest value as a dot: visible even as a single point
      const [cx, cy] = pts[pts.length - 1].split(",");
      svg.append(el("circle", { cx, cy, r: 2.5, fill: color }));
    }
  });
  const swatch = (i) => el("svg", { width: 12, height: 4 }, el("rect", { width: 12, height: 4, fill: COLORS[i % COLORS.length] }));
  const legend = el("div", { class: "legend" }, lines.map((l, i) => el("span", {}, swatch(i), " ", l.name)));
  return el("div", {}, el("div", {}, `${title} (${unit})`), svg, legend);
}

function renderCharts(h) {
  const cards = (h.brokers || []).map((b) => {
    const p = b.points;
    const line = (name, f) => ({ name, values: p.map((q) => [q.t, f(q)]) });
    const note = b.latencyError ? el("div", { class: "legend" }, `latency unknown: ${b.latencyError}`) : null;
    return el("div", { class: "chart-card", "data-testid": "chart-card", "data-addr": b.addr },
      el("h3", {}, `${b.group} #${b.id} ${b.addr} `, el("span", { class: `health-${b.health}` }, `${b.role} ${b.health}`)),
      chart("chart-throughput", "Throughput", "messages/s", [line("stored", (q) => q.in), line("pulled", (q) => q.out)]),
      chart("chart-latency", "Send latency", "ms", [line("mean", (q) => q.latMeanMs), line("p99 ≤", (q) => q.latP99Ms)]),
      note);
  });
  tid("charts").replaceChildren(...cards);
}

// ---- topics ----

function renderTopics(t) {
  showError("topics", t.error);
  if (t.error) return;
  const groupsOf = (q) => Object.keys(q.lag).sort();
  const blocks = t.topics.map((tp) => {
    const rows = tp.queues.map((q) => el("tr", { "data-testid": "queue-row", "data-topic": tp.topic, "data-broker": q.brokerGroup, "data-queue": q.queueId },
      el("td", {}, q.brokerGroup), num(q.queueId),
      el("td", { class: "num", "data-testid": "queue-min" }, q.error ? "" : q.min),
      el("td", { class: "num", "data-testid": "queue-max" }, q.error ? "" : q.max),
      el("td", {}, groupsOf(q).map((g) => el("span", { "data-testid": "queue-lag", "data-group": g }, `${g}: ${q.lag[g]} `))),
      el("td", { class: "error-cell" }, q.error || "")));
    const del = el("button", { type: "button", class: "danger", "data-testid": "topic-delete", "data-topic": tp.topic }, "Delete…");
    del.addEventListener("click", () => confirmThen(`Delete topic ${tp.topic} on every master and in the name servers?`,
      () => mutate(`/api/topics/${encodeURIComponent(tp.topic)}`, { method: "DELETE" }, `deleted ${tp.topic}`)));
    return el("div", { "data-testid": "topic", "data-topic": tp.topic },
      el("h3", {}, tp.topic, " ", del),
      tp.error ? el("div", { class: "error" }, tp.error) : null,
      table("queue-table", ["Broker group", "Queue", "Min offset", "Max offset", "Lag by group", ""], rows));
  });
  tid("topics").replaceChildren(...(blocks.length ? blocks : [el("p", {}, "no topics")]));
}

// ---- consumer groups ----

function renderGroups(g) {
  showError("groups", g.error || (g.errors || []).map((e) => `${e.brokerGroup} (${e.addr}): ${e.error}`).join("\n"));
  if (g.error) return;
  const blocks = g.groups.map((gr) => {
    const members = gr.members.map((m) => el("li", {}, `${m.clientId} (${m.address}): `,
      m.queues.map((q) => `${q.topic}#${q.queueId}`).join(", ") || "no queues"));
    const rows = gr.queues.map((q) => el("tr", { "data-testid": "group-queue-row", "data-group": gr.group, "data-broker": gr.brokerGroup, "data-topic": q.topic, "data-queue": q.queueId },
      el("td", {}, q.topic), num(q.queueId), el("td", {}, q.owner || (q.pending ? `→ ${q.pending}` : "unassigned")),
      num(q.committedOffset), num(q.maxOffset), el("td", { class: "num", "data-testid": "group-lag" }, q.lag)));
    return el("div", { "data-testid": "group", "data-group": gr.group, "data-broker": gr.brokerGroup },
      el("h3", {}, `${gr.group} on ${gr.brokerGroup} `, el("small", {}, `${gr.model}, generation ${gr.generation}, lag `,
        el("span", { "data-testid": "group-total-lag" }, gr.lag))),
      gr.error ? el("div", { class: "error" }, gr.error) : null,
      el("ul", {}, members.length ? members : el("li", {}, "no live members")),
      table("group-queue-table", ["Topic", "Queue", "Owner", "Committed", "Max offset", "Lag"], rows));
  });
  tid("groups").replaceChildren(...(blocks.length ? blocks : [el("p", {}, "no consumer groups")]));
}

// ---- replication ----

function renderReplication(r) {
  showError("replication", r.error || r.controllerError);
  if (r.error) return;
  const blocks = r.groups.map((g) => {
    const c = g.controller;
    const head = c ? `master #${c.masterId} ${c.masterAddr}, epoch ${c.masterEpoch}, SyncStateSet {${c.syncStateSet.join(", ")}} (epoch ${c.syncStateSetEpoch})`
      : `master ${g.master || "none up"}`;
    const rows = g.slaves.map((s) => el("tr", { "data-testid": "slave-row", "data-group": g.group, "data-addr": s.address },
      el("td", {}, `#${s.brokerId} ${s.address}`), num(s.ackedOffset), num(s.flushedOffset),
      el("td", { class: "num", "data-testid": "slave-lag" }, s.lagBytes), el("td", {}, s.inSync ? "in sync" : "behind")));
    const own = g.slaveStatus.map((s) => el("li", {}, s.health === "up"
      ? `#${s.id} ${s.addr}: ${s.haStatus}, ${s.lagBytes} bytes behind the master's end it heard of`
      : `#${s.id} ${s.addr} (${s.health}): ${s.error || ""}`));
    return el("div", { "data-testid": "replication-group", "data-group": g.group },
      el("h3", {}, `${g.group}: `, el("small", { "data-testid": "sync-state-set" }, head)),
      el("p", {}, `log end ${fmtInt(g.masterMaxOffset)} bytes, replicated to ${fmtInt(g.replicatedOffset)}`),
      table("slave-table", ["Slave (master's view)", "Acked", "Flushed", "Lag bytes", ""], rows),
      el("ul", {}, own));
  });
  tid("replication").replaceChildren(...blocks);
}

// ---- message lookup ----

function renderMessages(res) {
  const out = [];
  for (const e of res.errors || (res.error ? [res.error] : [])) out.push(el("div", { class: "error" }, e));
  const msgs = res.messages || [];
  if (!msgs.length && !out.length) out.push(el("p", { "data-testid": "lookup-empty" }, "no message found"));
  for (const m of msgs) {
    const props = Object.keys(m.properties).sort().map((k) => el("tr", {}, el("td", {}, k), el("td", {}, m.properties[k])));
    const body = m.bodyText !== undefined
      ? el("pre", { class: "body", "data-testid": "message-body", "data-encoding": "text" }, m.bodyText)
      : el("pre", { class: "body", "data-testid": "message-body", "data-encoding": "hex" }, m.bodyHex.replace(/(..)/g, "$1 ").trim());
    out.push(el("div", { class: "message", "data-testid": "message" },
      el("p", {}, "id ", el("code", { "data-testid": "message-id" }, m.msgId),
        ` · ${m.topic} queue ${m.queueId} offset ${m.queueOffset} · stored by ${m.storeHost} ${new Date(m.storeTimestamp).toISOString()}`),
      table("message-properties", ["Property", "Value"], props),
      el("p", {}, `body, ${m.bodySize} bytes${m.truncated ? " (first 4 KiB)" : ""}:`), body));
  }
  tid("lookup-result").replaceChildren(...out);
}

$("#key-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  renderMessages(await api(`/api/message?topic=${encodeURIComponent(f.get("topic"))}&key=${encodeURIComponent(f.get("key"))}`));
});
$("#id-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  renderMessages(await api(`/api/message?id=${encodeURIComponent(new FormData(ev.target).get("id"))}`));
});

// ---- topic create / delete ----

// confirmThen shows the confirm box and runs action on Yes.
function confirmThen(text, action) {
  const box = tid("confirm");
  tid("confirm-text").textContent = text;
  box.hidden = false;
  const done = (yes) => { box.hidden = true; tid("confirm-yes").onclick = tid("confirm-no").onclick = null; if (yes) action(); };
  tid("confirm-yes").onclick = () => done(true);
  tid("confirm-no").onclick = () => done(false);
}

async function mutate(path, opts, okText) {
  const status = tid("topic-action-status");
  status.textContent = "working…";
  const headers = { "X-Wharf-Dashboard": "1", "Content-Type": "application/json" };
  const res = await api(path, { ...opts, headers });
  status.textContent = res.error ? `failed: ${res.error}` : `${okText} (${res.brokers.join(", ")})`;
  status.className = res.error ? "error" : "";
  refresh();
}

$("#create-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const topic = f.get("topic"), queues = Number(f.get("queues"));
  confirmThen(`Create topic ${topic} with ${queues} queues on every master of the cluster?`,
    () => mutate("/api/topics", { method: "POST", body: JSON.stringify({ topic, queues }) }, `created ${topic}`));
});

// ---- refresh loop ----

async function refresh() {
  const all = $("#show-system").checked ? "?all=1" : "";
  const sections = [
    ["/api/cluster", renderCluster, "cluster"], ["/api/history", renderCharts, null],
    ["/api/topics" + all, renderTopics, "topics"], ["/api/groups", renderGroups, "groups"],
    ["/api/replication", renderReplication, "replication"]];
  let failed = 0;
  await Promise.all(sections.map(async ([path, render, name]) => {
    try {
      render(await api(path));
    } catch (e) {
      failed++;
      if (name) showError(name, `dashboard server unreachable: ${e}`);
    }
  }));
  const st = $("#status");
  st.textContent = failed ? `dashboard unreachable (${new Date().toLocaleTimeString()})` : `updated ${new Date().toLocaleTimeString()}`;
  st.className = failed ? "stale" : "";
  st.dataset.refreshes = String(Number(st.dataset.refreshes || 0) + 1);
}

refresh();
setInterval(refresh, REFRESH_MS);
