// What job tables share: the columns that show a job summary, the row
// attributes, and opening a job from a row (click or Enter) without
// stealing a click that was selecting text.

import { el, stateBadge, relative, idCell, utc } from "./dom.js";

/** The state cell: badge, progress, retry time, "no worker". */
export const stateColumn = {
  text: (j) => [j.state, j.progress_percent, j.next_retry_at, j.no_worker].join("|"),
  render(td, j) {
    td.append(stateBadge(j.state));
    if (j.progress_percent != null && j.state === "RUNNING") td.append(" ", el("span", { class: "muted" }, j.progress_percent + "%"));
    if (j.state === "RETRY_WAIT" && j.next_retry_at) {
      td.append(" ", el("span", { class: "muted", title: utc(j.next_retry_at) }, "retry " + relative(j.next_retry_at)));
    }
    if (j.no_worker && !["SUCCEEDED", "FAILED", "CANCELLED"].includes(j.state)) {
      td.append(" ", el("span", { class: "warn-tag", title: "no connected worker runs this task type" }, "no worker"));
    }
  },
};

export const idColumn = { text: (j) => j.job_id, render: idCell, class: "id" };
export const typeColumn = { text: (j) => j.task_type };
export const attemptsColumn = { text: (j) => `${j.attempts} / ${j.max_attempts}`, label: "attempts" };
export const errorColumn = { text: (j) => j.error || "", class: "error" };
export const workerColumn = { text: (j) => j.worker_id || "", class: "hide-narrow" };

/** Sets the attributes every job row carries (and tests look for). */
export function decorateJobRow(row, job, openId) {
  row.tabIndex = 0;
  row.dataset.job = job.job_id;
  row.dataset.state = job.state;
  row.classList.toggle("open", job.job_id === openId);
}

/** Clicking a row opens its job, unless the click ended a text selection. */
export function openOnClick(tbody, app) {
  tbody.addEventListener("click", (event) => {
    const row = event.target.closest("tr[data-key]");
    if (!row || event.target.closest("input, button, a")) return;
    if (String(window.getSelection()).length > 0) return;
    app.openJob(row.dataset.key);
  });
}

/** A relative time that updates as the page refreshes. */
export const submittedColumn = {
  text: (j) => relative(j.submitted_at),
  class: "hide-narrow",
  render(td, j) {
    td.append(el("time", { datetime: new Date(j.submitted_at).toISOString(), title: utc(j.submitted_at) }, relative(j.submitted_at)));
  },
};
