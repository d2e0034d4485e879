// Overview: jobs per state (each a link to the Jobs page filtered to it),
// queue and worker totals, and the last hour per minute (jobs finished,
// queue wait and run time) for all task types or one.

import { api } from "./api.js";
import { $, duration, el, setText, STATES } from "./dom.js";
import { lineChart } from "./charts.js";

/** Most task types drawn as their own line; the rest are in the total. */
const MAX_LINES = 6;
let app;

export const overview = {
  init(theApp) {
    app = theApp;
    $("#counts").append(...STATES.map((state) =>
      el("a", { class: "card", href: `#/jobs?state=${state}`, "data-state": state },
        el("b", {}, "–"), el("span", {}, state))));
    const summary = [
      ["ready", "ready to run"], ["delayed", "delayed"], ["free", "free worker slots"],
      ["workers", "workers"], ["minute", "finished, last minute"],
    ];
    $("#summary").append(...summary.map(([key, label]) =>
      el("div", { class: "card", "data-stat": key }, el("b", {}, "–"), el("span", {}, label))));
    $("#chart-type").addEventListener("change", () => app.update({ type: $("#chart-type").value }));
  },

  show(route) {
    if (route.page === "overview") $("#chart-type").value = route.params.get("type") || "";
  },

  async refresh(route, stats) {
    for (const state of STATES) setText($(`#counts [data-state=${state}] b`), stats.jobs[state] ?? 0);
    const values = {
      ready: stats.queue_depth.ready,
      delayed: stats.queue_depth.delayed,
      free: `${stats.workers.free} / ${stats.workers.capacity}`,
      workers: stats.workers.connected,
      minute: stats.throughput.last_minute,
    };
    for (const [key, value] of Object.entries(values)) setText($(`#summary [data-stat=${key}] b`), value);
    const [timeline, cluster] = await Promise.all([api("/api/timeline"), api("/api/cluster")]);
    renderCharts(timeline, route.params.get("type") || "");
    renderCluster(cluster);
  },
};

function renderCharts(timeline, type) {
  const select = $("#chart-type");
  const names = timeline.series.map((s) => s.task_type);
  const offered = [...select.options].slice(1).map((o) => o.value);
  if (names.join() !== offered.join()) {
    select.replaceChildren(new Option("all types", ""), ...names.map((n) => new Option(n, n)));
    select.value = names.includes(type) ? type : "";
  }
  const one = timeline.series.find((s) => s.task_type === type);
  const chosen = one || timeline.total;
  const finished = one
    ? [{ name: "succeeded", values: one.succeeded }, { name: "failed", values: one.failed }]
    : perType(timeline);
  lineChart($("#chart-throughput"), $("#legend-throughput"), timeline.minute_starts, finished);
  lineChart($("#chart-latency"), $("#legend-latency"), timeline.minute_starts, [
    { name: "queue wait p95", values: chosen.wait_p95_ms },
    { name: "run time p95", values: chosen.run_p95_ms },
    { name: "queue wait mean", values: chosen.wait_mean_ms, dashed: true },
    { name: "run time mean", values: chosen.run_mean_ms, dashed: true },
  ].filter((s) => s.values.some((v) => v != null)), (ms) => duration(ms));
  setText($("#chart-note"), `per minute, last hour${one ? ", " + type : ""}`);
}

/** Jobs finished per type: the busiest types, then all together. */
function perType(timeline) {
  const total = (s) => s.succeeded.reduce((a, b) => a + b, 0) + s.failed.reduce((a, b) => a + b, 0);
  const busiest = [...timeline.series].sort((a, b) => total(b) - total(a)).slice(0, MAX_LINES - 1);
  const lines = busiest.map((s) => ({ name: s.task_type, values: s.succeeded.map((n, i) => n + s.failed[i]) }));
  if (timeline.series.length > 1) {
    const t = timeline.total;
    lines.push({ name: "all types", values: t.succeeded.map((n, i) => n + t.failed[i]), dashed: true });
  }
  return lines;
}

// Answered by a standby too: who leads, and where to find it.
function renderCluster(cluster) {
  const l = cluster.leader;
  const lease = l && l.expires_in_ms != null ? `, lease expires in ${duration(Math.max(0, l.expires_in_ms))}` : "";
  setText($("#cluster-line"), l && l.node
    ? `${l.node} leads (epoch ${l.epoch}${lease}); this is ${cluster.node || "the coordinator"}, ${cluster.role}.`
    : `This is ${cluster.node || "the coordinator"}, ${cluster.role}.`);
}
