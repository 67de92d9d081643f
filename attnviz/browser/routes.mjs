// The information-flow routes (LM-TT's graph, Ferrando & Voita 2024): pieces along the bottom, each layer a row above,
// an edge from piece j before a layer to piece i after it where j's share of i's update (attnviz.effects.Contributions)
// passes the threshold. The routes are the edges reachable from the last piece at the top. Python sends every edge
// above a floor once (figures.routes_data); the threshold slider redraws here, with no round trip, and tells Python its
// value only when released (for the link). A click on an edge opens the head that carries most of it.

import { HIGHLIGHT, INK, canvasContext, el, mountOnce } from "./draw.mjs";

const ROUTE_HEAD = "#0072b2";
const ROUTE_RESIDUAL = "#999999";

/** The edges on the routes from piece `start` after the last layer down to the input, with share ≥ threshold.
 * edges: [layer, source, target, share, head] (head -1: mostly the residual stream). */
export function reachable(edges, layers, start, threshold) {
  const byLayer = Array.from({ length: layers }, () => []);
  for (const e of edges) if (e[3] >= threshold) byLayer[e[0]].push(e);
  let reached = new Set([start]);
  const kept = [];
  for (let layer = layers - 1; layer >= 0; layer--) {
    const below = new Set();
    for (const e of byLayer[layer]) {
      if (!reached.has(e[2])) continue;
      kept.push(e);
      below.add(e[1]);
    }
    reached = below;
  }
  return kept;
}

export class Routes {
  constructor(root) {
    this.root = root;
    root.classList.add("av-routes");
    this.heading = root.appendChild(el("div", { class: "av-atlas-title" }));
    const controls = root.appendChild(el("label", { class: "av-routes-controls" }));
    controls.appendChild(document.createTextNode("Threshold "));
    // The slider moves through the data's own stops (figures.route_steps, a log scale up to the largest share between
    // two pieces): each step changes what is drawn.
    this.slider = controls.appendChild(el("input", { type: "range", min: "0", max: "1", step: "1", "aria-label": "threshold" }));
    this.said = controls.appendChild(el("span", { class: "av-routes-said" }));
    this.figure = root.appendChild(el("div", { class: "av-atlas-figure" }));
    this.canvas = this.figure.appendChild(el("canvas"));
    this.tip = this.figure.appendChild(el("div", { class: "av-tip", role: "tooltip" }));
    this.slider.addEventListener("input", () => this.setThreshold(this.stops()[Number(this.slider.value)], false));
    this.slider.addEventListener("change", () => this.setThreshold(this.stops()[Number(this.slider.value)], true));
    this.figure.addEventListener("mousemove", (e) => this.hover(e));
    this.figure.addEventListener("mouseleave", () => (this.tip.style.display = "none"));
    this.figure.addEventListener("click", (e) => this.click(e));
    this.resize = new ResizeObserver(() => this.data && this.draw());
    this.resize.observe(root);
  }

  load(data, setStateValue, setTriggerValue) {
    this.setStateValue = setStateValue;
    this.setTriggerValue = setTriggerValue;
    const fresh = !this.data || this.data.version !== data.version;
    this.data = data;
    this.root.style.fontSize = `${data.font_px + 2}px`;
    this.heading.textContent = data.title;
    if (fresh || this.threshold === undefined) this.threshold = data.threshold;
    this.slider.max = String(this.stops().length - 1);
    this.slider.value = String(this.stopOf(this.threshold));
    this.draw();
  }

  /** The slider's thresholds, lowest first. */
  stops() {
    return this.data.steps && this.data.steps.length ? this.data.steps : [this.data.threshold];
  }

  /** The stop nearest `threshold` on the log scale. */
  stopOf(threshold) {
    const stops = this.stops(), at = Math.log(threshold);
    let best = 0;
    stops.forEach((t, i) => { if (Math.abs(Math.log(t) - at) < Math.abs(Math.log(stops[best]) - at)) best = i; });
    return best;
  }

  setThreshold(value, release) {
    this.threshold = value;
    this.draw();
    if (release && this.setStateValue) this.setStateValue("threshold", value);
  }

