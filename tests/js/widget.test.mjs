// The notebook widget's adapter (attnviz/browser/anywidget.mjs) without a browser: the view it hands the heatmap from the model's
// traitlets, what it sends back, and the head it cuts out of a model view's bundle of every head's scores.
import assert from "node:assert/strict";
import { test } from "node:test";

import { compareData, heatmapData, sendView, viewOf } from "../../attnviz/browser/anywidget.mjs";

function fakeModel(values) {
  const saved = [];
  return {
    values, saved,
    get: (name) => values[name],
    set: (name, value) => { values[name] = value; },
    save_changes: () => saved.push({ ...values }),
  };
}

const VIEW = { temp: 1, hard: false, mask: "none", hide: [], scale: "row", palette: "viridis", query: 0, key: -1 };

test("the view comes from the traitlets, in the data's own order", () => {
  const model = fakeModel({ temp: 0.5, hard: true, mask: "causal", hide: [2], scale: "max", palette: "greys", query: 3, key: 1 });
  const view = viewOf(model, { view: VIEW });
  assert.deepEqual(Object.keys(view), Object.keys(VIEW));
  assert.deepEqual(view, { temp: 0.5, hard: true, mask: "causal", hide: [2], scale: "max", palette: "greys", query: 3, key: 1 });
  assert.equal(JSON.stringify(viewOf(fakeModel({ ...VIEW }), { view: VIEW })), JSON.stringify(VIEW)); // the same view: the same JSON
  assert.equal(viewOf(fakeModel({}), { view: VIEW }).temp, 1); // a traitlet the model lacks: the data's value
});

test("a view the heatmap sends sets the changed traitlets, then saves once", () => {
  const model = fakeModel({ ...VIEW });
  const names = Object.keys(VIEW);
  assert.equal(sendView(model, { ...VIEW, temp: 2, query: 4, over: "max" }, names), true);
  assert.equal(model.saved.length, 1);
  assert.equal(model.values.temp, 2);
  assert.equal(model.values.query, 4);
  assert.equal(model.values.over, undefined); // not one of the widget's names
  assert.equal(sendView(model, { ...VIEW, temp: 2, query: 4 }, names), false); // nothing new: no save
  assert.equal(model.saved.length, 1);
});

test("a model view cuts the chosen head's scores out of its bundle", () => {
  const [layers, heads, n, m] = [2, 3, 2, 2];
  const all = Float32Array.from({ length: layers * heads * n * m }, (_, i) => i);
  const data = { kind: "model", view: VIEW, layers, heads_per_layer: heads, n, m, version: "v", scores: "", base: 0 };
  const model = fakeModel({ ...VIEW, data, all_scores: all, layer: 1, head: 2 });
  const drawn = heatmapData(model);
  assert.deepEqual(Array.from(drawn.scores), [20, 21, 22, 23]); // layer 1, head 2: block 1 · 3 + 2 = 5
  assert.equal(drawn.version, "v-1-2");
  // the notebook counts from 0, as its arguments do, and says so; a figure counting from 1 says nothing more
  assert.match(drawn.title, /^Layer 1, head 2 \(from 0\): 2 queries × 2 keys$/);
  const fromOne = heatmapData(fakeModel({ ...VIEW, data: { ...data, base: 1 }, all_scores: all, layer: 1, head: 2 }));
  assert.match(fromOne.title, /^Layer 2, head 3: 2 queries × 2 keys$/);
  assert.equal(drawn.kind, "single"); // the figure mounted is one heatmap
  // one head's heatmap (kind "single") keeps its own scores, whatever traitlets the model has
  const single = heatmapData(fakeModel({ ...VIEW, data: { ...data, kind: "single", scores: "own" }, all_scores: all, layer: 1, head: 2 }));
  assert.equal(single.scores, "own");
});

test("Compare's sides take A's view and B's own τ, hard and mask", () => {
  const data = { kind: "compare", sides: [{ view: VIEW }, { view: VIEW }] };
  const model = fakeModel({ ...VIEW, temp: 0.5, query: 2, data, b_temp: 3, b_hard: true, b_mask: "causal" });
  const [a, b] = compareData(model).sides.map((side) => side.view);
  assert.equal(a.temp, 0.5);
  assert.equal(b.temp, 3);
  assert.equal(b.hard, true);
  assert.equal(b.mask, "causal");
  assert.equal(b.query, 2); // shared
});

test("the effects view's bars after removing a head are that head's values under the bars before's labels", async () => {
  const { afterBars } = await import("../../attnviz/browser/anywidget.mjs");
  const before = { kind: "bars", values: "AAAA", labels: ["a", "b"], title: "Before", axis: "p" };
  const model = fakeModel({ before, after: ["h00", "h01", "h02", "h10", "h11", "h12"], effects_atlas: { heads: 3, base: 0 }, layer: 1, head: 2 });
  const after = afterBars(model);
  assert.equal(after.values, "h12");
  assert.deepEqual(after.labels, ["a", "b"]);
  assert.equal(after.title, "After removing layer 1, head 2 (from 0)");
  assert.equal(before.values, "AAAA"); // the bars before are left as they were
});

test("a scan view draws the chosen head's overview out of its bundle of every head's", async () => {
  const { scanOverview } = await import("../../attnviz/browser/anywidget.mjs");
  const all = new Float32Array(2 * 3 * 2 * 2).map((_, i) => i); // (L 2, H 3, B 2, B 2)
  const overviews = Buffer.from(all.buffer).toString("base64");
  const template = { kind: "matrix", n: 2, m: 2, values: "", title: "each block's mean share", version: "v" };
  const model = fakeModel({ overview: template, overviews, scan_atlas: { heads: 3, base: 0 }, layer: 1, head: 2 });
  const drawn = scanOverview(model);
  assert.deepEqual([...drawn.values], [20, 21, 22, 23]); // head (1, 2): the sixth of six 2 × 2 blocks
  assert.equal(drawn.title, "Layer 1, head 2 (from 0): each block's mean share");
  assert.equal(drawn.version, "v-1-2");
  model.values.layer = 0;
  model.values.head = 1;
  assert.deepEqual([...scanOverview(model).values], [4, 5, 6, 7]);
  assert.equal(template.values, ""); // the template is left as it was
});
