// node --test tests/js: the long-text overview's selection, by hand.
import { test } from "node:test";
import assert from "node:assert/strict";
import { blockHidden, regionOf } from "../../attnviz/browser/overview.mjs";

test("a click is one block; a box dragged either way is its corners, first then last", () => {
  assert.deepEqual(regionOf([5, 3], [5, 3]), [5, 3]);
  assert.deepEqual(regionOf([3, 1], [4, 2]), [3, 1, 4, 2]);
  assert.deepEqual(regionOf([4, 2], [3, 1]), [3, 1, 4, 2]); // dragged up and to the left
  assert.deepEqual(regionOf([4, 1], [3, 2]), [3, 1, 4, 2]); // dragged up and to the right
});

test("in a decoder a key block past the query block is hidden; in an encoder none is", () => {
  assert.equal(blockHidden(2, 3, true), true);
  assert.equal(blockHidden(3, 3, true), false);
  assert.equal(blockHidden(3, 2, true), false);
  assert.equal(blockHidden(2, 3, false), false);
});
