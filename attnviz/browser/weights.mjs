// The attention weights of one view, computed in the browser from the raw scores that Python sends once:
// softmax(S / τ) per row over the allowed keys, or the one-hot argmax (hard attention), and the colour scales.
// It mirrors attnviz/functional.py's `attend` (tests/test_weights_js.py checks it against the torch engine):
//   - S / τ is taken in float32, as torch divides a float32 tensor, so hard attention sees the same ties;
//   - a masked key gets −∞, so it gets exactly zero weight; a query whose every key is masked gets zeros;
//   - the softmax subtracts the row's maximum first, so large scores give no NaN;
//   - hard attention takes the first of equal maxima, as torch.argmax does.
// No DOM here: node's test runner imports this file (tests/js/weights.test.mjs).

const f32 = Math.fround;

/**
 * The keys query `i` may attend to: not after it under the causal mask, not hidden, and within the layer's own
 * sliding window where it has one (`window` w > 0: a decoder's query reads its last w pieces, j > i − w; an encoder's,
 * `windowBoth`, the pieces within w either side, |i − j| ≤ w). `rowStart` is the position of row 0 when the rows are a
 * window of a longer sentence's queries (the keys are always every key, from position 0). With `sink`, the last key is
 * a head's learned sink (gpt-oss), which every query reads under every mask.
 */
export function allowedKeys(i, m, { causal = false, hidden = [], rowStart = 0, window = 0, windowBoth = false, sink = false } = {}) {
  const hiddenSet = hidden instanceof Set ? hidden : new Set(hidden);
  const allowed = new Uint8Array(m); // (Tk,)
  const q = rowStart + i;
  for (let j = 0; j < m; j++) {
    const outside = window > 0 && (windowBoth ? Math.abs(q - j) > window : j <= q - window);
    allowed[j] = (causal && j > q) || hiddenSet.has(j) || outside ? 0 : 1;
  }
  if (sink) allowed[m - 1] = 1;
  return allowed;
}

/**
 * What a mask's name means (attnviz.sentence.MASK_RULES): whether it is causal, and whether it hides the keys
 * the view names ("causal_keys": both, as a decoder's hidden first piece).
 */
export function maskRule(mask) {
  return { causal: mask === "causal" || mask === "causal_keys", hides: mask === "keys" || mask === "causal_keys" };
}

/**
 * Weights (n, m) from scores (n, m), both flat row-major arrays; the rows may be queries rowStart … rowStart + n − 1
 * of a longer sentence (a zoom window's rows, each with every key).
 * Returns { weights: Float64Array(n·m), allowed: Uint8Array(n·m), blocked: rows with every key masked,
 *           overflow: rows whose S/τ left float32's range so that the softmax has no answer }.
 */
export function attentionWeights(scores, n, m, { tau = 1, hard = false, causal = false, hidden = [], rowStart = 0, window = 0,
  windowBoth = false, sink = false } = {}) {
  if (!(tau > 0)) throw new RangeError(`τ must be positive, got ${tau}`);
  const hiddenSet = new Set(hidden);
  const weights = new Float64Array(n * m); // (n, m)
  const allowed = new Uint8Array(n * m); // (n, m)
  const logits = new Float64Array(m); // (m,) one row of S/τ, masked keys at −∞
  const tau32 = f32(tau);
  const blocked = [];
  const overflow = [];
  for (let i = 0; i < n; i++) {
    const row = i * m;
    const keys = allowedKeys(i, m, { causal, hidden: hiddenSet, rowStart, window, windowBoth, sink });
    allowed.set(keys, row);
    let any = false;
    for (let j = 0; j < m; j++) {
      const s = scores[row + j];
      logits[j] = keys[j] ? (tau === 1 ? s : f32(s / tau32)) : -Infinity;
      any = any || keys[j] === 1;
    }
    if (!any) {
      blocked.push(i); // its weights stay 0
      continue;
    }
    if (hard) {
      let best = 0; // torch.argmax: the first maximum; a row of −∞ gives index 0
      for (let j = 1; j < m; j++) if (logits[j] > logits[best]) best = j;
      weights[row + best] = 1;
      continue;
    }
    let largest = -Infinity;
    for (let j = 0; j < m; j++) if (logits[j] > largest) largest = logits[j];
    if (!Number.isFinite(largest)) {
      overflow.push(i); // exp(∞ − ∞) is NaN: no weights exist, as in the engine
      continue;
    }
    let sum = 0;
    for (let j = 0; j < m; j++) {
      const e = Math.exp(logits[j] - largest); // exp(−∞) = 0 for masked keys
      weights[row + j] = e;
      sum += e;
    }
    for (let j = 0; j < m; j++) weights[row + j] /= sum;
  }
  return { weights, allowed, blocked, overflow };
}

