// The job detail drawer: opens over whatever page is showing (so it is
// always in view), follows the job while it is open, and offers retry,
// cancel and delete through the API. `job=ID` in the URL opens it.

import { api } from "./api.js";
import {
  $, agedTo, copyText, duration, el, patchRows, scheduleHref, setText, stateBadge, TERMINAL, utc, when, relative,
} from "./dom.js";
import { confirmAction } from "./confirm.js";

const RESULT_PREVIEW = 4096;
let app;
let shown = null;
let returnFocus = null;

export const detail = {
  init(theApp) {
    app = theApp;
    $("#close-detail").addEventListener("click", () => app.closeJob());
    $("#copy-id").addEventListener("click", async () => {
      const ok = await copyText($("#detail-id").textContent);
      say(ok ? "id copied" : "copy failed: select the id and copy it");
    });
    $("#retry-button").addEventListener("click", () => act("retry", { method: "POST", path: "/retry" }));
    $("#cancel-button").addEventListener("click", () => act("cancel", { method: "POST", path: "/cancel" }));
    $("#delete-button").addEventListener("click", async () => {
      if (await confirmAction(`Delete job ${shown}? Its record and history are removed for good.`, "Delete")) {
        act("delete", { method: "DELETE", path: "" });
      }
    });
  },

  show(route) {
    const id = route.params.get("job");
    const drawer = $("#detail");
    if (!id) {
      if (!drawer.hidden) {
        drawer.hidden = true;
        shown = null;
        returnFocus?.focus?.();
      }
      return;
    }
    if (id === shown && !drawer.hidden) return;
    if (id !== shown) clear(id);
    returnFocus = document.activeElement;
    shown = id;
    drawer.hidden = false;
    drawer.focus({ preventScroll: true });
  },

  async refresh(route) {
    const id = route.params.get("job");
    if (!id) return;
    let job;
    try {
      job = await api("/api/jobs/" + encodeURIComponent(id));
    } catch (e) {
      if (e.unreachable || e.status === 401) throw e;
      renderMissing(id, e);
      return;
    }
    if (route.params.get("job") === id) render(job);
  },
};

function clear(id) {
  setText($("#detail-id"), id);
  replaceState("");
  setText($("#detail-message"), "loading…");
  for (const sel of ["#detail-error", "#detail-payload", "#detail-result", "#detail-result-note"]) setText($(sel), "");
  $("#detail-fields").replaceChildren();
  $("#history tbody").replaceChildren();
  $("#detail-progress").hidden = true;
}

function replaceState(state) {
  const badge = state ? stateBadge(state) : el("span", { class: "state" });
  badge.id = "detail-state";
  const old = $("#detail-state");
  if (old.textContent !== state) old.replaceWith(badge);
}

function render(job) {
  if (job.job_id !== shown) {
    // Opened by a prefix: show (and keep in the URL) the full id.
    shown = job.job_id;
    app.update({ job: job.job_id });
  }
  setText($("#detail-id"), job.job_id);
  replaceState(job.state);
  if ($("#detail-message").textContent === "loading…") setText($("#detail-message"), "");
  const finished = TERMINAL.includes(job.state);
  $("#retry-button").disabled = !["FAILED", "CANCELLED"].includes(job.state);
  $("#cancel-button").disabled = finished;
  $("#delete-button").disabled = !finished;
  renderProgress(job);
  renderFields(job);
  setText($("#detail-error"), job.error || "—");
  setText($("#detail-payload"), payloadText(job));
  const [result, note] = resultText(job);
  setText($("#detail-result"), result);
  setText($("#detail-result-note"), note);
  renderHistory(job.history || []);
}

function renderMissing(id, e) {
  replaceState("");
  setText($("#detail-message"), e.code === "ambiguous_id"
    ? `${id} matches several jobs: ${(e.body.candidates || []).join(", ")}`
    : e.message);
  for (const b of ["#retry-button", "#cancel-button", "#delete-button"]) $(b).disabled = true;
}

function renderProgress(job) {
  const box = $("#detail-progress");
  const p = job.progress;
  box.hidden = !(p && job.state === "RUNNING");
  if (box.hidden) return;
  $(".bar", box).style.width = Math.max(0, Math.min(100, p.percent)) + "%";
  setText($("span", box), `${p.percent}% ${p.message || ""} (${relative(p.at)})`);
}

