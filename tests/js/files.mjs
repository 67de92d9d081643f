// The page's downloads (attnviz/browser/files.mjs) for Python to compare with its own:
// node tests/js/files.mjs in.json out.json, in.json [{values, rows, cols, corner}], out.json [{csv, npy (base64)}].
import { readFileSync, writeFileSync } from "node:fs";
import { matrixCsv, npyFloat32 } from "../../attnviz/browser/files.mjs";

const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const number = (v) => (typeof v === "string" ? Number(v.replace("nan", "NaN").replace("inf", "Infinity")) : v);
const out = cases.map(({ values: sent, rows, cols, corner }) => ({ values: sent.map(number), rows, cols, corner }))
  .map(({ values, rows, cols, corner }) => ({
  csv: matrixCsv(values, rows, cols, corner),
  npy: Buffer.from(npyFloat32(values, rows.length, cols.length)).toString("base64"),
}));
writeFileSync(process.argv[3], JSON.stringify(out));
