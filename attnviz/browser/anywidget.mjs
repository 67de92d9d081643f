// The notebook widgets' host adapter (attnviz.notebook): anywidget's render({ model, el }) around the same figures as
// the Streamlit components (figures.mjs, atlas.mjs, timeline.mjs). Python's traitlets hold the view; the heatmap tells
// them of a change once the person pauses (heatmap_draw.mjs's SYNC_MS), and a change made in Python (a traitlet set)
// redraws. Importing it touches no DOM, so node's tests import its pure parts.

import { mountAtlas } from "./atlas.mjs";
import { mount } from "./figures.mjs";
import { mountTimeline } from "./timeline.mjs";

/** The view as the heatmap takes it: the traitlets named in the data's own view, in the data's order (the heatmap
 * compares views as JSON, so the order decides whether a view is "the same"). */
export function viewOf(model, data) {
  const view = {};
  for (const name of Object.keys(data.view)) {
    const value = model.get(name);
    view[name] = value === undefined || value === null ? data.view[name] : value;
  }
  return view;
}

/** A view the heatmap sent (after the pause): each of its names that the model has, then one save. */
export function sendView(model, view, names) {
  let changed = false;
  for (const [name, value] of Object.entries(view)) {
    if (!names.includes(name)) continue;
    if (JSON.stringify(model.get(name)) === JSON.stringify(value)) continue;
    model.set(name, value);
    changed = true;
  }
  if (changed) model.save_changes();
  return changed;
}

/** Compare A | B's data with the model's view: A's is the plain names, B's τ, hard and mask are b_temp, b_hard,
 * b_mask; the rest is shared. */
export function compareData(model) {
  const data = model.get("data");
  const a = viewOf(model, data.sides[0]);
  const b = { ...a, temp: model.get("b_temp"), hard: model.get("b_hard"), mask: model.get("b_mask") };
  return { ...data, sides: [{ ...data.sides[0], view: a }, { ...data.sides[1], view: b }] };
}

/** The heatmap's data with the model's view; for a model view (kind "model"), the chosen head's scores cut out of the
 * bundle of every head's (`all_scores`: base64 float32 (L, H, n, m)) where the notebook sent it, so a click on the
 * atlas works offline too. */
export function heatmapData(model) {
  const data = model.get("data");
  const chosen = { ...data, kind: "single", view: viewOf(model, data) };
  const bundle = model.get("all_scores");
  if (data.kind === "model" && bundle) {
    const [layer, head] = [model.get("layer"), model.get("head")];
    const size = data.n * data.m;
    const all = bundle instanceof Float32Array ? bundle : bundleOf(bundle);
    const index = layer * data.heads_per_layer + head;
    chosen.scores = all.subarray(index * size, (index + 1) * size);
    chosen.version = `${data.version}-${layer}-${head}`;
    const base = data.base ?? 1;
    chosen.title = `Layer ${layer + base}, head ${head + base}${base ? "" : " (from 0)"}: ${data.n} queries × ${data.m} keys`;
  }
  return chosen;
}

const bundles = new Map();
function bundleOf(base64) {
  if (base64 instanceof Float32Array) return base64;
  if (!bundles.has(base64)) {
    bundles.clear();
    const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
    bundles.set(base64, new Float32Array(bytes.buffer));
  }
  return bundles.get(base64);
}

/** The bars after removing head (layer, head): the bars before with that head's values (`after`, base64 per head). */
export function afterBars(model) {
  const before = model.get("before");
  const [layer, head] = [model.get("layer"), model.get("head")];
  const { heads, base = 1 } = model.get("effects_atlas");
  const values = model.get("after")[layer * heads + head];
  return { ...before, values, title: `After removing layer ${layer + base}, head ${head + base}${base ? "" : " (from 0)"}` };
}

/** The atlas held in traitlet `name`, drawn into `root` with the layer and head traitlets chosen; a click sets them,
 * saves, and calls `then`. */
function mountChooser(model, name, root, then) {
  mountAtlas({
    data: { ...model.get(name), chosen: [model.get("layer"), model.get("head")] }, parentElement: root,
    setTriggerValue: (_, [layer, head]) => {
      model.set("layer", layer);
      model.set("head", head);
      model.save_changes();
      then();
    },
  });
}

