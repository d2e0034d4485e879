// Queues: per task type, the ready jobs (and how they split by priority),
// how long the head has been ready (latency) and since its submission
// (oldest), delayed and retry-wait counts, running jobs, and the workers
// that run the type, with a warning when none does.

import { api } from "./api.js";
import { $, duration, el, patchRows, PRIORITIES, setText, showEmpty } from "./dom.js";

const columns = [
  { text: (t) => t.task_type, render: (td, t) => td.append(el("a", { href: "#/jobs?type=" + encodeURIComponent(t.task_type) }, t.task_type)) },
  { text: (t) => t.ready, label: "ready" },
  { text: (t) => byPriority(t.task_type), class: "hide-narrow" },
  { text: (t) => t.latency_ms == null ? "—" : duration(t.latency_ms), label: "latency" },
  { text: (t) => t.oldest_age_ms == null ? "—" : duration(t.oldest_age_ms), class: "hide-narrow" },
  { text: (t) => t.delayed, label: "delayed" },
  { text: (t) => t.retry_wait, label: "retry wait" },
  { text: (t) => t.running, label: "running" },
  {
    text: (t) => [t.no_worker, t.workers, t.free_slots].join("|"),
    render(td, t) {
      if (t.no_worker) td.append(el("span", { class: "warn-tag" }, "no worker runs this type"));
      else td.append(`${t.workers} (${t.free_slots} free slot${t.free_slots === 1 ? "" : "s"})`);
    },
  },
];

let heads = [];

function byPriority(type) {
  const depth = Object.fromEntries(heads.filter((q) => q.task_type === type).map((q) => [q.priority, q.depth]));
  return PRIORITIES.filter((p) => depth[p]).map((p) => `${p} ${depth[p]}`).join(" · ") || "—";
}

export const queues = {
  init() {},

  async refresh() {
    const answer = await api("/api/queues");
    heads = answer.queues;
    const types = [...answer.task_types].sort((a, b) => a.task_type.localeCompare(b.task_type));
    patchRows($("#queues tbody"), types, (t) => t.task_type, columns, (row, t) => {
      row.dataset.type = t.task_type;
      row.classList.toggle("warn", t.no_worker);
    });
    showEmpty($("#queues-empty"), types.length);
    const ready = types.reduce((n, t) => n + t.ready, 0);
    const orphaned = types.filter((t) => t.no_worker).map((t) => t.task_type);
    setText($("#queues-summary"), `${ready} ready across ${types.length} task type${types.length === 1 ? "" : "s"}`
      + (orphaned.length ? `; no worker runs ${orphaned.join(", ")}.` : "."));
  },
};
