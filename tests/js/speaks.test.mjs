// node --test tests/js: what the browser's figures say (attnviz/browser/draw.mjs's cellWords) and the Lesson's step
// announcement (attnviz/browser/announce.mjs), on hand-made data and a fake document.
import { test } from "node:test";
import assert from "node:assert/strict";
import { cellWords, describeWeights, ordinal, plural, strongest } from "../../attnviz/browser/draw.mjs";
import { mountAnnounce } from "../../attnviz/browser/announce.mjs";

const data = { m: 4, rows: ["the", "dog", "is", "happy"], cols: ["the", "dog", "is", "happy"] };
// row 3 ("happy"): weights 0.1, 0.5, 0.17, 0.23; row 0 masked past its own key (causal)
const weights = new Float32Array([1, 0, 0, 0, 0.6, 0.4, 0, 0, 0.2, 0.3, 0.5, 0, 0.1, 0.5, 0.17, 0.23]);
const allowed = new Uint8Array([1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1]);

test("a cell is read as its query, key, weight and rank among the row's allowed keys", () => {
  const result = { weights, allowed };
  assert.equal(cellWords(data, result, 3, 2), "query happy, key is, weight 0.17, 3rd of 4");
  assert.equal(cellWords(data, result, 3, 1), "query happy, key dog, weight 0.5, 1st of 4");
  assert.equal(cellWords(data, result, 1, 1), "query dog, key dog, weight 0.4, 2nd of 2");
  assert.equal(cellWords(data, result, 0, 3), "query the, key happy, masked: weight 0");
  assert.equal(cellWords({ ...data, axes: ["layer", "head"] }, result, 2, 0), "layer is, head the, weight 0.2, 3rd of 3");
});

test("ordinals, plurals and a row's strongest allowed column", () => {
  assert.deepEqual([1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111].map(ordinal),
    ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]);
  assert.deepEqual(["query", "key", "day", "query piece"].map(plural), ["queries", "keys", "days", "query pieces"]);
  assert.equal(strongest(weights, allowed, 3, 4), 1);
  assert.equal(strongest(new Float32Array([0, 0.9, 0.1]), new Uint8Array([0, 0, 1]), 0, 3), 2); // a masked 0.9 is not it
});

function fakeDocument(headings) {
  const region = { className: "", attrs: {}, textContent: "", setAttribute(k, v) { this.attrs[k] = v; } };
  const doc = {
    activeElement: null,
    createElement: () => region,
    querySelectorAll: () => headings,
  };
  doc.body = { tagName: "BODY" };
  doc.activeElement = doc.body;
  const parent = { found: null, querySelector() { return this.found; }, appendChild(node) { this.found = node; return node; } };
  return { doc, parent, region };
}

function heading(text) {
  return { textContent: text, attrs: {}, focused: 0, setAttribute(k, v) { this.attrs[k] = v; }, focus() { this.focused += 1; } };
}

test("a new step is said and its heading focused; the first visit and the same step are not", () => {
  const h7 = heading("7. Self-attention"), h8 = heading("8. Order matters");
  const { doc, parent, region } = fakeDocument([h7]);
  const mount = (place, title) => mountAnnounce({ data: { scope: "lesson-test", place, heading: `${place}. `, said: `Step ${place} of 21: ${title}` },
    parentElement: parent }, doc);
  mount(7, "Self-attention");
  assert.equal(region.textContent, "");
  assert.equal(h7.focused, 0);
  assert.equal(region.attrs["aria-live"], "polite");
  mount(7, "Self-attention"); // a rerun of the same step: nothing
  assert.equal(h7.focused, 0);
  doc.querySelectorAll = () => [h7, h8];
  mount(8, "Order matters");
  assert.equal(region.textContent, "Step 8 of 21: Order matters");
  assert.equal(h8.focused, 1);
  assert.equal(h8.attrs.tabindex, "-1");
  assert.equal(h7.focused, 0);
});

test("focus stays where a person is typing", () => {
  const h2 = heading("2. Hard retrieval"), h3 = heading("3. Soft retrieval");
  const { doc, parent, region } = fakeDocument([h2, h3]);
  const input = { tagName: "INPUT", closest: () => null };
  const mount = (place) => mountAnnounce({ data: { scope: "lesson-typing", place, heading: `${place}. `, said: `Step ${place}` },
    parentElement: parent }, doc);
  mount(2);
  doc.activeElement = input;
  mount(3);
  assert.equal(region.textContent, "Step 3");
  assert.equal(h3.focused, 0);
});

test("a heatmap's description names its largest allowed cell and each row's strongest key", () => {
  const said = describeWeights({ ...data, n: 4 }, { weights, allowed });
  assert.equal(said, "The largest, 1, is query the, key the. Each query's strongest key: the → the 1; dog → the 0.6; "
    + "is → is 0.5; happy → dog 0.5.");
  const many = { m: 1, n: 14, rows: [...Array(14).keys()].map(String), cols: ["k"], axes: ["layer", "head"] };
  const flat = { weights: new Float32Array(14).fill(0.5), allowed: new Uint8Array(14).fill(1) };
  assert.match(describeWeights(many, flat), /; and 2 more layers\.$/);
  assert.equal(describeWeights(many, { ...flat, allowed: new Uint8Array(14) }), "Every cell is masked.");
});
