// The figures the heatmap's code draws, mounted by kind: a heatmap of scores (single), Compare A | B (compare, or
// compact in a lesson step), a matrix of final numbers, or bars. A host's adapter (streamlit/heatmap.mjs,
// anywidget.mjs) calls mount again with each new data.

import { el } from "./draw.mjs";
import { Heatmap } from "./heatmap.mjs";
import { Compare } from "./heatmap_compare.mjs";
import { BarChart, Matrix } from "./heatmap_matrix.mjs";

/** Mount the figure `component.data` asks for into component.parentElement, or give the one there the new data;
 * component.setStateValue("view", view) hears of a heatmap's view once the person pauses. */
export function mount(component) {
  const { data, parentElement, setStateValue } = component;
  const kind = data.kind || (data.sides ? (data.compact ? "compact" : "compare") : "single");
  let host = parentElement.querySelector(".av-host");
  if (!host) host = parentElement.appendChild(el("div", { class: "av-host" }));
  if (host.kind !== kind) {
    host.replaceChildren();
    host.className = "av-host"; // a Compare's classes go with it
    host.kind = kind;
    const root = () => host.appendChild(el("div", { class: "av-heatmap" }));
    host.view = kind === "single" ? new Heatmap(root()) : kind === "matrix" ? new Matrix(root())
      : kind === "bars" ? new BarChart(root()) : new Compare(host, kind === "compact");
  }
  host.view.load(data, setStateValue);
}
