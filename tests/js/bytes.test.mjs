// Python's base64 read back in the browser (attnviz/browser/draw.mjs): bytes and float32 numbers equal to what was
// encoded, through the plain loop node runs here (Chromium 140 and later decode with Uint8Array.fromBase64 instead).
import assert from "node:assert/strict";
import { test } from "node:test";

import { bytesOf, float32Of } from "../../attnviz/browser/draw.mjs";

test("bytes come back as encoded, every byte value and none", () => {
  const every = Uint8Array.from({ length: 256 * 3 + 1 }, (_, i) => (i * 37) % 256);
  assert.deepEqual(bytesOf(Buffer.from(every).toString("base64")), every);
  assert.deepEqual(bytesOf(""), new Uint8Array(0));
});

test("float32 numbers come back exactly, non-finite ones included", () => {
  const numbers = Float32Array.from([0, -0, 1.5, -2.25e-38, 3.4e38, Infinity, -Infinity, NaN, 1 / 3]);
  const decoded = float32Of(Buffer.from(numbers.buffer).toString("base64"));
  assert.deepEqual(Array.from(decoded), Array.from(numbers));
});