  draw() {
    const d = this.data;
    this.kept = reachable(d.edges, d.layers, d.start, this.threshold);
    const width = Math.max(320, Math.floor(this.root.clientWidth || 700));
    const left = Math.ceil(d.font_px * 4.5), bottom = Math.ceil(d.font_px * 5), top = 8;
    const row = Math.max(8, Math.min(26, Math.floor(560 / Math.max(1, d.layers))));
    const height = top + row * d.layers + bottom;
    const column = (width - left - 12) / Math.max(1, d.n);
    const x = (j) => left + column * (j + 0.5);
    const y = (level) => top + row * (d.layers - level); // level 0: the input pieces, d.layers: after the last layer
    const ctx = canvasContext(this.canvas, this.figure, width, height);
    ctx.font = `${d.font_px}px sans-serif`;
    ctx.fillStyle = INK;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    const every = Math.max(1, Math.ceil(d.layers / 15));
    for (let level = 0; level <= d.layers; level += every) ctx.fillText(level === 0 ? "input" : `L${level}`, left - 6, y(level));
    this.segments = [];
    for (const e of this.kept) {
      const [layer, source, target, share, head] = e;
      const chosen = head === d.chosen[1] && layer === d.chosen[0];
      ctx.strokeStyle = chosen ? HIGHLIGHT : head < 0 ? ROUTE_RESIDUAL : ROUTE_HEAD;
      ctx.lineWidth = 0.5 + 5 * share;
      ctx.beginPath();
      ctx.moveTo(x(source), y(layer));
      ctx.lineTo(x(target), y(layer + 1));
      ctx.stroke();
      this.segments.push({ e, x0: x(source), y0: y(layer), x1: x(target), y1: y(layer + 1) });
    }
    ctx.fillStyle = HIGHLIGHT;
    ctx.beginPath();
    ctx.arc(x(d.start), y(d.layers), 4, 0, 2 * Math.PI);
    ctx.fill();
    ctx.save();
    ctx.fillStyle = INK;
    ctx.textAlign = "right";
    for (let j = 0; j < d.n; j++) {
      ctx.save();
      ctx.translate(x(j), y(0) + 6);
      ctx.rotate(-Math.PI / 3);
      ctx.fillText(d.tokens[j], 0, 0);
      ctx.restore();
    }
    ctx.restore();
    const pieces = new Set(this.kept.filter((e) => e[0] === 0).map((e) => e[1]));
    this.said.textContent = ` ${this.threshold < 0.1 ? this.threshold.toFixed(3) : this.threshold.toFixed(2)}: ${this.kept.length} edges, reaching ${pieces.size} of ${d.n} input pieces`;
    this.root.attnvizRoutes = { threshold: this.threshold, edges: this.kept.length, reached: [...pieces].sort((a, b) => a - b) };
  }

  nearest(event) {
    const box = this.canvas.getBoundingClientRect();
    const px = event.clientX - box.left, py = event.clientY - box.top;
    let best = null, bestDistance = 5;
    for (const s of this.segments || []) {
      const dx = s.x1 - s.x0, dy = s.y1 - s.y0;
      const t = Math.max(0, Math.min(1, ((px - s.x0) * dx + (py - s.y0) * dy) / (dx * dx + dy * dy || 1)));
      const distance = Math.hypot(px - (s.x0 + t * dx), py - (s.y0 + t * dy));
      if (distance < bestDistance) [best, bestDistance] = [s, distance];
    }
    return best;
  }

  hover(event) {
    const s = this.nearest(event);
    if (!s) {
      this.tip.style.display = "none";
      return;
    }
    const [layer, source, target, share, head] = s.e;
    const t = this.data.tokens;
    const via = head < 0 ? "mostly the residual stream" : `mostly head ${head + this.data.base} (a click opens it)`;
    this.tip.textContent = `layer ${layer + this.data.base}: “${t[target]}” (#${target}) ← “${t[source]}” (#${source}), share ${share.toFixed(3)}; ${via}`;
    this.tip.style.display = "block";
    const box = this.figure.getBoundingClientRect();
    this.tip.style.left = `${event.clientX - box.left + 12}px`;
    this.tip.style.top = `${event.clientY - box.top + 12}px`;
  }

  click(event) {
    const s = this.nearest(event);
    if (s && s.e[4] >= 0 && this.setTriggerValue) this.setTriggerValue("head", [s.e[0], s.e[4]]);
  }
}

export function mountRoutes({ data, parentElement, setStateValue, setTriggerValue }) {
  mountOnce(parentElement, "av-routes-host", Routes).load(data, setStateValue, setTriggerValue);
}
