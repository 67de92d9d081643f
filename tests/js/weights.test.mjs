// node --test tests/js: the browser's attention math on cases whose answer follows from the formula by hand.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  attentionWeights, chartFormat, colourBarTitle, colourValues, columns, difference, entropy, formatG, headWeights, paletteColour, rowMaxima, topWeight,
} from "../../attnviz/browser/weights.mjs";

const close = (a, b, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${a} != ${b}`);

test("a row's softmax is exp(s/τ) over the sum of its exps", () => {
  const { weights } = attentionWeights(Float32Array.from([0, Math.log(3)]), 1, 2, { tau: 1 });
  close(weights[0], 0.25, 1e-7);
  close(weights[1], 0.75, 1e-7);
  const halved = attentionWeights(Float32Array.from([0, 2]), 1, 2, { tau: 2 }).weights;
  close(halved[1], Math.exp(1) / (1 + Math.exp(1)), 1e-7);
});

test("hard attention takes the first of equal maxima, as torch.argmax", () => {
  const { weights } = attentionWeights(Float32Array.from([1, 5, 5, 2]), 1, 4, { hard: true });
  assert.deepEqual(Array.from(weights), [0, 1, 0, 0]);
});

test("the causal mask hides later keys; a fully hidden row is all zeros, not NaN", () => {
  const scores = Float32Array.from([1, 2, 3, 4]);
  const causal = attentionWeights(scores, 2, 2, { causal: true });
  assert.deepEqual(Array.from(causal.weights.slice(0, 2)), [1, 0]);
  const hidden = attentionWeights(scores, 2, 2, { hidden: [0, 1] });
  assert.deepEqual(Array.from(hidden.weights), [0, 0, 0, 0]);
  assert.deepEqual(hidden.blocked, [0, 1]);
  const hardHidden = attentionWeights(scores, 2, 2, { hidden: [0, 1], hard: true });
  assert.deepEqual(Array.from(hardHidden.weights), [0, 0, 0, 0]);
});

test("huge scores give finite weights; S/τ past float32 is reported, never drawn as NaN", () => {
  const big = attentionWeights(Float32Array.from([3e38, 2.9e38]), 1, 2, { tau: 1 });
  assert.ok(Array.from(big.weights).every(Number.isFinite));
  close(big.weights[0], 1);
  const over = attentionWeights(Float32Array.from([1e37, 0]), 1, 2, { tau: 0.01 });
  assert.deepEqual(over.overflow, [0]);
  assert.ok(Array.from(over.weights).every(Number.isFinite));
});

test("τ must be positive", () => {
  assert.throws(() => attentionWeights(Float32Array.from([1]), 1, 1, { tau: 0 }), RangeError);
});

test("entropy is 0 for one-hot and ln n for uniform", () => {
  close(entropy([0, 1, 0]), 0);
  close(entropy([0.25, 0.25, 0.25, 0.25]), Math.log(4));
});

test("colour scales: per row, 0 → max, 0 → 1 and √ stretch", () => {
  const w = [0.2, 0.8, 0.5, 0.5];
  assert.deepEqual(Array.from(colourValues(w, 2, 2, "row").shown), [0.25, 1, 1, 1]);
  const max = colourValues(w, 2, 2, "max");
  assert.equal(max.zmax, 0.8);
  assert.deepEqual(Array.from(max.shown), w);
  assert.equal(colourValues(w, 2, 2, "absolute").zmax, 1);
  close(colourValues(w, 2, 2, "sqrt").shown[0], Math.sqrt(0.2 / 0.8));
  assert.deepEqual(Array.from(colourValues([0, 0], 1, 2, "row").shown), [0, 0]);
  assert.equal(topWeight([0, 0]), 1);
  assert.throws(() => colourValues(w, 2, 2, "evil"), RangeError);
});

test("a zoom window: its columns cut from whole rows, and per-row colours divided by the whole row's largest", () => {
  const full = Float64Array.from([0.1, 0.6, 0.3, 0.5, 0.2, 0.3]); // (2, 3)
  const window = columns(full, 2, 3, 1, 2); // keys 1 and 2
  assert.ok(window instanceof Float64Array);
  assert.deepEqual(Array.from(window), [0.6, 0.3, 0.2, 0.3]);
  assert.deepEqual(Array.from(columns(Uint8Array.from([1, 0, 1, 1, 1, 0]), 2, 3, 0, 1)), [1, 1]);
  assert.deepEqual(Array.from(rowMaxima(full, 2, 3)), [0.6, 0.5]);
  const shown = colourValues(window, 2, 2, "row", rowMaxima(full, 2, 3)).shown;
  assert.deepEqual(Array.from(shown), [1, 0.5, 0.4, 0.6]); // row 1's largest (0.5) is outside the window
  assert.deepEqual(Array.from(colourValues(window, 2, 2, "row").shown), [1, 0.5, 0.2 / 0.3, 1]);
});

test("Compare: B − A cell by cell with its extent, and both sides coloured on the larger top", () => {
  const { difference: d, extent } = difference(Float64Array.from([0.25, 0.75]), Float64Array.from([0.5, 0.5]));
  assert.deepEqual(Array.from(d), [0.25, -0.25]);
  assert.equal(extent, 0.25);
  assert.equal(difference([0.5, 0.5], [0.5, 0.5]).extent, 1); // they agree everywhere: the scale is ±1, not ±0
  const a = colourValues(Float64Array.from([0.25, 0.75]), 1, 2, "max", null, 0.9);
  assert.equal(a.zmax, 0.9);
  assert.equal(a.top, 0.9);
  close(colourValues(Float64Array.from([0.36]), 1, 1, "sqrt", null, 0.9).shown[0], Math.sqrt(0.4));
});

test("causal rows of a window count from their own positions (rowStart)", () => {
  const { allowed } = attentionWeights(new Float32Array(2 * 4), 2, 4, { causal: true, rowStart: 2 });
  assert.deepEqual(Array.from(allowed), [1, 1, 1, 0, 1, 1, 1, 1]);
});

test("numbers read as plotly's ~g format and the colour bar says its scale", () => {
  assert.equal(formatG(0.123456, 4), "0.1235");
  assert.equal(formatG(0.5, 4), "0.5");
  assert.equal(formatG(-2.5, 4), "−2.5");
  assert.equal(formatG(1e-7, 4), "1e-7");
  assert.equal(colourBarTitle("row", 1), "weight ÷ its row's largest");
  assert.equal(colourBarTitle("max", 0.4567), "weight, 0 → max 0.457");
});

test("palette colours interpolate between stops", () => {
  const stops = [[0, [0, 0, 0]], [1, [255, 255, 255]]];
  assert.deepEqual(paletteColour(stops, 0.5), [128, 128, 128]);
  assert.deepEqual(paletteColour(stops, 2), [255, 255, 255]);
  assert.deepEqual(paletteColour(stops, NaN), [0, 0, 0]);
});

test("several heads: the mean of each head's softmax, or each cell's strongest head", () => {
  // Two heads of one query over two keys: head 0 scores (0, ln 3) → (1/4, 3/4); head 1 scores (ln 3, 0) → (3/4, 1/4).
  const scores = Float32Array.from([0, Math.log(3), Math.log(3), 0]); // (H = 2, n = 1, m = 2)
  const mean = headWeights(scores, 2, 1, 2, {}, "mean");
  assert.ok(Math.abs(mean.weights[0] - 0.5) < 1e-7 && Math.abs(mean.weights[1] - 0.5) < 1e-7);
  const max = headWeights(scores, 2, 1, 2, {}, "max");
  assert.ok(Math.abs(max.weights[0] - 0.75) < 1e-7 && Math.abs(max.weights[1] - 0.75) < 1e-7); // a row of 1.5
  assert.equal(max.heads.length, 2);
  assert.throws(() => headWeights(scores, 2, 1, 2, {}, "median"), RangeError);
  const one = headWeights(scores.subarray(0, 2), 1, 1, 2, { tau: 0.5 });
  assert.deepEqual(Array.from(one.weights), Array.from(attentionWeights(scores.subarray(0, 2), 1, 2, { tau: 0.5 }).weights));
});

test("a chart's numbers share one format: fixed decimals from its largest, tiny ones bounded, never exponents", () => {
  const format = chartFormat([0.242, 0.05624, 1.256e-8, 0.00000791, 0]);
  assert.deepEqual([0.242, 0.05624, 1.256e-8, 0.00000791, 0].map(format), ["0.2420", "0.0562", "<0.0001", "<0.0001", "0"]);
  assert.deepEqual([1, 0.5, 0.00049].map(chartFormat([1, 0.5, 0.00049])), ["1.000", "0.500", "<0.001"]);
  assert.deepEqual([-2.5, 12.25, -0.001].map(chartFormat([-2.5, 12.25, -0.001])), ["−2.50", "12.25", ">−0.01"]);
  assert.deepEqual([1234.5, 7].map(chartFormat([1234.5, 7])), ["1235", "7"]);
  assert.equal(chartFormat([NaN, Infinity])(Infinity), "Infinity");
  assert.equal(chartFormat([])(0), "0");
});

test("a layer's sliding window: a decoder's query reads its last w pieces, an encoder's those within w either side", () => {
  const scores = new Float32Array(16); // (4, 4) all equal: every allowed key gets the same weight
  const causal = attentionWeights(scores, 4, 4, { causal: true, window: 2 });
  assert.deepEqual(Array.from(causal.weights.slice(12, 16)), [0, 0, 0.5, 0.5]); // query 3 reads keys 2 and 3
  const both = attentionWeights(scores, 4, 4, { window: 1, windowBoth: true });
  const third = 1 / 3;
  [0, third, third, third].forEach((w, j) => close(both.weights[8 + j], w)); // query 2 reads keys 1, 2 and 3
  const zoomed = attentionWeights(new Float32Array(4), 1, 4, { causal: true, window: 2, rowStart: 3 });
  assert.deepEqual(Array.from(zoomed.weights), [0, 0, 0.5, 0.5]); // the same row seen in a zoom window
});
