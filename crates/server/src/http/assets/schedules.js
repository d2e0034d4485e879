// Schedules: each one's cadence, state, next and last run (with the last
// run's job state), and pause / resume / trigger now. Creating and changing
// a definition is the CLI's (`taskyard schedule create|update`) and the
// config file's. Rows carry the schedule's name; Enter on one opens its
// last run's job, if it has one. `schedule=NAME` in the URL (a job's
// detail links there) marks that schedule's row and scrolls to it.

import { api } from "./api.js";
import { $, el, patchRows, relative, setText, showEmpty, stateBadge, utc, when } from "./dom.js";

let app;
let scrolledTo = null;

const cadence = (s) => s.spec.cron ? `${s.spec.cron}${s.spec.tz ? " (" + s.spec.tz + ")" : ""}` : `every ${s.spec.every_ms / 1000} s`;
const lastRun = (s) => s.recent_runs[0];

const columns = [
  { text: (s) => s.spec.name, render: (td, s) => td.append(el("code", {}, s.spec.name)) },
  { text: cadence, label: "cadence", class: "wrap" },
  { text: (s) => s.spec.task_type, label: "type", class: "hide-narrow" },
  {
    text: (s) => s.spec.paused,
    label: "state",
    render: (td, s) => td.append(s.spec.paused ? el("span", { class: "warn-tag" }, "paused") : "active"),
  },
  {
    text: (s) => relative(s.next_fires[0]),
    label: "next run",
    render(td, s) {
      const next = s.next_fires[0];
      td.append(next == null
        ? el("span", { class: "muted" }, "none")
        : el("time", { datetime: new Date(next).toISOString(), title: utc(next) }, when(next)));
    },
  },
  {
    text: (s) => { const r = lastRun(s); return r ? `${r.job_id}|${r.state}` : ""; },
    label: "last run",
    render(td, s) {
      const run = lastRun(s);
      if (!run) { td.append(el("span", { class: "muted" }, "never")); return; }
      const link = el("a", { href: "#", class: "job-link", "data-job": run.job_id }, run.state ? stateBadge(run.state) : "finished");
      link.addEventListener("click", (event) => { event.preventDefault(); app.openJob(run.job_id); });
      td.append(link, " ", el("span", { class: "muted" }, run.slot == null ? "triggered" : relative(run.slot)));
    },
  },
  { text: (s) => `${s.fired} / ${s.skipped}`, label: "fired / skipped", class: "hide-narrow" },
  {
    text: (s) => s.spec.paused,
    class: "actions",
    render(td, s) {
      const toggle = el("button", { type: "button", "data-action": s.spec.paused ? "resume" : "pause" }, s.spec.paused ? "Resume" : "Pause");
      const trigger = el("button", { type: "button", "data-action": "trigger" }, "Run now");
      for (const button of [toggle, trigger]) {
        button.addEventListener("click", () => act(s.spec.name, button.dataset.action));
      }
      td.append(toggle, " ", trigger);
    },
  },
];

async function act(name, action) {
  const path = `/api/schedules/${encodeURIComponent(name)}/${action}`;
  try {
    const answer = await api(path, { method: "POST", body: {} });
    const done = { pause: "paused", resume: "resumed", trigger: `triggered: job ${answer.job_id}` }[action];
    setText($("#schedules-message"), `· ${name} ${done}.`);
  } catch (e) {
    setText($("#schedules-message"), `· ${action} ${name}: ${e.message}`);
  }
  app.refreshNow();
}

export const schedules = {
  init(theApp) { app = theApp; },

  async refresh(route) {
    const all = [];
    for (let after = "", more = true; more && all.length < 1000;) {
      const page = await api("/api/schedules" + (after ? "?after=" + encodeURIComponent(after) : ""));
      all.push(...page.schedules);
      more = page.more && page.schedules.length > 0;
      after = all.length ? all[all.length - 1].spec.name : "";
    }
    const marked = route?.params.get("schedule") ?? null;
    patchRows($("#schedules tbody"), all, (s) => s.spec.name, columns, (row, s) => {
      row.tabIndex = 0;
      row.dataset.schedule = s.spec.name;
      row.dataset.job = lastRun(s)?.job_id ?? "";
      row.classList.toggle("paused", s.spec.paused);
      row.classList.toggle("open", s.spec.name === marked);
    });
    const row = marked == null ? null : $(`#schedules tbody tr.open`);
    if (row && scrolledTo !== marked) row.scrollIntoView({ block: "nearest" });
    scrolledTo = row ? marked : null;
    showEmpty($("#schedules-empty"), all.length);
    const paused = all.filter((s) => s.spec.paused).length;
    setText($("#schedules-summary"), `${all.length} schedules` + (paused ? `, ${paused} paused` : "")
      + (all.length >= 1000 ? " (first 1000 shown)" : ""));
  },
};
