// What every figure draws with: elements made without parsing HTML, bytes from Python's base64, a canvas at the
// screen's pixel ratio, and the colours the figures share. User text is only ever set as textContent.

import { formatG } from "./weights.mjs";

export const SVG_NS = "http://www.w3.org/2000/svg";
export const HIGHLIGHT = "#d55e00"; // the chosen query, head or piece
export const INK = "#31333f"; // text and lines, Streamlit's own
export const MASKED_RGB = [0xe4, 0xe4, 0xe4]; // a masked cell: no weight at all, drawn apart from a small weight
export const MASKED_INK = "#6b6b6b"; // the stroke across a masked cell: 3:1 and more against its grey's neighbours
export const FONT = '"Source Sans Pro", "Source Sans 3", sans-serif';

/** A new element (`svg:` before the tag for an SVG one) with these attributes and, when given, this text. */
export function el(tag, attrs = {}, text) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG_NS, tag.slice(4)) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Tell the page that a person changed a heatmap's view (a presenter's page sends it to the class: classroom.mjs). */
export function announce(root, view) {
  root.dispatchEvent(new CustomEvent("attnviz:view", { bubbles: true, detail: { ...view } }));
}

/** "query" → "queries", "key" → "keys", "query piece" → "query pieces". */
export function plural(word) {
  return /[^aeiou]y$/.test(word) ? `${word.slice(0, -1)}ies` : `${word}s`;
}

/** A rectangle's outline that shows on every colour of a scale: a dark line under a lighter one (`colour`), dashed
 * where `dash` is given (the keyboard's cell). */
export function outline(svg, box, colour, cls, dash) {
  svg.appendChild(el("svg:rect", { ...box, fill: "none", stroke: "#000000", "stroke-width": 4, class: `${cls}-under` }));
  const line = el("svg:rect", { ...box, fill: "none", stroke: colour, "stroke-width": 2, class: cls });
  if (dash) line.setAttribute("stroke-dasharray", dash);
  svg.appendChild(line);
}

/** The drawn column of row i's largest allowed weight (flat weights, m columns a row). */
export function strongest(weights, allowed, i, m) {
  let best = 0;
  for (let j = 1; j < m; j++) if (allowed[i * m + j] && (!allowed[i * m + best] || weights[i * m + j] > weights[i * m + best])) best = j;
  return best;
}

/** 1st, 2nd, 3rd, 4th, …, 11th, 12th, 13th, 21st. */
export function ordinal(k) {
  const tens = k % 100, units = k % 10;
  const suffix = tens >= 11 && tens <= 13 ? "th" : ({ 1: "st", 2: "nd", 3: "rd" }[units] || "th");
  return `${k}${suffix}`;
}

/** Cell (i, j) of a heatmap's drawn weights in words: its query, its key, its weight and its rank among the row's
 * allowed keys ("query happy, key dog, weight 0.17, 2nd of 16"), or that it is masked. */
export function cellWords(data, result, i, j) {
  const m = data.m, k = i * m + j;
  const [rowAxis, colAxis] = data.axes || ["query", "key"];
  const where = `${rowAxis} ${data.rows[i]}, ${colAxis} ${data.cols[j]}`;
  if (!result.allowed[k]) return `${where}, masked: weight 0`;
  let rank = 1, of = 0;
  for (let c = 0; c < m; c++) {
    if (!result.allowed[i * m + c]) continue;
    of += 1;
    if (result.weights[i * m + c] > result.weights[k]) rank += 1;
  }
  return `${where}, weight ${formatG(result.weights[k], 3)}, ${ordinal(rank)} of ${of}`;
}

export const ROWS_NAMED = 12; // a figure's description names each row's strongest column up to this many rows

/** What a heatmap's drawn weights show, for its description (attnviz.describe says the same of plotly's charts): the
 * largest cell and where it is, then each row's strongest allowed column and its weight. */