/** `draw` on every change of the layer or head traitlets; returns what stops it. */
function onHead(model, draw) {
  for (const name of ["layer", "head"]) model.on(`change:${name}`, draw);
  return () => {
    for (const name of ["layer", "head"]) model.off(`change:${name}`, draw);
  };
}

function renderEffects({ model, el }) {
  const atlasRoot = el.appendChild(document.createElement("div"));
  const bars = el.appendChild(document.createElement("div"));
  bars.style.display = "grid";
  bars.style.gridTemplateColumns = "1fr 1fr";
  bars.style.gap = "1rem";
  const beforeRoot = bars.appendChild(document.createElement("div"));
  const afterRoot = bars.appendChild(document.createElement("div"));
  const draw = () => {
    mountChooser(model, "effects_atlas", atlasRoot, draw);
    if (model.get("after").length) {
      mount({ data: model.get("before"), parentElement: beforeRoot });
      mount({ data: afterBars(model), parentElement: afterRoot });
    }
  };
  draw();
  return onHead(model, draw);
}

/** The chosen head's overview out of a scan view's bundle of every head's ((L, H, B, B) float32, base64), as the
 * Matrix figure draws it: the template's labels and scale with that head's values and title. */
export function scanOverview(model) {
  const template = model.get("overview");
  const [layer, head] = [model.get("layer"), model.get("head")];
  const { heads, base = 0 } = model.get("scan_atlas");
  const size = template.n * template.m;
  const index = layer * heads + head;
  const values = bundleOf(model.get("overviews")).subarray(index * size, (index + 1) * size);
  const title = `Layer ${layer + base}, head ${head + base}${base ? "" : " (from 0)"}: ${template.title}`;
  return { ...template, values, title, version: `${template.version}-${layer}-${head}` };
}

function renderScan({ model, el }) {
  const atlasRoot = el.appendChild(document.createElement("div"));
  const overviewRoot = el.appendChild(document.createElement("div"));
  const draw = () => {
    mountChooser(model, "scan_atlas", atlasRoot, draw);
    mount({ data: scanOverview(model), parentElement: overviewRoot });
  };
  draw();
  return onHead(model, draw);
}

function renderTimeline({ model, el }) {
  const draw = () => mountTimeline({ data: model.get("timeline"), parentElement: el });
  draw();
  model.on("change:timeline", draw);
  return () => model.off("change:timeline", draw);
}

/** A heatmap whose view is the model's traitlets: one head (kind "single"), a model view's chosen head under its atlas
 * ("model"), or Compare A | B ("compare"). */
function renderHeatmap({ model, el }) {
  const kind = model.get("data").kind;
  const names = model.get("view_names");
  const atlasRoot = kind === "model" ? el.appendChild(document.createElement("div")) : null;
  const heatmapRoot = el.appendChild(document.createElement("div"));
  let queued = false;
  const draw = () => {
    queued = false;
    if (atlasRoot) mountChooser(model, "atlas", atlasRoot, () => {});
    const data = kind === "compare" ? compareData(model) : heatmapData(model);
    mount({ data, parentElement: heatmapRoot, setStateValue: (name, view) => sendView(model, view, names) });
  };
  const later = () => {
    if (queued) return; // several traitlets set at once redraw once
    queued = true;
    queueMicrotask(draw);
  };
  draw();
  const watched = [...names, "data", ...(kind === "model" ? ["atlas", "layer", "head", "all_scores"] : [])];
  for (const name of watched) model.on(`change:${name}`, later);
  return () => {
    for (const name of watched) model.off(`change:${name}`, later);
  };
}

// Each widget by the kind its data names (attnviz.notebook sets it), as figures.mjs mounts a figure by its kind.
const WIDGETS = {
  single: renderHeatmap, model: renderHeatmap, compare: renderHeatmap,
  effects: renderEffects, timeline: renderTimeline, scan: renderScan,
};

function render({ model, el }) {
  const kind = model.get("data").kind;
  const widget = WIDGETS[kind];
  if (!widget) throw new Error(`attnviz: no widget of kind ${JSON.stringify(kind)}`);
  return widget({ model, el });
}

export default { render };
