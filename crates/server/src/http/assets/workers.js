// Workers: capacity in use, free slots, draining, heartbeat age (flagged
// once it is late) and task types, with the jobs each one runs now (from
// the RUNNING jobs, which number at most the total capacity).

import { api, withQuery } from "./api.js";
import { $, duration, el, patchRows, setText, showEmpty } from "./dom.js";

/** A heartbeat older than this is shown as late. */
const LATE_HEARTBEAT_MS = 5000;
let running = new Map();
let app;

const columns = [
  { text: (w) => w.worker_id },
  { text: (w) => `${w.active} / ${w.capacity}`, label: "used" },
  { text: (w) => w.free, label: "free" },
  {
    text: (w) => w.draining,
    render: (td, w) => td.append(w.draining ? el("span", { class: "warn-tag" }, "draining") : "active"),
  },
  {
    text: (w) => duration(w.heartbeat_age_ms),
    label: "heartbeat",
    render(td, w) {
      const late = w.heartbeat_age_ms > LATE_HEARTBEAT_MS;
      td.append(el("span", { class: late ? "warn-tag" : "" }, duration(w.heartbeat_age_ms) + " ago"));
    },
  },
  { text: (w) => w.task_types.join(", "), class: "hide-narrow wrap" },
  {
    text: (w) => (running.get(w.worker_id) || []).join(" "),
    class: "wrap",
    render(td, w) {
      const ids = running.get(w.worker_id) || [];
      if (ids.length === 0) td.append(el("span", { class: "muted" }, "idle"));
      for (const id of ids) {
        const link = el("a", { href: "#", class: "job-link", "data-job": id }, el("code", {}, id));
        link.addEventListener("click", (event) => { event.preventDefault(); app.openJob(id); });
        td.append(link, " ");
      }
    },
  },
];

export const workers = {
  init(theApp) { app = theApp; },

  async refresh() {
    const [list, page] = await Promise.all([
      api("/api/workers"),
      api(withQuery("/api/jobs", { state: "RUNNING", limit: 500 })),
    ]);
    running = new Map();
    for (const j of page.jobs) {
      if (!running.has(j.worker_id)) running.set(j.worker_id, []);
      running.get(j.worker_id).push(j.job_id);
    }
    patchRows($("#workers tbody"), list, (w) => w.worker_id, columns, (row, w) => {
      row.dataset.worker = w.worker_id;
      row.classList.toggle("draining", w.draining);
    });
    showEmpty($("#workers-empty"), list.length);
    const capacity = list.reduce((n, w) => n + w.capacity, 0);
    const free = list.reduce((n, w) => n + w.free, 0);
    const draining = list.filter((w) => w.draining).length;
    setText($("#workers-summary"), `${list.length} connected, ${free} of ${capacity} slots free`
      + (draining ? `, ${draining} draining` : "") + (page.next_cursor ? " (first 500 running jobs shown)" : ""));
  },
};
