// What every figure draws with: elements made without parsing HTML, bytes from Python's base64, a canvas at the
// screen's pixel ratio, and the colours the figures share. User text is only ever set as textContent.

export const SVG_NS = "http://www.w3.org/2000/svg";
export const HIGHLIGHT = "#d55e00"; // the chosen query, head or piece
export const INK = "#31333f"; // text and lines, Streamlit's own
export const MASKED_RGB = [0xe4, 0xe4, 0xe4]; // a masked cell: no weight at all, drawn apart from a small weight
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
