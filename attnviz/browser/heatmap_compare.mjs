// The interactive heatmap's Compare A | B: two Heatmaps side by side on one colour scale, and B − A (Difference).

import { announce, el, followed } from "./draw.mjs";
import { Heatmap } from "./heatmap.mjs";
import { MASK_NAMES, SHARED, SYNC_MS } from "./heatmap_draw.mjs";
import { difference, formatG, topWeight } from "./weights.mjs";

/** B − A of a Compare's two sides, cell by cell, on a diverging scale centred on 0; no controls, no inspector. */
export class Difference extends Heatmap {
  constructor(root, owner) {
    super(root, { owner, controls: [], inspector: false });
  }

  /** `data`: the labels, sizes and layout of side A, the diverging palette's stops, and the shared view's query. */
  load(data) {
    const fresh = !this.data || this.data.version !== data.version;
    this.data = data;
    this.root.style.fontSize = `${data.font_px + 2}px`;
    this.view = { ...data.view, query: this.owner.sides[0].view.query };
    if (fresh) this.buildToolbar();
    this.layout();
  }

  recompute() {
    const [a, b] = this.owner.sides.map((side) => side.result);
    const { difference: weights, extent } = difference(a.weights, b.weights);
    const stuck = [...a.overflow, ...b.overflow]; // a side with no weights has no difference either
    this.result = { weights, allowed: new Uint8Array(weights.length).fill(1), blocked: [], overflow: stuck, heads: [weights],
      sides: [a.weights, b.weights] };
    this.extent = extent;
    this.drawnScores = weights;
  }

  scale() {
    return "absolute";
  }

  /** −extent … extent onto 0 … 1 of the diverging palette: 0.5 (its middle, white) where A and B agree. */
  colourise() {
    const { weights } = this.result;
    const shown = new Float64Array(weights.length); // (n, m)
    for (let k = 0; k < weights.length; k++) shown[k] = (weights[k] / this.extent + 1) / 2;
    return { shown, top: this.extent, zmax: 1 };
  }

  what() {
    return "B − A, the difference of the two sides' weights";
  }

  drawBarTicks(svg) {
    const { plot } = this;
    const x = plot.x + plot.w + 12 + 14 + 4;
    for (const f of [0, 0.25, 0.5, 0.75, 1]) {
      svg.appendChild(el("svg:text", { x, y: plot.y + plot.h * (1 - f), "dominant-baseline": "central", class: "av-tick" },
        formatG((2 * f - 1) * this.extent, 3)));
    }
    const [tx, ty] = [this.width - 6, plot.y + plot.h / 2];
    svg.appendChild(el("svg:text", { x: tx, y: ty, transform: `rotate(-90 ${tx} ${ty})`, "text-anchor": "middle",
      class: "av-bar-title" }, "B − A"));
  }

  hoverLines(k) {
    const [a, b] = this.result.sides;
    return [`A: ${formatG(a[k], 4)}`, `B: ${formatG(b[k], 4)}`, `B − A: ${formatG(this.result.weights[k], 4)}`];
  }
}

/**
 * Compare A | B: two heatmaps side by side on one colour scale (A's toolbar: τ, hard, mask, colour scale, palette;
 * B's: τ, hard, mask) and, where their tokens match, B − A below. Each redraws in the browser; the colour scale,
 * palette and query are shared; Python hears of both sides' views in one message once the person pauses.
 * `compact` (a lesson step): each side's toolbar τ, hard and mask only, short labels and no query bars, so that A
 * and B fit one screen beside the step's text; B − A under A.
 */
export class Compare {
  constructor(host, compact = false) {
    this.host = host;
    this.timer = null;
    this.awaiting = false; // a view this Compare posted is not yet in its data (load)
    this.synced = null;
    this.timings = [];
    host.classList.add("av-compare");
    if (compact) host.classList.add("av-compact");
    const pair = host.appendChild(el("div", { class: "av-pair" }));
    const sideB = { controls: ["temp", "hard", "mask"], masks: { none: MASK_NAMES.none, causal: MASK_NAMES.causal } };
    this.sides = [
      new Heatmap(pair.appendChild(el("div")), { owner: this, ...(compact ? { ...sideB, inspector: false, short: true } : {}) }),
      new Heatmap(pair.appendChild(el("div")), { owner: this, ...sideB, inspector: !compact, short: compact }),
    ];
    this.differenceRoot = (compact ? pair : host).appendChild(el("div"));
    this.difference = null;
    this.resize = new ResizeObserver(() => {
      if (host.clientWidth === this.width) return; // heights change as the toolbars align: only a new width re-wraps them
      this.width = host.clientWidth;
      this.alignToolbars();
    });
    this.resize.observe(host);
    host.attnvizFollow = (view) => this.follow(view);
  }

