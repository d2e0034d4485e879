// DOM helpers: building nodes, patching tables row by row (so a refresh
// never replaces what the user is selecting or has scrolled to), and the
// formatting every page shares.

export const $ = (sel, root = document) => root.querySelector(sel);
export const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "dataset") Object.assign(node.dataset, v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c != null) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/** Sets `node`'s text only when it changed, so a selection inside survives. */
export function setText(node, text) {
  const value = text == null ? "" : String(text);
  if (node.textContent !== value) node.textContent = value;
}

/**
 * Makes `tbody` show one row per item, in order, keyed by `keyOf(item)`.
 * Rows that stay are moved, not rebuilt; a cell is re-rendered only when
 * its column's `text(item)` changed. `columns`: [{ text, render?, class?,
 * label? }] (`label` names the value where a phone shows no header);
 * `render(td, item)` draws a cell whose content is more than text.
 * `decorate(tr, item)` sets row attributes on every pass.
 */
export function patchRows(tbody, items, keyOf, columns, decorate = () => {}) {
  const old = new Map();
  for (const row of [...tbody.children]) {
    if (row.dataset.key != null) old.set(row.dataset.key, row);
    else row.remove();
  }
  let cursor = tbody.firstElementChild;
  const seen = new Set();
  for (const item of items) {
    const key = String(keyOf(item));
    if (seen.has(key)) continue;
    seen.add(key);
    let row = old.get(key);
    if (!row) {
      row = el("tr", { dataset: { key } }, ...columns.map((c) => el("td", { class: c.class, "data-label": c.label })));
    }
    columns.forEach((column, i) => patchCell(row.children[i], column, item));
    decorate(row, item);
    if (row === cursor) cursor = cursor.nextElementSibling;
    else tbody.insertBefore(row, cursor);
  }
  for (const [key, row] of old) if (!seen.has(key)) row.remove();
}

function patchCell(td, column, item) {
  const signature = String(column.text(item) ?? "");
  if (td.dataset.sig === signature) return;
  td.dataset.sig = signature;
  if (column.render) {
    td.replaceChildren();
    column.render(td, item);
  } else {
    td.textContent = signature;
  }
}

/** Shows `empty` (a "nothing here" line) exactly when `count` is 0. */
export function showEmpty(empty, count) {
  empty.hidden = count > 0;
}

export const TERMINAL = ["SUCCEEDED", "FAILED", "CANCELLED"];
export const STATES = ["QUEUED", "RUNNING", "RETRY_WAIT", "SUCCEEDED", "FAILED", "CANCELLED"];
export const PRIORITIES = ["high", "normal", "low"];

export const stateBadge = (state) => el("span", { class: "state " + state }, state);

const LEVELS = ["low", "normal", "high"];

/**
 * The priority aging has raised a waiting (QUEUED) job to, or null. Aging
 * acts only in the queue: a job that runs, waits for a retry or has
 * finished is at its base priority, whatever level it waited at.
 */
export function agedTo(job) {
  if (job.state !== "QUEUED") return null;
  const level = LEVELS[job.effective_level];
  return level && job.effective_level > LEVELS.indexOf(job.priority) ? level : null;
}

/** The Schedules page with the schedule `name` marked. */
export const scheduleHref = (name) => "#/schedules?schedule=" + encodeURIComponent(name);

/** "1.2 s", "3 min", "2 h 5 min": a duration for people. */
export function duration(ms) {
  if (ms == null || !Number.isFinite(ms)) return "";
  const abs = Math.abs(ms);
  if (abs < 1) return Number(ms.toFixed(2)) + " ms";
  if (abs < 100) return Number(ms.toFixed(1)) + " ms";
  if (abs < 1000) return Math.round(ms) + " ms";
  if (abs < 60_000) return (ms / 1000).toFixed(1) + " s";
  if (abs < 3_600_000) return Math.round(ms / 60_000) + " min";
  const h = Math.floor(abs / 3_600_000);
  return `${h} h ${Math.round((abs - h * 3_600_000) / 60_000)} min`;
}

/** The browser's time zone: every time on the page is shown in it (the
 * header says which), with its UTC value on hover. */
export const ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";

/** A time's UTC value in RFC 3339, for hover titles. */
export function utc(unixMs) {
  if (unixMs == null) return "";
  return new Date(unixMs).toISOString().replace(".000Z", "Z") + " (UTC)";
}

/** Time of day for today, date and time otherwise. */
export function when(unixMs) {
  if (unixMs == null) return "";
  const d = new Date(unixMs);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

/** "5 s ago" / "in 3 s" relative to `now`. */
export function relative(unixMs, now = Date.now()) {
  if (unixMs == null) return "";
  const delta = unixMs - now;
  return delta > 0 ? "in " + duration(delta) : duration(-delta) + " ago";
}

/** The id cell: the whole id in a `<code>`, never shortened. */
export function idCell(td, job) {
  td.append(el("code", { class: "job-id" }, job.job_id));
}

/** Copies `text`; falls back to a selection where the Clipboard API is off. */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = el("textarea", { class: "offscreen" });
    area.value = text;
    document.body.append(area);
    area.select();
    const ok = document.execCommand("copy");
    area.remove();
    return ok;
  }
}
