// taskyard dashboard: polls the JSON API every 2 s and renders it. No
// framework and no build step. A token (when the coordinator has
// `client-token`) is read from `#token=...` in the URL or localStorage.
"use strict";

const REFRESH_MS = 2000;
const token = (() => {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) localStorage.setItem("taskyardToken", decodeURIComponent(m[1]));
  return localStorage.getItem("taskyardToken");
})();
let selected = null;

// Every request but a GET says Content-Type: application/json, body or
// not: the coordinator refuses state changes without it (a cross-site page
// cannot send that type without a CORS preflight, which it never grants).
async function api(path, options = {}) {
  const headers = { "Accept": "application/json", ...(options.headers || {}) };
  if ((options.method || "GET") !== "GET") headers["Content-Type"] = "application/json";
  if (token) headers["Authorization"] = "Bearer " + token;
  const response = await fetch(path, { ...options, headers });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

const $ = (sel) => document.querySelector(sel);
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c ?? ""));
  return node;
}
const stateBadge = (s) => el("span", { class: "state " + s }, s);
const shortId = (id) => id.slice(0, 8);
function age(ms) {
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  return Math.round(ms / 60000) + " min";
}

const STATES = ["QUEUED", "RUNNING", "RETRY_WAIT", "SUCCEEDED", "FAILED", "CANCELLED"];
const PRIORITIES = ["high", "normal", "low"];

function renderStats(stats) {
  $("#counts").replaceChildren(...STATES.map((state) =>
    el("div", { class: "count", "data-state": state }, el("b", {}, String(stats.jobs[state] ?? 0)), state)));
  const depth = stats.queue_depth.by_priority;
  $("#queues").replaceChildren(...PRIORITIES.map((p) =>
    el("div", { class: "count", "data-priority": p }, el("b", {}, String(depth[p] ?? 0)), p)));
  const series = stats.throughput.per_second;
  const max = Math.max(1, ...series);
  const points = series.map((n, i) => `${(i * 240) / (series.length - 1)},${38 - (n / max) * 36}`);
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", points.join(" "));
  $("#sparkline").replaceChildren(line);
  $("#throughput-total").textContent = `(${stats.throughput.last_minute} in the last minute)`;
}

function renderWorkers(workers) {
  const rows = workers.map((w) => el("tr", { "data-worker": w.worker_id },
    el("td", {}, w.worker_id),
    el("td", {}, `${w.active} / ${w.capacity}`),
    el("td", {}, age(w.heartbeat_age_ms) + " ago"),
    el("td", {}, w.draining ? "yes" : "no"),
    el("td", { class: "hide-narrow wrap" }, w.task_types.join(", "))));
  if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: "5", class: "muted" }, "no workers connected")));
  $("#workers tbody").replaceChildren(...rows);
}

function renderJobs(page) {
  const rows = page.jobs.map((j) => {
    const row = el("tr", { "data-job": j.job_id, "data-state": j.state },
      el("td", {}, el("code", {}, shortId(j.job_id))),
      el("td", {}, j.task_type),
      el("td", { class: "job-state" }, stateBadge(j.state)),
      el("td", {}, `${j.attempts} / ${j.max_attempts}`),
      el("td", { class: "hide-narrow" }, j.worker_id || ""),
      el("td", { class: "error" }, j.error || ""));
    row.addEventListener("click", () => { selected = j.job_id; refreshDetail(); });
    return row;
  });
  $("#jobs tbody").replaceChildren(...rows);
}

async function refreshDetail() {
  if (!selected) return;
  const job = await api("/api/jobs/" + selected);
  $("#detail").hidden = false;
  $("#detail-id").textContent = job.job_id;
  $("#detail-state").replaceWith(Object.assign(stateBadge(job.state), { id: "detail-state" }));
  $("#cancel-button").disabled = ["SUCCEEDED", "FAILED", "CANCELLED"].includes(job.state);
  const fields = {
    type: job.task_type, priority: job.priority, attempts: `${job.attempts} / ${job.max_attempts}`,
    payload: JSON.stringify(job.payload), result: JSON.stringify(job.result), error: job.error || "",
    submitted: new Date(job.submitted_at).toLocaleString(),
  };
  $("#detail-fields").replaceChildren(...Object.entries(fields).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  $("#history tbody").replaceChildren(...job.history.map((a) => el("tr", {},
    el("td", {}, String(a.number)),
    el("td", {}, a.worker_id),
    el("td", {}, new Date(a.started_at).toLocaleTimeString()),
    el("td", {}, a.ended_at ? age(a.ended_at - a.started_at) : "running"),
    el("td", {}, a.outcome ? describe(a.outcome) : ""))));
}

function describe(outcome) {
  switch (outcome.kind) {
    case "failed": return "failed: " + outcome.error;
    case "timed_out": return `timed out after ${outcome.timeout_ms} ms`;
    case "worker_lost": return "worker lost: " + outcome.reason;
    default: return outcome.kind.replace("_", " ");
  }
}

// Answered by a standby too: who leads, and where to find it.
function renderCluster(cluster) {
  const l = cluster.leader;
  const lease = l && l.expires_in_ms != null
    ? `, lease expires in ${age(Math.max(0, l.expires_in_ms))}` : "";
  const text = l && l.node
    ? `${l.node} leads (epoch ${l.epoch}${lease}); this is ${cluster.node || "the coordinator"}, ${cluster.role}`
    : `no leader; this is ${cluster.node}, ${cluster.role}`;
  $("#cluster-leader").textContent = text;
  const rows = cluster.members.map((m) => el("tr", { "data-node": m.node, "data-role": m.role },
    el("td", {}, m.node || "(this coordinator)"),
    el("td", {}, m.role),
    el("td", {}, m.client ?? "-"),
    el("td", {}, m.seen_ms_ago == null ? "-" : age(m.seen_ms_ago) + " ago")));
  $("#members tbody").replaceChildren(...rows);
}

async function refresh() {
  try {
    renderCluster(await api("/api/cluster"));
  } catch (e) {
    $("#cluster-leader").textContent = "cluster unknown: " + e.message;
  }
  try {
    const [stats, workers, page] = await Promise.all([
      api("/api/stats"), api("/api/workers"), api("/api/jobs?limit=25"),
    ]);
    renderStats(stats);
    renderWorkers(workers);
    renderJobs(page);
    await refreshDetail();
    $("#updated").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    $("#updated").textContent = "refresh failed: " + e.message;
  }
}

$("#submit-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const out = $("#submit-result");
  try {
    const body = {
      task_type: $("#submit-type").value,
      priority: $("#submit-priority").value,
      payload: JSON.parse($("#submit-payload").value || "null"),
    };
    const answer = await api("/api/jobs", {
      method: "POST", body: JSON.stringify(body),
    });
    out.textContent = "submitted " + shortId(answer.job_id);
    refresh();
  } catch (e) {
    out.textContent = "rejected: " + e.message;
  }
});

$("#cancel-button").addEventListener("click", async () => {
  try {
    const job = await api(`/api/jobs/${selected}/cancel`, { method: "POST" });
    $("#detail-message").textContent = "job is " + job.state;
  } catch (e) {
    $("#detail-message").textContent = "cancel failed: " + e.message;
  }
  refresh();
});

$("#close-detail").addEventListener("click", () => { selected = null; $("#detail").hidden = true; });

refresh();
setInterval(refresh, REFRESH_MS);