export const OVER_HEADS = ["mean", "max"];

/**
 * Several heads under one view: scores (H, n, m) flat, each head's weights by attentionWeights, then combined cell by
 * cell into one (n, m) matrix, "mean" (the average over heads, as the engine's `weights.mean(0)`: rows still sum to 1)
 * or "max" (each cell's strongest head: rows need not sum to 1). Returns attentionWeights' fields for the combined
 * matrix (the mask is the same for every head; `overflow` holds the rows that overflow in any head) and `heads`,
 * each head's own weights.
 */
export function headWeights(scores, heads, n, m, options = {}, over = "mean") {
  if (!OVER_HEADS.includes(over)) throw new RangeError(`unknown head combination ${over}`);
  const per = [];
  for (let h = 0; h < heads; h++) per.push(attentionWeights(scores.subarray(h * n * m, (h + 1) * n * m), n, m, options));
  if (heads === 1) return { ...per[0], heads: [per[0].weights] };
  const weights = new Float64Array(n * m); // (n, m)
  for (const head of per) {
    for (let k = 0; k < n * m; k++) weights[k] = over === "max" ? Math.max(weights[k], head.weights[k]) : weights[k] + head.weights[k];
  }
  if (over === "mean") for (let k = 0; k < n * m; k++) weights[k] /= heads;
  const overflow = [...new Set(per.flatMap((head) => head.overflow))].sort((a, b) => a - b);
  return { weights, allowed: per[0].allowed, blocked: per[0].blocked, overflow, heads: per.map((head) => head.weights) };
}

/** Entropy −Σ α ln α of one row, in nats, with 0 ln 0 = 0. */
export function entropy(row) {
  let h = 0;
  for (const w of row) if (w > 0) h -= w * Math.log(w);
  return h;
}

export const SCALES = ["row", "max", "absolute", "sqrt"];

/** The largest weight, or 1 when there is none above 0 (figures.colour_scale's `top`). */
export function topWeight(weights) {
  let top = 0;
  for (const w of weights) if (w > top) top = w;
  return top > 0 ? top : 1;
}

/**
 * What a cell's colour shows, on 0 … zmax (figures.ColourScale.show): "row" divides each row by its largest
 * weight, "max" and "absolute" show the weight itself (zmax the largest weight, or 1), "sqrt" shows √(w / top).
 * `rowMax` (n,), when given, is each row's largest weight over every key, for drawn columns that are a window of
 * the keys: "row" then divides by the whole row's largest, as its colour bar says. `shared`, when given, is the
 * largest weight of several matrices drawn on one colour scale (Compare: A and B), used in place of this one's.
 */
export function colourValues(weights, n, m, scale, rowMax = null, shared = null) {
  if (!SCALES.includes(scale)) throw new RangeError(`unknown colour scale ${scale}`);
  const top = shared ?? topWeight(weights);
  const shown = new Float64Array(n * m); // (n, m)
  for (let i = 0; i < n; i++) {
    const row = i * m;
    let largest = rowMax ? rowMax[i] : 0;
    if (scale === "row" && !rowMax) for (let j = 0; j < m; j++) largest = Math.max(largest, weights[row + j]);
    for (let j = 0; j < m; j++) {
      const w = weights[row + j];
      shown[row + j] = scale === "row" ? (largest > 0 ? w / largest : 0) : scale === "sqrt" ? Math.sqrt(w / top) : w;
    }
  }
  return { shown, top, zmax: scale === "max" ? top : 1 };
}

