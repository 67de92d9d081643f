// Reads cases of raw scores (one head or several) and options (written by tests/test_weights_js.py from the torch engine), computes the
// weights with attnviz/browser/weights.mjs, and writes them back: node tests/js/parity.mjs cases.json out.json
import { readFileSync, writeFileSync } from "node:fs";
import { headWeights } from "../../attnviz/browser/weights.mjs";

const [input, output] = process.argv.slice(2);
const cases = JSON.parse(readFileSync(input, "utf8"));
const results = cases.map(({ scores, heads = 1, n, m, options, over = "mean" }) => {
  const flat = Float32Array.from(scores.flat(2)); // (H, n, m) or (n, m)
  const { weights, blocked, overflow } = headWeights(flat, heads, n, m, options, over);
  return { weights: Array.from(weights), blocked, overflow };
});
writeFileSync(output, JSON.stringify(results));
