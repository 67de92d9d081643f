// Files built in the page from what a figure draws: a matrix as CSV, in attnviz.export.matrix_csv's format byte for
// byte, and as a float32 .npy that numpy.load reads (no pickle). No DOM here: node's tests compare both with Python's.

const FORMULA_START = ["=", "+", "-", "@", "\t", "\r"]; // a cell starting so runs as a formula in a spreadsheet
const POWERS = new Map(); // 10^e as the C library's pow gives it (correctly rounded), as numpy's power does

function power(e) {
  if (!POWERS.has(e)) POWERS.set(e, Number(`1e${e}`));
  return POWERS.get(e);
}

/** numpy's rint: to the nearest integer, a half to the even one. */
function rint(v) {
  const floor = Math.floor(v);
  const rest = v - floor;
  if (rest !== 0.5) return rest > 0.5 ? floor + 1 : floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** One number as export._scientific writes it: "d.ddddde±XX" (6 significant digits), nan, inf or -inf. */
export function scientific(x) {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  const a = Math.abs(x);
  let exponent = 0;
  let mantissa = 0;
  if (a > 0) {
    exponent = Math.floor(Math.log10(a));
    mantissa = rint((a / power(exponent)) * 1e5);
    if (mantissa < 100000 || mantissa >= 1000000) { // log10 one off near a power of ten, or 9.999995 rounded up
      exponent += mantissa < 100000 ? -1 : 1;
      mantissa = rint((a / power(exponent)) * 1e5);
    }
  }
  const digits = String(mantissa).padStart(6, "0");
  const sign = x < 0 ? "-" : "";
  return `${sign}${digits[0]}.${digits.slice(1)}e${exponent < 0 ? "-" : "+"}${String(Math.abs(exponent) % 100).padStart(2, "0")}`;
}

/** A label as a CSV cell: a formula's first character disarmed, quoted where it holds a comma or a quote. */
function csvCell(text) {
  const safe = FORMULA_START.some((start) => text.startsWith(start)) ? `'${text}` : text;
  return /[",]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

/** values (rows, cols) row-major as CSV: a header of column labels after `corner`, then one labelled line per row;
 * each number as float32, as the figure holds it. */
export function matrixCsv(values, rows, cols, corner = "query \\ key") {
  const lines = [[corner, ...cols].map(csvCell).join(",")];
  for (let i = 0; i < rows.length; i++) {
    const numbers = [];
    for (let j = 0; j < cols.length; j++) numbers.push(scientific(Math.fround(values[i * cols.length + j])));
    lines.push(`${csvCell(rows[i])},${numbers.join(",")}`);
  }
  return lines.join("\n") + "\n";
}

/** values (rows, cols) row-major as a float32 .npy file (format 1.0, its header padded to 64 bytes, as numpy's). */
export function npyFloat32(values, rows, cols) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${rows}, ${cols}), }`;
  const unpadded = 10 + header.length + 1; // magic, version, length, header, "\n"
  header += " ".repeat((64 - (unpadded % 64)) % 64) + "\n";
  const bytes = new Uint8Array(10 + header.length + 4 * rows * cols);
  bytes.set([0x93, ..."NUMPY"].map((c) => (typeof c === "string" ? c.charCodeAt(0) : c)), 0);
  bytes.set([1, 0, header.length & 0xff, header.length >> 8], 6);
  for (let k = 0; k < header.length; k++) bytes[10 + k] = header.charCodeAt(k);
  new Uint8Array(bytes.buffer, 10 + header.length).set(new Uint8Array(Float32Array.from(values).buffer));
  return bytes;
}