/** B − A cell by cell, (n, m) flat, and its largest magnitude (1 where they agree everywhere): the diverging scale's extent. */
export function difference(a, b) {
  const out = new Float64Array(a.length); // (n, m)
  let extent = 0;
  for (let k = 0; k < a.length; k++) {
    out[k] = b[k] - a[k];
    extent = Math.max(extent, Math.abs(out[k]));
  }
  return { difference: out, extent: extent > 0 ? extent : 1 };
}

/** Columns start … start + width − 1 of a flat (n, m) array, as a flat (n, width) array of the same type. */
export function columns(flat, n, m, start, width) {
  const out = new flat.constructor(n * width); // (n, width)
  for (let i = 0; i < n; i++) out.set(flat.subarray(i * m + start, i * m + start + width), i * width);
  return out;
}

/** Each row's largest value of a flat (n, m) array: (n,). */
export function rowMaxima(flat, n, m) {
  const out = new Float64Array(n); // (n,)
  for (let i = 0; i < n; i++) for (let j = 0; j < m; j++) out[i] = Math.max(out[i], flat[i * m + j]);
  return out;
}

/** plotly's "~g" number format (d3-format): p significant digits, trailing zeros dropped, "−" for minus. */
export function formatG(x, p = 4) {
  if (!Number.isFinite(x)) return String(x);
  const [mantissa, exponent] = Math.abs(x).toPrecision(p).split("e");
  const trimmed = mantissa.includes(".") ? mantissa.replace(/\.?0+$/, "") : mantissa;
  const text = exponent === undefined ? trimmed : `${trimmed}e${exponent}`;
  return x < 0 && text !== "0" ? `−${text}` : text; // the sign as d3 writes it; the exponent keeps its hyphen
}

/** One format for all the numbers of a chart: fixed decimals, as many as give its largest |value| `digits`
 * significant digits (0 to 6), so the bars line up and read alike; a value that would round to 0 reads "<0.0001"
 * (">−0.0001" below 0), an exact 0 "0". */
export function chartFormat(values, digits = 4) {
  let top = 0;
  for (const x of values) if (Number.isFinite(x)) top = Math.max(top, Math.abs(x));
  const decimals = top > 0 ? Math.min(6, Math.max(0, digits - 1 - Math.floor(Math.log10(top)))) : 0;
  const step = (10 ** -decimals).toFixed(decimals);
  return (x) => {
    if (!Number.isFinite(x)) return String(x);
    if (x === 0) return "0";
    if (Math.abs(x) < 0.5 * 10 ** -decimals) return x > 0 ? `<${step}` : `>−${step}`;
    return (x < 0 ? "−" : "") + Math.abs(x).toFixed(decimals);
  };
}

/** The colour-bar title of a scale (figures.ColourScale.colorbar). */
export function colourBarTitle(scale, top, what = "weight") {
  if (scale === "row") return `${what} ÷ its row's largest`;
  if (scale === "max") return `${what}, 0 → max ${formatG(top, 3)}`;
  if (scale === "sqrt") return `${what} (√ scale), 0 → max ${formatG(top, 3)}`;
  return `${what}, 0 → 1`;
}

/** A palette's colour at t in [0, 1], interpolated in RGB between its stops [[position, [r, g, b]], ...]. */
export function paletteColour(stops, t) {
  const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0));
  let k = 1;
  while (k < stops.length - 1 && stops[k][0] < x) k++;
  const [p0, c0] = stops[k - 1];
  const [p1, c1] = stops[k];
  const u = p1 > p0 ? (x - p0) / (p1 - p0) : 0;
  return [0, 1, 2].map((c) => Math.round(c0[c] + (c1[c] - c0[c]) * u));
}
