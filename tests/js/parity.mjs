// Reads cases of raw scores and options (written by tests/test_weights_js.py from the torch engine), computes the
// weights with attnviz/weights.mjs, and writes them back: node tests/js/parity.mjs cases.json out.json
import { readFileSync, writeFileSync } from "node:fs";
import { attentionWeights } from "../../attnviz/weights.mjs";

const [input, output] = process.argv.slice(2);
const cases = JSON.parse(readFileSync(input, "utf8"));
const results = cases.map(({ scores, n, m, options }) => {
  const flat = Float32Array.from(scores.flat());
  const { weights, blocked, overflow } = attentionWeights(flat, n, m, options);
  return { weights: Array.from(weights), blocked, overflow };
});
writeFileSync(output, JSON.stringify(results));