  /** A class's view (A's names, B's as b_temp, b_hard, b_mask), applied without telling the host. */
  follow(view) {
    if (!this.sides[0].data) return;
    const [a, b] = this.sides;
    const forB = Object.fromEntries(Object.entries(view || {}).filter(([name]) => name.startsWith("b_")).map(([name, v]) => [name.slice(2), v]));
    Object.assign(a.view, followed(a.view, view, a.data.n));
    Object.assign(b.view, followed(b.view, { ...("query" in (view || {}) ? { query: view.query } : {}), ...forB }, b.data.n));
    this.sides.forEach((side) => side.syncToolbar());
    this.redraw();
  }

  load(data, setStateValue) {
    this.setStateValue = setStateValue;
    this.awaiting = Boolean(data.awaiting);
    this.sides.forEach((side, i) => side.load(data.sides[i], setStateValue));
    if (data.difference) {
      if (!this.difference) this.difference = new Difference(this.differenceRoot, this);
      this.difference.load(data.difference);
    } else if (this.difference) {
      this.difference.resize.disconnect();
      this.difference = null;
      this.differenceRoot.replaceChildren();
      this.differenceRoot.className = "";
      delete this.differenceRoot.attnviz;
    }
    if (!this.pending()) this.synced = JSON.stringify(this.state());
    this.redraw();
    this.alignToolbars();
  }

  /** A's toolbar has more controls than B's: the toolbars in A's row get the tallest one's height, so the heatmaps
   * start level (a compact Compare puts B under A where the width holds one). */
  alignToolbars() {
    const panels = [...this.sides, ...(this.difference ? [this.difference] : [])];
    panels.forEach((panel) => (panel.toolbar.style.minHeight = ""));
    const row = this.sides[0].root.offsetTop;
    const bars = panels.filter((panel) => panel.root.offsetTop === row).map((panel) => panel.toolbar);
    const tallest = Math.max(...bars.map((bar) => bar.offsetHeight));
    bars.forEach((bar) => (bar.style.minHeight = `${tallest}px`));
  }

  pending() {
    return this.timer !== null || this.awaiting;
  }

  /** A change on one side: the shared names go to the other side too; everything is redrawn; Python hears after the pause. */
  changed(panel, patch, started) {
    Object.assign(panel.view, patch);
    announce(this.host, this.state());
    const shared = Object.entries(patch).filter(([name]) => SHARED.includes(name));
    for (const side of this.sides) {
      if (side === panel) continue;
      for (const [name, value] of shared) side.view[name] = name === "query" ? Math.min(value, side.data.n - 1) : value;
    }
    this.sides.forEach((side) => side.syncToolbar());
    this.redraw();
    requestAnimationFrame(() => setTimeout(() => this.timings.push(performance.now() - started), 0));
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.sync(), SYNC_MS);
  }

  redraw() {
    for (const side of this.sides) side.recompute();
    this.top = Math.max(...this.sides.map((side) => topWeight(side.result.weights)));
    for (const side of this.sides) side.draw();
    if (this.difference) {
      this.difference.view.query = Math.min(this.sides[0].view.query, this.difference.data.n - 1);
      this.difference.recompute();
      this.difference.draw();
    }
  }

  /** The view as Python names it: A's names, and B's τ, hard and mask as b_temp, b_hard, b_mask. */
  state() {
    const [a, b] = this.sides.map((side) => side.view);
    return { ...a, b_temp: b.temp, b_hard: b.hard, b_mask: b.mask };
  }

  sync() {
    this.timer = null;
    const state = JSON.stringify(this.state());
    if (state === this.synced) return;
    this.synced = state;
    this.setStateValue("view", this.state());
  }
}
