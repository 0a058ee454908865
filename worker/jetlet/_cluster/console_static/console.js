// jetlet console: a small hand-written single-page script, no framework, no build step.
//
// Three views by URL hash: #/ (the cluster), #/jobs, #/jobs/<id>. Data comes from the member's
// REST API, authenticated by the session cookie that POST /console/login sets; every action
// sends the session's CSRF token in X-CSRF-Token. The job-event feed (/events, long-polled) keeps
// the open view current, and the job view polls /jobs/<id>/metrics every second for the rates.
// Text from the cluster (job and vertex names, failures) only ever goes in through textContent.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const METRICS_EVERY_MS = 1000;
const ACTIONS = {
  suspend: ["RUNNING"],
  resume: ["SUSPENDED"],
  restart: ["RUNNING"],
  cancel: ["NOT_RUNNING", "STARTING", "RUNNING", "SUSPENDED"],
  "export-snapshot": ["RUNNING", "SUSPENDED"],
};
const MEMBER_COLORS = ["#2a9d8f", "#e76f51", "#457b9d", "#e9c46a", "#8d6cab", "#f4a261", "#6a994e", "#bc4749"];

const state = { csrf: null, loggedIn: false, anonymous: "none", lastEvent: 0, view: null, feed: null };

// ----------------------------------------------------------------------------- small helpers

function h(tag, attrs = {}, ...children) {
  const el = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

async function api(path, method = "GET", body = undefined) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") {
    headers["Content-Type"] = "application/json";
    if (state.csrf) headers["X-CSRF-Token"] = state.csrf;
  }
  const response = await fetch(path, {
    method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(data.error || `${method} ${path}: HTTP ${response.status}`);
    error.status = response.status;
    throw error;
  }
  return data;
}

function say(text, kind = "error") {
  const box = document.getElementById("message");
  box.textContent = text;
  box.className = kind;
  box.hidden = !text;
}