export function describeWeights(data, result) {
  const { n, m } = data;
  const [rowAxis, colAxis] = data.axes || ["query", "key"];
  let best = -1;
  for (let k = 0; k < n * m; k++) if (result.allowed[k] && (best < 0 || result.weights[k] > result.weights[best])) best = k;
  if (best < 0) return "Every cell is masked.";
  const said = [`The largest, ${formatG(result.weights[best], 3)}, is ${rowAxis} ${data.rows[Math.floor(best / m)]}, ${colAxis} ${data.cols[best % m]}.`];
  const rows = [];
  for (let i = 0; i < Math.min(n, ROWS_NAMED); i++) {
    const j = strongest(result.weights, result.allowed, i, m);
    if (result.allowed[i * m + j]) rows.push(`${data.rows[i]} → ${data.cols[j]} ${formatG(result.weights[i * m + j], 3)}`);
  }
  const more = n > ROWS_NAMED ? `; and ${n - ROWS_NAMED} more ${plural(rowAxis)}` : "";
  said.push(`Each ${rowAxis}'s strongest ${colAxis}: ${rows.join("; ")}${more}.`);
  return said.join(" ");
}

/** The names of `view` that `current` has, with a query kept below `rows`: what a followed view may change. */
export function followed(current, view, rows) {
  const taken = {};
  for (const [name, value] of Object.entries(view || {})) if (name in current) taken[name] = value;
  if ("query" in taken) taken.query = Math.min(Math.max(Number(taken.query) || 0, 0), rows - 1);
  return taken;
}

/** The bytes of Python's base64: the browser's own decoder where it has one (Chromium 140 and later), else atob's
 * characters copied in a plain loop (an atlas's megabyte took 46 ms through Uint8Array.from with a mapping function). */
export function bytesOf(base64) {
  if (Uint8Array.fromBase64) return Uint8Array.fromBase64(base64);
  const text = atob(base64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

/** The float32 numbers of Python's base64 (numpy's float32 bytes, little-endian). */
export function float32Of(base64) {
  return new Float32Array(bytesOf(base64).buffer);
}

/** A label cut to `chars` characters (whole code points), "…" marking the cut. */
export function short(label, chars) {
  return [...label].length <= chars ? label : [...label].slice(0, chars - 1).join("") + "…";
}

/** Size `canvas` for width × height CSS px at the screen's pixel ratio (only where that changed: a resize clears it)
 * and `figure` to its height; returns its context, scaled to CSS px and cleared, with no smoothing of drawn images. */
export function canvasContext(canvas, figure, width, height) {
  const scale = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(width * scale) || canvas.height !== Math.round(height * scale)) {
    canvas.width = Math.round(width * scale);
    canvas.height = Math.round(height * scale);
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    figure.style.height = `${height}px`;
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(scale, 0, 0, scale, 0, 0);
  ctx.clearRect(0, 0, width, height);
  ctx.imageSmoothingEnabled = false;
  return ctx;
}

/** A vertical colour bar of palette `stops` ([[position, [r, g, b]], ...]) at x from top, `height` px tall, its
 * highest value's text `high` at its top and `low` at its foot. */
export function colourBar(ctx, stops, x, top, height, fontPx, high, low = "0") {
  const gradient = ctx.createLinearGradient(0, top + height, 0, top);
  for (const [position, rgb] of stops) gradient.addColorStop(position, `rgb(${rgb.join(",")})`);
  ctx.fillStyle = gradient;
  ctx.fillRect(x, top, 12, height);
  ctx.fillStyle = INK;
  ctx.textAlign = "left";
  ctx.textBaseline = "middle";
  ctx.font = `${Math.max(10, fontPx - 2)}px ${FONT}`;
  ctx.fillText(high, x + 16, top + 4);
  ctx.fillText(low, x + 16, top + height - 4);
}

/** Mount `Figure` once into the component's parentElement (in a host div of class `hostClass`), then give it each
 * new data: the figures' one way of being mounted by any host. */
export function mountOnce(parentElement, hostClass, Figure) {
  let host = parentElement.querySelector(`.${hostClass}`);
  if (!host) {
    host = parentElement.appendChild(el("div", { class: hostClass }));
    host.view = new Figure(host.appendChild(el("div")));
  }
  return host.view;
}
