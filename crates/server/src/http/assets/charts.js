// A small SVG line chart: minutes along x, one polyline per series (a
// `null` value leaves a gap), four labelled grid lines, and a legend.
// Redrawn in place; nothing is fetched or measured from the page.

import { el, setText } from "./dom.js";

const W = 600;
const H = 180;
const PAD = { left: 52, right: 8, top: 8, bottom: 22 };
export const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#64748b"];
const NS = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs, text) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text != null) node.textContent = text;
  return node;
}

/** A round upper bound for the y axis (1, 2 or 5 times a power of ten). */
function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((m) => m >= value);
}

/**
 * Draws `series` ([{ name, values, dashed? }]) over `minuteStarts` into
 * `svg`, and their names into `legend`; `format` labels the y axis.
 */
export function lineChart(svg, legend, minuteStarts, series, format = String) {
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const max = niceMax(Math.max(0, ...series.flatMap((s) => s.values.filter((v) => v != null))));
  const x = (i) => PAD.left + (i * (W - PAD.left - PAD.right)) / Math.max(1, minuteStarts.length - 1);
  const y = (v) => H - PAD.bottom - (v / max) * (H - PAD.top - PAD.bottom);
  const parts = [];
  for (let g = 0; g <= 4; g++) {
    const v = (max * g) / 4;
    parts.push(svgEl("line", { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), class: "grid" }));
    parts.push(svgEl("text", { x: PAD.left - 4, y: y(v) + 4, "text-anchor": "end", class: "axis" }, format(v)));
  }
  const n = minuteStarts.length;
  for (const back of [60, 45, 30, 15, 0]) {
    const i = n - 1 - back;
    if (i < 0) continue;
    const label = back === 0 ? "now" : `-${back} min`;
    parts.push(svgEl("text", { x: x(i), y: H - 6, "text-anchor": back === 0 ? "end" : "middle", class: "axis" }, label));
  }
  series.forEach((s, k) => {
    const color = COLORS[k % COLORS.length];
    for (const run of segments(s.values)) {
      const points = run.map(([i, v]) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
      const attrs = { points, stroke: color, class: "line", "data-series": s.name };
      if (s.dashed) attrs["stroke-dasharray"] = "4 3";
      parts.push(run.length === 1
        ? svgEl("circle", { cx: x(run[0][0]), cy: y(run[0][1]), r: 2, fill: color, "data-series": s.name })
        : svgEl("polyline", attrs));
    }
  });
  svg.replaceChildren(...parts);
  const keys = series.map((s, k) => el("span", { class: "key" },
    el("i", { style: `background:${COLORS[k % COLORS.length]}` }), s.name));
  legend.replaceChildren(...keys);
  if (series.length === 0) setText(legend, "nothing finished in the last hour");
}

/** Runs of consecutive non-null values as [index, value] pairs. */
function segments(values) {
  const runs = [];
  let run = [];
  values.forEach((v, i) => {
    if (v == null) { if (run.length) runs.push(run); run = []; } else run.push([i, v]);
  });
  if (run.length) runs.push(run);
  return runs;
}
