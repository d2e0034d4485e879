// taskyard dashboard: the router, the refresh loop, the connection state
// and the keyboard. No framework and no build step; each page is a module
// with `init(app)` (bind its controls once) and `refresh(route, stats)`
// (fetch and patch what it shows).

import { api, setToken, takeTokenFromUrl } from "./api.js";
import { $, $$, setText, duration, ZONE } from "./dom.js";
import { overview } from "./overview.js";
import { jobs } from "./jobs.js";
import { queues } from "./queues.js";
import { workers } from "./workers.js";
import { failed } from "./failed.js";
import { schedules } from "./schedules.js";
import { detail } from "./detail.js";

const REFRESH_MS = 2000;
const PAGES = { overview, jobs, queues, workers, failed, schedules };
const ORDER = ["overview", "jobs", "queues", "workers", "failed", "schedules"];

/** `#/jobs?state=RUNNING&job=ID` → { page: "jobs", params }. */
function currentRoute() {
  const [path, query = ""] = location.hash.replace(/^#\/?/, "").split("?");
  const page = PAGES[path] ? path : "overview";
  return { page, params: new URLSearchParams(query) };
}

const app = {
  route: currentRoute(),
  lastOk: null,
  conn: "connecting",

  /** Goes to `page` with `params` (a history entry, so Back works). */
  navigate(page, params = {}) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v != null && v !== "") q.set(k, v);
    const text = q.toString();
    location.hash = `#/${page}${text ? "?" + text : ""}`;
  },

  /** Changes some parameters of the current route; `null` removes one. */
  update(changes) {
    const params = Object.fromEntries(this.route.params);
    Object.assign(params, changes);
    this.navigate(this.route.page, params);
  },

  openJob(id) { this.update({ job: id }); },
  closeJob() { this.update({ job: null }); },

  refreshNow() { loop.kick(); },
};

// One refresh at a time; a kick during one runs another right after it.
const loop = {
  running: false,
  again: false,
  timer: null,
  async kick() {
    if (this.running) { this.again = true; return; }
    clearTimeout(this.timer);
    this.running = true;
    try { await refresh(); } finally {
      this.running = false;
      if (this.again) { this.again = false; this.kick(); } else {
        this.timer = setTimeout(() => this.kick(), REFRESH_MS);
      }
    }
  },
};

async function refresh() {
  // A tab nobody looks at asks nothing; it catches up when shown again.
  if (document.hidden) return;
  const route = app.route;
  try {
    const stats = await api("/api/stats");
    renderBadge(stats);
    await Promise.all([
      PAGES[route.page].refresh(route, stats),
      detail.refresh(route),
    ]);
    markLive();
  } catch (e) {
    markFailure(e);
  }
}

function renderBadge(stats) {
  const n = stats.jobs.FAILED ?? 0;
  const badge = $("#failed-badge");
  badge.hidden = n === 0;
  setText(badge, n);
  const types = Object.keys(stats.queue_depth.by_task_type || {});
  const list = $("#task-types");
  const known = new Set($$("option", list).map((o) => o.value));
  for (const t of types) if (!known.has(t)) list.append(new Option(t, t));
}

function markLive() {
  app.lastOk = Date.now();
  setConn("live", "live · updated " + new Date(app.lastOk).toLocaleTimeString());
}

/**
 * The coordinator did not answer (or refused the token): the banner says
 * so and the page is marked stale, so no number on it reads as live.
 */
function markFailure(e) {
  if (e.status === 401) {
    setConn("auth", "token needed");
    showBanner("This coordinator needs a token.",
      "Paste the client token; it is kept in this browser's local storage.", true);
    return;
  }
  if (e.code === "not_leader") {
    const leader = e.body.leader && (e.body.leader.http || e.body.leader.client);
    setConn("down", "standby");
    showBanner("This coordinator is a standby.", leader ? `The leader is at ${leader}.` : e.message);
    return;
  }
  if (!e.unreachable) {
    // The coordinator answered: a page-level problem, shown by the page.
    markLive();
    console.warn(e);
    return;
  }
  const since = app.lastOk ? "Last update " + new Date(app.lastOk).toLocaleTimeString()
    + ` (${duration(Date.now() - app.lastOk)} ago); nothing below is live.` : "Nothing has loaded yet.";
  setConn("down", "unreachable");
  showBanner("Coordinator unreachable.", `${since} Retrying every ${REFRESH_MS / 1000} s. (${e.message})`);
}

function setConn(state, text) {
  app.conn = state;
  document.body.dataset.conn = state;
  setText($("#live"), text);
  if (state === "live") $("#conn-banner").hidden = true;
}

function showBanner(title, detailText, askToken = false) {
  setText($("#conn-title"), title);
  setText($("#conn-detail"), detailText);
  $("#token-form").hidden = !askToken;
  $("#conn-banner").hidden = false;
}

function showRoute() {
  app.route = currentRoute();
  for (const section of $$("main > section")) {
    section.hidden = section.dataset.page !== app.route.page;
  }
  for (const tab of $$("#tabs a")) {
    if (tab.dataset.page === app.route.page) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
  PAGES[app.route.page].show?.(app.route);
  detail.show(app.route);
  loop.kick();
}

// Keyboard: digits switch pages, `/` searches, j/k move through rows,
// Enter opens, x selects, Esc closes, ? helps. Typing in a field is left alone.
function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const typing = event.target.closest("input, select, textarea, [contenteditable]");
  if (event.key === "Escape") {
    if (!$("#help").hidden) { $("#help").hidden = true; return; }
    if (typing) { event.target.blur(); return; }
    if (app.route.params.get("job")) app.closeJob();
    return;
  }
  if (typing) return;
  const page = ORDER[Number(event.key) - 1];
  if (page) { app.navigate(page); return; }
  if (event.key === "/") {
    event.preventDefault();
    if (app.route.page !== "jobs") app.navigate("jobs");
    $("#filter-q").focus();
    return;
  }
  if (event.key === "?") { $("#help").hidden = !$("#help").hidden; return; }
  const rows = $$(`main > section:not([hidden]) table.rows tbody tr[data-key]`);
  const at = rows.indexOf(document.activeElement);
  if (["j", "ArrowDown"].includes(event.key) && rows.length) {
    event.preventDefault();
    rows[Math.min(at + 1, rows.length - 1)].focus();
  } else if (["k", "ArrowUp"].includes(event.key) && rows.length) {
    event.preventDefault();
    rows[Math.max(at - 1, 0)].focus();
  } else if (event.key === "Enter" && at >= 0) {
    // A schedule's row opens its last run's job (none: nothing to open).
    const job = rows[at].dataset.schedule == null ? rows[at].dataset.key : rows[at].dataset.job;
    if (job) app.openJob(job);
  } else if (event.key === "x" && at >= 0) {
    rows[at].querySelector("input[type=checkbox]")?.click();
  }
}

$("#token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  setToken($("#token-input").value.trim());
  $("#token-input").value = "";
  loop.kick();
});

takeTokenFromUrl();
setText($("#zone"), "times in " + ZONE);
for (const page of [...Object.values(PAGES), detail]) page.init(app);
window.addEventListener("hashchange", showRoute);
document.addEventListener("visibilitychange", () => { if (!document.hidden) loop.kick(); });
document.addEventListener("keydown", onKey);
showRoute();