const fmtTime = (ms) => (ms ? new Date(ms).toLocaleString() : "—");
function fmtCount(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "—";
  const abs = Math.abs(n);
  if (abs >= 1e9) return (n / 1e9).toFixed(1) + "G";
  if (abs >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (abs >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return abs >= 100 ? Math.round(n).toString() : n.toFixed(n % 1 ? 1 : 0);
}
function fmtBytes(n) {
  if (n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}
function debounce(fn, ms = 150) {
  let pending = null;
  return () => {
    clearTimeout(pending);
    pending = setTimeout(() => fn().catch((error) => say(error.message)), ms);
  };
}
function statusBadge(status) {
  const badge = h("span");
  setStatus(badge, status);
  return badge;
}

// ----------------------------------------------------------------------------- login

async function refreshSession() {
  const session = await api("/console/session");
  state.loggedIn = session.logged_in;
  state.csrf = session.csrf || null;
  state.anonymous = session.anonymous;
  document.getElementById("login-form").hidden = state.loggedIn;
  document.getElementById("logged-in").hidden = !state.loggedIn;
  document.getElementById("read-only").hidden = state.loggedIn || state.anonymous !== "read-only";
}

async function login(event) {
  event.preventDefault();
  const input = document.getElementById("token");
  try {
    await api("/console/login", "POST", { token: input.value });
    input.value = "";
    say("");
    await refreshSession();
    startFeed();
    route();
  } catch (error) {
    say(`Login refused: ${error.message}`);
  }
}

async function logout() {
  try { await api("/console/logout", "POST", {}); } catch (error) { say(error.message); }
  await refreshSession();
  stopFeed();
  route();
}

const canRead = () => state.loggedIn || state.anonymous === "read-only";

// ----------------------------------------------------------------------------- the event feed

function live(on, text) {
  document.getElementById("live").className = on ? "dot on" : "dot";
  document.getElementById("live-text").textContent = text;
}

function startFeed() {
  stopFeed();
  if (!canRead()) {
    live(false, "not following the job-event feed: log in");
    return;
  }
  const feed = { stopped: false };
  state.feed = feed;
  (async () => {
    let backoff = 500;
    while (!feed.stopped) {
      try {
        const page = await api(`/events?since=${state.lastEvent}&timeout=20`);
        live(true, "live: following the job-event feed");
        backoff = 500;
        for (const event of page.events) {
          state.lastEvent = Math.max(state.lastEvent, event.id);
          if (!feed.stopped && state.view && state.view.onEvent) state.view.onEvent(event);
        }
      } catch (error) {
        live(false, `event feed: ${error.message}; retrying`);
        await new Promise((resolve) => setTimeout(resolve, backoff));
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  })();
}

function stopFeed() {
  if (state.feed) state.feed.stopped = true;
  state.feed = null;
}

// ----------------------------------------------------------------------------- actions

// The buttons are made once per job shown and updated in place. A redraw (one per job event: with
// snapshots every second, once a second) must never replace a button under the pointer: a click whose
// mousedown lands on one button and whose mouseup lands on its replacement is no click at all.
function actionBar(after) {
  let job = null;
  const buttons = Object.keys(ACTIONS).map((action) => h("button", {
    type: "button", class: action === "cancel" ? "danger" : null, "data-action": action,
    onclick: () => act(job, action, after),
  }, action === "export-snapshot" ? "export snapshot" : action));
  return {
    buttons,
    update(current) {
      job = current;
      for (const button of buttons) {
        button.disabled = !(state.loggedIn && ACTIONS[button.dataset.action].includes(job.status));
        if (state.loggedIn) button.removeAttribute("title");
        else button.title = "log in to act on jobs";
      }
    },
  };
}

// A status badge updated in place (see actionBar).
function setStatus(badge, status) {
  badge.className = `status ${status}`;
  badge.dataset.status = status;
  badge.textContent = status;
}

async function act(job, action, after) {
  let body = {};
  if (action === "cancel" && !window.confirm(`Cancel job ${job.name}? It ends FAILED.`)) return;
  if (action === "export-snapshot") {
    const name = window.prompt("Name of the exported snapshot:", `${job.name}-${Date.now()}`);
    if (!name) return;
    body = { name };
  }
  try {
    await api(`/jobs/${job.id}/${action}`, "POST", body);
    say(`${action}: requested for ${job.name}`, "info");
  } catch (error) {
    say(`${action} of ${job.name} refused: ${error.message}`);
  }
  await after().catch((error) => say(error.message));
}

// ----------------------------------------------------------------------------- the cluster view

function clusterView() {
  const root = h("div");
  async function draw() {
    const cluster = await api("/cluster");
    const table = cluster.partition_table || { partition_count: 0, members: {} };
    const color = {};
    cluster.members.forEach((m, i) => { color[m.name] = MEMBER_COLORS[i % MEMBER_COLORS.length]; });
    const owner = new Array(table.partition_count).fill(null);
    for (const [name, ids] of Object.entries(table.members || {})) for (const id of ids) owner[id] = name;
    root.replaceChildren(
      h("h1", {}, "Cluster", h("span", { class: "badge" }, `version ${cluster.version}`)),
      h("table", {},
        h("thead", {}, h("tr", {}, ["Member", "Data address", "REST address", "Partitions"].map((t) => h("th", {}, t)))),
        h("tbody", {}, cluster.members.map((m) => h("tr", { "data-member": m.name },
          h("td", {}, h("i", { class: "dot", "data-color": color[m.name] }), " ", m.name,
            m.is_coordinator ? h("span", { class: "badge" }, "coordinator") : null),
          h("td", { class: "mono" }, m.data_address),
          h("td", { class: "mono" }, m.rest_address),
          h("td", {}, String((table.members[m.name] || []).length)))))),
      h("h2", {}, `Partitions (${table.partition_count})`),
      h("div", { class: "card" },
        h("div", { class: "partitions" }, owner.map((name, id) => h("span", { title: `partition ${id}: ${name || "unassigned"}`, "data-color": color[name] || "#ccc" }))),
        h("div", { class: "legend" }, cluster.members.map((m) => h("span", {}, h("i", { "data-color": color[m.name] }), m.name)))),
    );
    paint(root);
  }
  const redraw = debounce(draw);
  return {
    root, draw,
    onEvent: (event) => { if (event.kind.startsWith("member_") || event.kind === "coordinator_changed") redraw(); },
  };
}

// Colours come in as data-color and are set through the CSSOM (the CSP forbids inline styles).
function paint(root) {
  for (const el of root.querySelectorAll("[data-color]")) el.style.background = el.dataset.color;
}

// ----------------------------------------------------------------------------- the jobs view

function jobsView() {
  const root = h("div");
  const count = h("span", { class: "badge" });
  const tbody = h("tbody");
  const table = h("table", {},
    h("thead", {}, h("tr", {}, ["Job", "Status", "Submitted", "Completed", "Actions"].map((t) => h("th", {}, t)))), tbody);
  const empty = h("p", { class: "muted" }, "No jobs yet: submit one with `jetlet submit`.");
  const rows = new Map(); // job id -> its row, kept across redraws (see actionBar)

  function rowOf(job) {
    let row = rows.get(job.id);
    if (!row) {
      const status = statusBadge(job.status), completed = h("td"), bar = actionBar(draw);
      const failure = h("pre", { class: "failure" });
      row = {
        tr: h("tr", { "data-job": job.name },
          h("td", {}, h("a", { href: `#/jobs/${job.id}` }, job.name), h("div", { class: "mono muted" }, job.id_string)),
          h("td", {}, status), h("td", {}, fmtTime(job.submission_time)), completed, h("td", { class: "actions" }, bar.buttons)),
        failureRow: h("tr", {}, h("td", { colspan: 5 }, failure)),
        status, completed, bar, failure,
      };
      rows.set(job.id, row);
    }
    setStatus(row.status, job.status);
    row.completed.textContent = fmtTime(job.completion_time);
    row.bar.update(job);
    row.failure.textContent = job.cancelled ? "cancelled" : job.failure || "";
    return row;
  }

  async function draw() {
    const { jobs } = await api("/jobs");
    jobs.sort((a, b) => b.submission_time - a.submission_time);
    const wanted = jobs.flatMap((job) => {
      const row = rowOf(job);
      return job.status === "FAILED" && job.failure ? [row.tr, row.failureRow] : [row.tr];
    });
    // rows are moved only when the order or the set changed, so a row under the pointer stays put
    if (wanted.length !== tbody.children.length || wanted.some((tr, i) => tbody.children[i] !== tr)) {
      tbody.replaceChildren(...wanted);
    }
    count.textContent = `${jobs.length}`;
    const body = jobs.length ? table : empty;
    if (root.childNodes.length !== 2 || root.lastChild !== body) root.replaceChildren(h("h1", {}, "Jobs", count), body);
  }
  const redraw = debounce(draw);
  return { root, draw, onEvent: (event) => { if (event.job_id) redraw(); } };
}

// ----------------------------------------------------------------------------- the job view

// Per vertex, summed over members, processors and ordinals, from /jobs/<id>/metrics: its samples
// ([{name, labels: {vertex, member, proc...}, value}]), or else its older {"member/vertex#i": {name: value}}.
// The watermark is the lowest over the processors; "processors" counts the (member, proc) pairs.
function vertexMetrics(body) {
  const out = {};
  const add = (vertex, name, value, processor) => {
    if (typeof value !== "number") return;
    const v = (out[vertex] ||= { wm: null, processors: new Set() });
    if (processor) v.processors.add(processor);
    if (name === "topObservedWm" || name === "coalescedWm" || name === "lastForwardedWm") {
      if (value > -9e18) v.wm = v.wm === null ? value : Math.min(v.wm, value);
    } else {
      v[name] = (v[name] || 0) + value;
    }
  };
  if (Array.isArray(body.samples)) {
    for (const { name, labels, value } of body.samples) {
      if (labels && labels.vertex) add(labels.vertex, name, value, labels.proc === undefined ? null : `${labels.member}/${labels.proc}`);
    }
  } else {
    for (const [key, values] of Object.entries(body.metrics || {})) {
      const match = /^([^/]*\/(.*))#\d+$/.exec(key);
      if (match) for (const [name, value] of Object.entries(values)) add(match[2], name, value, key);
    }
  }
  return out;
}

function layout(graph) {
  const rank = {};
  for (const v of graph.vertices) rank[v.name] = 0;
  for (let pass = 0; pass < graph.vertices.length; pass += 1) {
    for (const e of graph.edges) rank[e.destination] = Math.max(rank[e.destination], rank[e.source] + 1);
  }
  const rows = [];
  for (const v of graph.vertices) (rows[rank[v.name]] ||= []).push(v.name);
  const W = 300, H = 96, GAP_X = 36, GAP_Y = 44;
  const widest = Math.max(...rows.map((r) => r.length));
  const width = widest * (W + GAP_X) + GAP_X;
  const at = {};
  rows.forEach((names, r) => {
    const offset = (width - names.length * (W + GAP_X) + GAP_X) / 2;
    names.forEach((name, i) => { at[name] = { x: offset + i * (W + GAP_X), y: 20 + r * (H + GAP_Y) }; });
  });
  return { at, W, H, width, height: rows.length * (H + GAP_Y) + 10 };
}

function drawDag(graph) {
  const { at, W, H, width, height } = layout(graph);
  const svg = h("svg:svg", {
    class: "dag", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "the job's DAG",
  },
    h("svg:defs", {}, h("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
      h("svg:path", { d: "M0,0 L10,5 L0,10 z" }))));
  const boxes = {};
  for (const e of graph.edges) {
    const a = at[e.source], b = at[e.destination];
    const x1 = a.x + W / 2, y1 = a.y + H, x2 = b.x + W / 2, y2 = b.y;
    const mid = (y1 + y2) / 2;
    svg.append(h("svg:path", {
      class: e.distributed ? "edge distributed" : "edge", "marker-end": "url(#arrow)",
      d: `M${x1},${y1} C${x1},${mid} ${x2},${mid} ${x2},${y2 - 2}`,
    }));
    const label = e.routing + (e.distributed ? " · distributed" : "") + (e.priority ? ` · priority ${e.priority}` : "");
    svg.append(h("svg:text", { class: "routing", x: (x1 + x2) / 2 + 8, y: mid + 4 }, label));
  }
  for (const v of graph.vertices) {
    const { x, y } = at[v.name];
    const rate = h("svg:text", { class: "rate", x: x + 10, y: y + 40, "data-rate": v.name }, "");
    const detail = h("svg:text", { class: "detail", x: x + W - 10, y: y + 40, "text-anchor": "end" }, "");
    const queue = h("svg:rect", { class: "queue", x: x + 10, y: y + 82, width: 0, height: 6, rx: 2 });
    const localParallelism = v.local_parallelism === null ? "parallelism: default" : `parallelism: ${v.local_parallelism}`;
    svg.append(h("svg:g", { class: "vertex", "data-vertex": v.name },
      h("svg:rect", { class: "box", x, y, width: W, height: H, rx: 8 }),
      h("svg:text", { class: "name", x: x + 10, y: y + 20 }, v.name),
      h("svg:text", { class: "detail", x: x + 10, y: y + 74, "data-parallelism": v.name }, localParallelism),
      rate, detail,
      h("svg:text", { class: "detail", x: x + 10, y: y + 58, "data-lag": v.name }, ""),
      h("svg:rect", { class: "queue-bg", x: x + 10, y: y + 82, width: W - 20, height: 6, rx: 2 }),
      queue));
    const lag = svg.lastChild.querySelector("[data-lag]");
    const parallelism = svg.lastChild.querySelector("[data-parallelism]");
    boxes[v.name] = { rate, detail, lag, queue, parallelism, localParallelism, sink: !graph.edges.some((e) => e.source === v.name) };
  }
  return { svg, boxes, W };
}

function jobView(id) {
  const root = h("div");
  const dagHolder = h("div");
  const facts = h("dl", { class: "facts" });
  const events = h("ol", { class: "events" });
  // the header is made once and updated in place (see actionBar)
  const name = h("span"), status = statusBadge("STARTING"), idString = h("span", { class: "mono muted" });
  const bar = actionBar(drawJob);
  const header = h("h1", {}, name, status, idString, h("span", { class: "toolbar" }, bar.buttons));
  const failure = h("div");
  let dag = null, previous = null, timer = null, job = null, closed = false;
  const shown = new Set();
  const live = () => job && ["STARTING", "RUNNING", "COMPLETING"].includes(job.status);

  async function drawJob() {
    job = await api(`/jobs/${id}`);
    name.textContent = job.name;
    setStatus(status, job.status);
    idString.textContent = job.id_string;
    bar.update(job);
    const snapshot = job.snapshot || {};
    const rows = [
      ["Submitted", fmtTime(job.submission_time)], ["Completed", fmtTime(job.completion_time)],
      ["Guarantee", job.config.processing_guarantee], ["Restarts", job.restarts],
      ["Snapshots", snapshot.count || 0],
      ["Last snapshot", snapshot.id ? `#${snapshot.id}, ${fmtBytes(snapshot.bytes)}, ${snapshot.entries} keys, ${snapshot.duration_ms} ms` : "—"],
      ["Snapshot at", fmtTime(snapshot.time)],
    ];
    if (job.suspension_cause) rows.push(["Suspended", job.suspension_cause]);
    facts.replaceChildren(...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-fact": k }, String(v))]));
    if (dag && job.status !== "RUNNING") for (const box of Object.values(dag.boxes)) box.rate.textContent = "";
    failure.replaceChildren(job.status === "FAILED"
      ? h("div", {}, h("h2", {}, job.cancelled ? "Cancelled" : "Failure"),
        h("pre", { class: "failure" }, job.failure + (job.failure_traceback ? `\n\n${job.failure_traceback}` : "")))
      : "");
  }

  async function pollMetrics() {
    if (!dag || !job || (previous && !live())) return; // a finished job's counts are read once
    try {
      const body = await api(`/jobs/${id}/metrics`);
      const now = performance.now();
      const current = vertexMetrics(body);
      for (const [name, box] of Object.entries(dag.boxes)) {
        const m = current[name] || {};
        const count = box.sink ? m.receivedCount : m.emittedCount;
        let rate = null;
        if (previous && previous.values[name] && count !== undefined) {
          const before = box.sink ? previous.values[name].receivedCount : previous.values[name].emittedCount;
          rate = Math.max(0, (count - before) / ((now - previous.at) / 1000));
        }
        box.rate.textContent = rate === null || job.status !== "RUNNING" ? "" : `${fmtCount(rate)}/s`;
        box.detail.textContent = `${fmtCount(count || 0)} items ${box.sink ? "in" : "out"}`;
        const processors = m.processors ? m.processors.size : 0;
        box.parallelism.textContent = box.localParallelism + (processors ? ` · ${processors} processors` : "");
        const fill = m.queuesCapacity ? m.queuesSize / m.queuesCapacity : 0;
        const parts = [];
        if (m.wm !== null && m.wm !== undefined) {
          parts.push(m.wm > 1e11 ? `watermark lag ${fmtCount(Math.max(0, Date.now() - m.wm))} ms` : `watermark ${fmtCount(m.wm)}`);
        }
        if (m.queuesCapacity) parts.push(`queues ${Math.round(fill * 100)}% full`);
        box.lag.textContent = parts.join(" · ");
        box.queue.setAttribute("width", String(Math.round((dag.W - 20) * Math.min(1, fill))));
        box.queue.setAttribute("class", fill > 0.8 ? "queue high" : "queue");
        box.queue.replaceChildren(h("svg:title", {}, `queues ${m.queuesSize || 0} of ${m.queuesCapacity || "?"}`));
      }
      previous = { at: now, values: current };
    } catch (error) {
      if (error.status !== 404) say(`metrics: ${error.message}`);
    }
  }

  async function draw() {
    await drawJob();
    dag = drawDag(await api(`/jobs/${id}/dag`));
    dagHolder.replaceChildren(dag.svg);
    root.replaceChildren(header, failure,
      h("div", { class: "grid" },
        h("div", {}, h("h2", {}, "DAG"), h("div", { class: "card dag-card" }, dagHolder)),
        h("div", {}, h("h2", {}, "Job"), h("div", { class: "card" }, facts), h("h2", {}, "Events"), h("div", { class: "card" }, events))));
    const history = await api("/events?since=0");
    for (const event of history.events) onEvent(event);
    await pollMetrics();
    if (!closed) timer = setInterval(pollMetrics, METRICS_EVERY_MS);
  }

  const redrawJob = debounce(drawJob);
  function onEvent(event) {
    if (String(event.job_id) !== String(id) || shown.has(event.id)) return;
    shown.add(event.id);
    if (event.kind === "snapshot_started") return;
    const details = event.kind === "snapshot_completed"
      ? ` #${event.details.snapshot_id}, ${fmtBytes(event.details.bytes)} in ${event.details.duration_ms} ms` : "";
    events.prepend(h("li", {}, h("span", { class: "muted" }, new Date(event.time).toLocaleTimeString()), " ",
      event.kind === "job_status" ? `${event.previous_status || "?"} → ${event.status}` : event.kind.replace("_", " "),
      details, event.reason ? h("span", { class: "muted" }, ` (${event.reason})`) : ""));
    redrawJob();
  }

  return { root, draw, onEvent, close: () => { closed = true; clearInterval(timer); } };
}

// ----------------------------------------------------------------------------- routing

async function route() {
  if (state.view && state.view.close) state.view.close();
  const hash = location.hash || "#/";
  const job = /^#\/jobs\/(.+)$/.exec(hash);
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.nav === (job || hash.startsWith("#/jobs") ? "jobs" : "cluster"));
  }
  const main = document.getElementById("view");
  if (!canRead()) {
    state.view = null;
    main.replaceChildren(h("div", { class: "card" }, h("h1", {}, "Log in"),
      h("p", {}, "Enter the cluster's REST token above (the members' --token-file) to see the cluster and act on its jobs."),
      h("p", { class: "muted" }, "A member started with --console-anonymous read-only shows the cluster and its jobs without a login.")));
    return;
  }
  const view = job ? jobView(decodeURIComponent(job[1])) : hash.startsWith("#/jobs") ? jobsView() : clusterView();
  state.view = view;
  main.replaceChildren(view.root);
  try {
    await view.draw();
  } catch (error) {
    if (error.status === 401) { await refreshSession(); say("Your session is over: log in again."); }
    else say(error.message);
  }
}

async function start() {
  document.getElementById("login-form").addEventListener("submit", login);
  document.getElementById("logout").addEventListener("click", logout);
  window.addEventListener("hashchange", route);
  await refreshSession();
  startFeed();
  await route();
}

start();