function renderFields(job) {
  const aged = agedTo(job);
  const fields = [
    ["type", job.task_type],
    ["priority", aged ? `${job.priority} (aged to ${aged} while queued)` : job.priority],
  ];
  if (job.schedule) fields.push(["schedule", { text: scheduleText(job), href: scheduleHref(job.schedule) }]);
  if (job.idempotency_key) fields.push(["key", job.idempotency_key]);
  fields.push(
    ["attempts", `${job.attempts} / ${job.max_attempts}`],
    ["timeout", duration(job.timeout_ms) + " per attempt"],
    ["worker", job.worker_id || "—"],
    ["submitted", { text: `${when(job.submitted_at)} (${relative(job.submitted_at)})`, title: utc(job.submitted_at) }],
    ["updated", { text: `${when(job.updated_at)} (${relative(job.updated_at)})`, title: utc(job.updated_at) }],
  );
  if (job.not_before) fields.push(["runs at", { text: `${when(job.not_before)} (${relative(job.not_before)}) or later`, title: utc(job.not_before) }]);
  if (job.next_retry_at) fields.push(["next retry", { text: `${when(job.next_retry_at)} (${relative(job.next_retry_at)})`, title: utc(job.next_retry_at) }]);
  if (job.no_worker && !TERMINAL.includes(job.state)) fields.push(["workers", "no connected worker runs this type"]);
  const dl = $("#detail-fields");
  const same = dl.children.length === fields.length * 2
    && fields.every(([k], i) => dl.children[i * 2].textContent === k);
  if (!same) dl.replaceChildren(...fields.flatMap(([k]) => [el("dt", {}, k), el("dd")]));
  fields.forEach(([, v], i) => setField(dl.children[i * 2 + 1], v));
}

/** Which schedule fired the job: its slot, or a manual trigger (no slot). */
function scheduleText(job) {
  return job.schedule_slot == null
    ? `${job.schedule}, triggered by hand`
    : `${job.schedule}, slot ${when(job.schedule_slot)}`;
}

/** A field's value: text, `{ text, title }` (a time: its UTC value on
 * hover), or `{ text, href }` shown as a link. */
function setField(dd, value) {
  if (typeof value !== "object") {
    setText(dd, value);
    return;
  }
  if (!value.href) {
    setText(dd, value.text);
    if (dd.title !== value.title) dd.title = value.title;
    return;
  }
  let link = dd.querySelector("a");
  if (!link) {
    link = el("a", { class: "schedule-link" });
    dd.replaceChildren(link);
  }
  if (link.getAttribute("href") !== value.href) link.setAttribute("href", value.href);
  setText(link, value.text);
}

function payloadText(job) {
  if (job.payload_omitted) return `(${job.payload_bytes} bytes, too large to show)`;
  if (job.payload_hex) return `(not JSON, ${job.payload_bytes} bytes) ${job.payload_hex}`;
  return JSON.stringify(job.payload, null, 2);
}

/** A preview of the result, at most RESULT_PREVIEW characters. */
function resultText(job) {
  if (job.result_omitted) return ["", `(${job.result_bytes} bytes: read it with \`taskyard result\`)`];
  if (job.result_hex) return [job.result_hex.slice(0, RESULT_PREVIEW), `(binary, ${job.result_bytes} bytes, hex)`];
  if (job.result == null) return ["—", ""];
  const text = typeof job.result === "string" ? job.result : JSON.stringify(job.result, null, 2);
  if (text.length <= RESULT_PREVIEW) return [text, job.result_bytes != null ? `(${job.result_bytes} bytes)` : ""];
  return [text.slice(0, RESULT_PREVIEW), `(first ${RESULT_PREVIEW} of ${text.length} characters)`];
}

const historyColumns = [
  { text: (a) => a.number },
  { text: (a) => a.worker_id },
  { text: (a) => when(a.started_at) },
  { text: (a) => a.ended_at ? duration(a.ended_at - a.started_at) : "running " + duration(Date.now() - a.started_at) },
  { text: (a) => a.outcome ? describe(a.outcome) : "", class: "wrap" },
];

function renderHistory(history) {
  patchRows($("#history tbody"), history, (a) => a.number, historyColumns);
}

function describe(outcome) {
  switch (outcome.kind) {
    case "failed": return "failed: " + outcome.error;
    case "timed_out": return `timed out after ${duration(outcome.timeout_ms)}`;
    case "worker_lost": return "worker lost: " + outcome.reason;
    default: return outcome.kind.replace(/_/g, " ");
  }
}

async function act(verb, { method, path }) {
  const id = shown;
  try {
    const job = await api(`/api/jobs/${encodeURIComponent(id)}${path}`, { method });
    if (verb === "delete") {
      say("deleted");
      app.closeJob();
    } else {
      say(`${verb === "retry" ? "retried" : "cancelled"}: job is ${job.state}`);
      render(job);
    }
  } catch (e) {
    say(`${verb} failed: ${e.message}`);
  }
  app.refreshNow();
}

function say(text) {
  setText($("#detail-message"), text);
}
