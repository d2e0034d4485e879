// Failed: the dead set. Select rows (click the box or press x) and retry
// or delete them, or act on every FAILED job (of one task type) at once;
// each bulk action asks first. Selections survive refreshes.

import { api, withQuery } from "./api.js";
import { $, el, patchRows, setText, showEmpty, when } from "./dom.js";
import { confirmAction } from "./confirm.js";
import { attemptsColumn, decorateJobRow, errorColumn, idColumn, openOnClick, typeColumn } from "./rows.js";

/** Most calls one "all failed" action makes (each handles up to 1000 jobs). */
const MAX_FILTER_CALLS = 1000;
const selected = new Set();
let visible = [];
let total = 0;
let nextCursor = null;
let app;

const columns = [
  {
    text: () => "box",
    render(td, j) {
      const box = el("input", { type: "checkbox", "aria-label": "select " + j.job_id });
      box.addEventListener("change", () => toggle(j.job_id, box.checked));
      td.append(box);
    },
  },
  idColumn, typeColumn, attemptsColumn,
  { text: (j) => when(j.updated_at), class: "hide-narrow" },
  errorColumn,
];

export const failed = {
  init(theApp) {
    app = theApp;
    openOnClick($("#failed tbody"), app);
    $("#failed-filters").addEventListener("submit", (event) => {
      event.preventDefault();
      selected.clear();
      app.navigate("failed", { type: $("#failed-type").value.trim() });
    });
    $("#failed-all").addEventListener("change", (event) => {
      for (const j of visible) toggle(j.job_id, event.target.checked, false);
      redraw();
    });
    $("#failed-next").addEventListener("click", () => app.update({ cursor: nextCursor, job: null }));
    $("#failed-first").addEventListener("click", () => app.update({ cursor: null, job: null }));
    $("#failed-retry-selected").addEventListener("click", () => onSelected("retry"));
    $("#failed-delete-selected").addEventListener("click", () => onSelected("delete"));
    $("#failed-retry-all").addEventListener("click", () => onAll("retry"));
    $("#failed-delete-all").addEventListener("click", () => onAll("delete"));
  },

  show(route) {
    if (route.page === "failed") $("#failed-type").value = route.params.get("type") || "";
  },

  async refresh(route) {
    const p = route.params;
    const page = await api(withQuery("/api/jobs", {
      state: "FAILED", type: p.get("type"), cursor: p.get("cursor"), limit: 50,
    }));
    visible = page.jobs;
    total = page.counts?.FAILED ?? visible.length;
    nextCursor = page.next_cursor;
    redraw(p.get("job"));
    showEmpty($("#failed-empty"), visible.length);
    $("#failed-next").disabled = !nextCursor;
    $("#failed-first").disabled = !p.get("cursor");
    $("#failed-retry-all").disabled = total === 0;
    $("#failed-delete-all").disabled = total === 0;
    setText($("#failed-retry-all"), `Retry all ${total} failed`);
    setText($("#failed-delete-all"), `Delete all ${total} failed`);
  },
};

function toggle(id, on, draw = true) {
  if (on) selected.add(id); else selected.delete(id);
  if (draw) redraw();
}

function redraw(openId = app.route.params.get("job")) {
  patchRows($("#failed tbody"), visible, (j) => j.job_id, columns, (row, j) => {
    decorateJobRow(row, j, openId);
    row.classList.toggle("selected", selected.has(j.job_id));
    row.querySelector("input[type=checkbox]").checked = selected.has(j.job_id);
  });
  const n = selected.size;
  setText($("#failed-selection"), n === 0 ? "none selected" : `${n} selected`);
  $("#failed-retry-selected").disabled = n === 0;
  $("#failed-delete-selected").disabled = n === 0;
  const all = $("#failed-all");
  all.checked = visible.length > 0 && visible.every((j) => selected.has(j.job_id));
  all.indeterminate = !all.checked && visible.some((j) => selected.has(j.job_id));
}

async function onSelected(verb) {
  const ids = [...selected];
  const what = verb === "retry" ? "Retry" : "Delete for good";
  if (!await confirmAction(`${what} ${ids.length} selected job${ids.length === 1 ? "" : "s"}?`, verb === "retry" ? "Retry" : "Delete")) return;
  const outcome = { done: 0, refused: [] };
  for (let i = 0; i < ids.length; i += 100) {
    const answer = await bulk(verb, { job_ids: ids.slice(i, i + 100) }, outcome);
    if (!answer) return;
  }
  selected.clear();
  report(verb, outcome);
}

async function onAll(verb) {
  const type = app.route.params.get("type");
  const scope = type ? ` of type ${type}` : "";
  const what = verb === "retry" ? "Retry" : "Delete for good";
  if (!await confirmAction(`${what} all ${total} FAILED jobs${scope}?`, verb === "retry" ? "Retry all" : "Delete all")) return;
  const filter = { state: "FAILED" };
  if (type) filter.type = type;
  const outcome = { done: 0, refused: [] };
  for (let calls = 0; calls < MAX_FILTER_CALLS; calls++) {
    const answer = await bulk(verb, { filter }, outcome);
    if (!answer || !answer.more) break;
    setText($("#failed-message"), `${outcome.done} so far…`);
  }
  selected.clear();
  report(verb, outcome);
}

/** One bulk call; adds to `outcome`; null (and a message) on failure. */
async function bulk(verb, body, outcome) {
  try {
    const answer = await api(`/api/jobs/${verb}`, { method: "POST", body });
    outcome.done += answer.done.length;
    outcome.refused.push(...answer.refused);
    return answer;
  } catch (e) {
    setText($("#failed-message"), `${verb} stopped after ${outcome.done}: ${e.message}`);
    app.refreshNow();
    return null;
  }
}

function report(verb, { done, refused }) {
  const past = verb === "retry" ? "requeued" : "deleted";
  const why = refused.length ? `; ${refused.length} refused (${refused[0].job_id}: ${refused[0].reason})` : "";
  setText($("#failed-message"), `${done} ${past}${why}.`);
  app.refreshNow();
}
