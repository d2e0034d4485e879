// Jobs: filtered on the server (state, task type, priority, id or id
// prefix), newest or oldest first, paged by cursor. The filters live in
// the URL (`#/jobs?state=RUNNING&q=0193`), so a view can be shared and
// Back undoes a filter.

import { api, withQuery } from "./api.js";
import { $, agedTo, el, patchRows, setText, showEmpty, STATES } from "./dom.js";
import {
  attemptsColumn, decorateJobRow, errorColumn, idColumn, openOnClick,
  stateColumn, submittedColumn, typeColumn, workerColumn,
} from "./rows.js";

const FILTERS = ["q", "state", "type", "priority", "order"];
const ORDERS = [["newest", "newest first"], ["oldest", "oldest first"]];

const columns = [
  idColumn, typeColumn, stateColumn,
  { text: (j) => agedTo(j) ? `${j.priority} (aged to ${agedTo(j)})` : j.priority, class: "hide-narrow" },
  attemptsColumn, submittedColumn, workerColumn, errorColumn,
];

// Cursors of the pages before this one, for "Previous".
let previous = [];
let nextCursor = null;
let app;

export const jobs = {
  init(theApp) {
    app = theApp;
    for (const s of STATES) $("#filter-state").append(new Option(s, s));
    for (const [value, label] of ORDERS) $("#filter-sort").append(new Option(label, value));
    $("#job-filters").addEventListener("submit", (event) => {
      event.preventDefault();
      previous = [];
      app.navigate("jobs", { ...readFilters(), limit: app.route.params.get("limit") });
    });
    for (const id of ["#filter-state", "#filter-priority", "#filter-sort"]) {
      $(id).addEventListener("change", () => $("#job-filters").requestSubmit());
    }
    $("#sort-submitted").addEventListener("click", () => {
      previous = [];
      const oldest = (app.route.params.get("order") || "newest") === "newest";
      app.update({ order: oldest ? "oldest" : null, cursor: null });
    });
    $("#filter-clear").addEventListener("click", () => { previous = []; app.navigate("jobs"); });
    $("#jobs-next").addEventListener("click", () => {
      previous.push(app.route.params.get("cursor") || "");
      app.update({ cursor: nextCursor, job: null });
    });
    $("#jobs-prev").addEventListener("click", () => app.update({ cursor: previous.pop() || null, job: null }));
    $("#jobs-first").addEventListener("click", () => { previous = []; app.update({ cursor: null, job: null }); });
    $("#jobs-limit").addEventListener("change", () => {
      previous = [];
      app.update({ limit: $("#jobs-limit").value, cursor: null });
    });
    openOnClick($("#jobs tbody"), app);
    $("#submit-form").addEventListener("submit", submit);
  },

  /** Puts the URL's filters into the form (after Back, or a shared link). */
  show(route) {
    if (route.page !== "jobs") return;
    const p = route.params;
    $("#filter-q").value = p.get("q") || "";
    $("#filter-state").value = (p.get("state") || "").toUpperCase();
    $("#filter-type").value = p.get("type") || "";
    $("#filter-priority").value = p.get("priority") || "";
    $("#filter-sort").value = p.get("order") || "newest";
    $("#jobs-limit").value = p.get("limit") || "50";
    const oldest = p.get("order") === "oldest";
    $("#th-submitted").setAttribute("aria-sort", oldest ? "ascending" : "descending");
    setText($("#sort-submitted span"), oldest ? "↑" : "↓");
    if (!p.get("cursor")) previous = [];
  },

  async refresh(route) {
    const p = route.params;
    const query = Object.fromEntries(FILTERS.map((k) => [k, p.get(k)]));
    query.q = query.q && query.q.trim().toLowerCase();
    query.limit = p.get("limit") || 50;
    query.cursor = p.get("cursor");
    let page;
    try {
      page = await api(withQuery("/api/jobs", query));
    } catch (e) {
      if (e.unreachable || e.status === 401) throw e;
      setText($("#jobs-summary"), "Cannot list jobs: " + e.message);
      patchRows($("#jobs tbody"), [], () => "", columns);
      return;
    }
    nextCursor = page.next_cursor;
    const openId = p.get("job");
    patchRows($("#jobs tbody"), page.jobs, (j) => j.job_id, columns, (row, j) => decorateJobRow(row, j, openId));
    showEmpty($("#jobs-empty"), page.jobs.length);
    setText($("#jobs-summary"), summary(page, query));
    $("#jobs-next").disabled = !nextCursor;
    $("#jobs-prev").disabled = previous.length === 0;
    $("#jobs-first").disabled = !p.get("cursor");
  },
};

function readFilters() {
  return {
    q: $("#filter-q").value.trim(),
    state: $("#filter-state").value,
    type: $("#filter-type").value.trim(),
    priority: $("#filter-priority").value,
    order: $("#filter-sort").value === "newest" ? "" : $("#filter-sort").value,
  };
}

function summary(page, query) {
  const counts = page.counts || {};
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  const scope = query.state ? `${counts[query.state.toUpperCase()] ?? 0} ${query.state.toUpperCase()}` : `${total} jobs`;
  const typed = query.type ? ` of type ${query.type}` : "";
  const search = query.q ? `, id starting ${query.q}` : "";
  const more = page.next_cursor ? "; more on the next page" : "";
  return `${page.jobs.length} shown (${scope}${typed} in all${search})${more}.`;
}

async function submit(event) {
  event.preventDefault();
  const out = $("#submit-result");
  let payload;
  try {
    payload = JSON.parse($("#submit-payload").value || "null");
  } catch (e) {
    setText(out, "payload is not JSON: " + e.message);
    return;
  }
  try {
    const answer = await api("/api/jobs", {
      method: "POST",
      body: { task_type: $("#submit-type").value.trim(), priority: $("#submit-priority").value, payload },
    });
    out.replaceChildren("submitted ", el("code", {}, answer.job_id),
      answer.no_worker ? " (no connected worker runs this type yet)" : "");
    app.refreshNow();
  } catch (e) {
    setText(out, "rejected: " + e.message);
  }
}
