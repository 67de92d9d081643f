// The interactive heatmap's shared constants and helpers, and its drawing (a part that the Heatmap, heatmap.mjs,
// owns): the layout of the figure (margins measured for the labels), the cells as one image, the colour bar,
// the overlay's labels, titles and outlines as SVG text, the hover, and what is drawn for tests (expose).

import { FONT, HIGHLIGHT, MASKED_INK, MASKED_RGB, canvasContext, describeWeights, el, outline, plural } from "./draw.mjs";
import { colourBarTitle, formatG, maskRule, paletteColour } from "./weights.mjs";

export const SYNC_MS = 400;
export const PALETTE_LEVELS = 1023; // colours per palette: finer than a screen's 8 bits a channel can show
export const SVG_CELLS = 128 * 128; // above this many cells an SVG download carries the cells as an image
export const MASK_NAMES = { none: "none", causal: "causal", keys: "hide keys" }; // a page may send its own (data.masks)
export const SCALE_NAMES = { row: "per row", max: "0 → largest shown", absolute: "0 → 1", sqrt: "√ stretch" };
export const OVER_NAMES = { mean: "average", max: "maximum" }; // how several heads combine into the one matrix drawn
export const CONTROLS = ["temp", "hard", "mask", "over", "scale", "palette"]; // a heatmap's toolbar, all of it
export const SHARED = ["scale", "palette", "query"]; // Compare: what A, B and B − A share

const ALL_LABELS = 20; // figures.ALL_LABELS: up to this many tokens every label is drawn
export const TARGET_PX = 24; // WCAG 2.5.8: a key's label that hides it is a target at least this wide and tall

/** The positions whose labels are drawn: all up to ALL_LABELS, else every k-th, as many as `px` holds at `pitch` px
 * each (figures._axis), and always `keep` (the chosen query), with the labels too near it left out. */
function thinned(count, px, pitch, keep) {
  if (count <= ALL_LABELS) return Array.from({ length: count }, (_, i) => i);
  const step = Math.max(1, Math.ceil(count / Math.max(1, Math.floor(px / pitch))));
  const shown = [];
  for (let i = 0; i < count; i += step) if (keep === undefined || Math.abs(i - keep) * (px / count) >= pitch) shown.push(i);
  if (keep !== undefined) shown.push(keep);
  return shown.sort((a, b) => a - b);
}

/** The labels' size along an axis: `font`, or smaller where up to ALL_LABELS labels are short of room, never below `min`. */
function labelFontPx(count, px, pitch, font, min) {
  if (count > ALL_LABELS || count * pitch <= px) return font;
  return Math.max(min, Math.floor((font * px) / (count * pitch)));
}

export class Drawing {
  /** A part of `heatmap` (heatmap.mjs), which keeps the state and hands each call on to its part. */
  constructor(heatmap) {
    this.heatmap = heatmap;
  }

  /** Margins sized for the labels (measured), the plot area, and the label positions; false if unchanged. */
  layout() {
    const d = this.heatmap.data;
    const room = Math.max(320, Math.floor(this.heatmap.root.clientWidth || 700));
    const font = `${d.font_px}px ${FONT}`;
    const ctx = this.heatmap.canvas.getContext("2d");
    ctx.font = font;
    const widest = (count, label) => Math.max(0, ...Array.from({ length: count }, (_, i) => ctx.measureText(label(i)).width));
    const titlePx = Math.round(d.font_px * 1.4);
    const left = Math.ceil(widest(d.n, (i) => this.heatmap.rowLabel(i)) + titlePx + 16);
    const bottom = Math.ceil(widest(d.m, (j) => this.heatmap.colLabel(j)) + titlePx + 16);
    const right = Math.ceil(14 + 20 + ctx.measureText("0.000").width + titlePx + 12);
    const top = d.title || d.heads > 1 ? Math.round(d.font_px * 2.6) : 12;
    // Under "hide keys" each key's label is a button: its column is widened to a target's size, and the figure pans.
    this.heatmap.hidingLaidOut = this.hiding();
    const width = this.heatmap.hidingLaidOut ? Math.max(room, left + right + TARGET_PX * d.m) : room;
    const plot = { x: left, y: top, w: Math.max(40, width - left - right), h: Math.max(40, d.height - top - bottom) };
    const key = JSON.stringify([width, plot, d.version]);
    if (key === this.heatmap.laidOut) return false;
    this.heatmap.laidOut = key;
    Object.assign(this.heatmap, { width, font, plot });
    this.heatmap.figure.classList.toggle("av-pans", width > room);
    this.heatmap.tip.style.display = "none"; // the cell under a still pointer has moved
    this.heatmap.colLabels = thinned(d.m, plot.w, d.label_px);
    const fonts = [labelFontPx(d.n, plot.h, d.label_px, d.font_px, d.min_font_px), labelFontPx(d.m, plot.w, d.label_px, d.font_px, d.min_font_px)];
    this.heatmap.labelFonts = fonts.map((px) => (px < d.font_px ? `${px}px` : ""));
    return true;
  }

  /** Whether the view's mask makes each key's label a button that hides the key. */
  hiding() {
    const v = this.heatmap.view;
    return Boolean(v && v.mask && maskRule(v.mask).hides);
  }

  draw() {
    if (this.hiding() !== this.heatmap.hidingLaidOut) this.layout();
    const d = this.heatmap.data;
    const v = this.heatmap.view;
    if (this.heatmap.result.overflow.length && !v.hard) {
      this.heatmap.message.textContent = d.overflow_message;
      this.heatmap.figure.style.display = "none";
      this.heatmap.inspector.replaceChildren();
      this.heatmap.expose();
      return;
    }
    this.heatmap.figure.style.display = "";
    this.heatmap.message.textContent = this.heatmap.result.blocked.length
      ? `${this.heatmap.result.blocked.length} query row(s) have every key masked, so their weights and output are all zero (no NaN).`
      : "";
    this.heatmap.colours = this.heatmap.colourise();
    this.heatmap.drawCells();
    this.heatmap.drawOverlay();
    this.heatmap.drawInspector();
    const combined = d.heads > 1 ? `, ${OVER_NAMES[this.heatmap.over()]} over ${d.heads} heads` : "";
    const count = (k, one, many) => `${k} ${k === 1 ? one : many}`;
    const [rowAxis, colAxis] = d.axes || ["query", "key"];
    const rowCount = count(d.n, rowAxis, plural(rowAxis)), colCount = count(d.m, colAxis, plural(colAxis));
    const chosen = this.heatmap.row() >= 0 && this.heatmap.row() < d.n ? ` Chosen ${rowAxis}: ${d.rows[this.heatmap.row()]} (position ${v.query}).` : "";
    this.heatmap.figure.setAttribute("aria-label", `${this.heatmap.what()}${combined}, ${rowCount} × ${colCount}.${chosen} ` +
      `Up and down choose the ${rowAxis}, left and right read its cells, Enter chooses the cell.` +
      (maskRule(v.mask).hides ? " Tab to a key's label and press Enter to hide or show it." : ""));
    if (this.heatmap.description) this.heatmap.description.textContent = describeWeights(d, this.heatmap.result);
    this.heatmap.expose();
  }

  /** What the cells are, for the figure's accessible name. */
  what() {
    return (this.heatmap.data.side ? `${this.heatmap.data.side}: ` : "") + "Attention weights";
  }

  drawCells() {
    const { plot } = this.heatmap;
    const ctx = canvasContext(this.heatmap.canvas, this.heatmap.figure, this.heatmap.width, this.heatmap.data.height);
    ctx.drawImage(this.heatmap.cellImage(), plot.x, plot.y, plot.w, plot.h);
    this.hatchMasked(ctx);
    this.heatmap.drawColourBar(ctx);
  }

  /** A masked cell is told by a diagonal stroke, not by its grey alone (its grey and a palette's light end are
   * alike in lightness); left out where cells are under 4 px, where a stroke would be a smudge. */
  hatchMasked(ctx) {
    const { plot } = this.heatmap;
    const { n, m } = this.heatmap.data;
    const allowed = this.heatmap.result.allowed;
    const w = plot.w / m, h = plot.h / n;
    if (w < 4 || h < 4) return;
    ctx.beginPath();
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < m; j++) {
        if (allowed[i * m + j]) continue;
        ctx.moveTo(plot.x + j * w + 1, plot.y + (i + 1) * h - 1);
        ctx.lineTo(plot.x + (j + 1) * w - 1, plot.y + i * h + 1);
      }
    }
    ctx.strokeStyle = MASKED_INK;
    ctx.lineWidth = 1;
    ctx.stroke();
  }

  /** The n×m cells as an image, one pixel per cell; drawn scaled, without smoothing. */
  cellImage() {
    const { n, m } = this.heatmap.data;
    const table = this.heatmap.paletteTable();
    const { shown, zmax } = this.heatmap.colours;
    const allowed = this.heatmap.result.allowed;
    if (!this.heatmap.image || this.heatmap.image.width !== m || this.heatmap.image.height !== n) this.heatmap.image = new ImageData(m, n);
    const pixels = this.heatmap.image.data;
    for (let k = 0; k < n * m; k++) {
      const c = allowed[k] ? 3 * Math.round(Math.min(1, Math.max(0, shown[k] / zmax)) * PALETTE_LEVELS) : -1;
      pixels[4 * k] = c < 0 ? MASKED_RGB[0] : table[c];
      pixels[4 * k + 1] = c < 0 ? MASKED_RGB[1] : table[c + 1];
      pixels[4 * k + 2] = c < 0 ? MASKED_RGB[2] : table[c + 2];
      pixels[4 * k + 3] = 255;
    }
    const cells = this.heatmap.cells || (this.heatmap.cells = document.createElement("canvas"));
    cells.width = m;
    cells.height = n;
    cells.getContext("2d").putImageData(this.heatmap.image, 0, 0);
    return cells;
  }

  /** The palette's colours at PALETTE_LEVELS + 1 evenly spaced points, as r, g, b bytes: looked up per cell. */
  paletteTable() {
    const name = this.heatmap.view.palette;
    if (this.heatmap.table && this.heatmap.tableName === name) return this.heatmap.table;
    const stops = this.heatmap.data.palettes[name];
    this.heatmap.table = new Uint8Array(3 * (PALETTE_LEVELS + 1));
    for (let i = 0; i <= PALETTE_LEVELS; i++) this.heatmap.table.set(paletteColour(stops, i / PALETTE_LEVELS), 3 * i);
    this.heatmap.tableName = name;
    return this.heatmap.table;
  }

  drawColourBar(ctx) {
    const { plot } = this.heatmap;
    const stops = this.heatmap.data.palettes[this.heatmap.view.palette];
    const x = plot.x + plot.w + 12;
    const gradient = ctx.createLinearGradient(0, plot.y + plot.h, 0, plot.y);
    for (const [position, rgb] of stops) gradient.addColorStop(position, `rgb(${rgb.join(",")})`);
    ctx.fillStyle = gradient;
    ctx.fillRect(x, plot.y, 14, plot.h);
  }

  /** Axis labels, titles, the colour bar's ticks and title, and the chosen query's outline, as SVG text. */
  drawOverlay() {
    const d = this.heatmap.data;
    const v = this.heatmap.view;
    const { plot } = this.heatmap;
    const svg = this.heatmap.svg;
    svg.replaceChildren();
    svg.setAttribute("width", this.heatmap.width);
    svg.setAttribute("height", d.height);
    svg.style.font = this.heatmap.font;
    const cellH = plot.h / d.n;
    const cellW = plot.w / d.m;
    if (this.heatmap.title()) svg.appendChild(el("svg:text", { x: plot.x, y: d.font_px * 1.6, class: "av-title" }, this.heatmap.title()));
    this.heatmap.rowLabels = thinned(d.n, plot.h, d.label_px, this.heatmap.row());
    const [rowFont, colFont] = this.heatmap.labelFonts;
    for (const i of this.heatmap.rowLabels) {
      const label = el("svg:text", { x: plot.x - 6, y: plot.y + (i + 0.5) * cellH, "text-anchor": "end",
        "dominant-baseline": "central", class: "av-row" + (i === this.heatmap.row() ? " av-chosen" : ""), "data-row": i },
      this.heatmap.rowLabel(i));
      if (rowFont) label.style.fontSize = rowFont;
      svg.appendChild(label);
    }
    const hiding = maskRule(v.mask).hides;
    const hidden = new Set(hiding ? v.hide : []);
    for (const j of this.heatmap.colLabels) {
      const x = plot.x + (j + 0.5) * cellW;
      const y = plot.y + plot.h + 6;
      const label = svg.appendChild(el("svg:text", { x, y, transform: `rotate(-90 ${x} ${y})`, "text-anchor": "end",
        "dominant-baseline": "central", class: "av-col" + (hidden.has(d.col_start + j) ? " av-hidden" : ""), "data-col": j },
      this.heatmap.colLabel(j)));
      if (colFont) label.style.fontSize = colFont;
      if (hiding) {  // a button: a click (on its column's band below the plot) or Enter or Space hides the key or shows it again
        const band = { x: plot.x + j * cellW, y: plot.y + plot.h, width: cellW, height: Math.max(TARGET_PX, d.height - plot.y - plot.h - d.font_px * 1.4 - 8) };
        // (focusable by the pointer only, so that a click does not focus the figure, whose redraw would take the band away)
        svg.insertBefore(el("svg:rect", { ...band, class: "av-col-target", "data-col": j, fill: "transparent", tabindex: "-1", "aria-hidden": "true" }), label);
        label.setAttribute("tabindex", "0");
        label.setAttribute("role", "button");
        label.setAttribute("aria-pressed", String(hidden.has(d.col_start + j)));
        label.setAttribute("aria-label", `hide key #${d.col_start + j} ${d.cols[j]}`);
      }
    }
    if (this.heatmap.focusCol !== undefined) {  // the label that had focus before this redraw keeps it
      const again = svg.querySelector(`.av-col[data-col="${this.heatmap.focusCol}"]`);
      this.heatmap.focusCol = undefined;
      if (again) again.focus();
    }
    const titlePx = d.font_px * 1.4;
    const [rowAxis, colAxis] = d.axes || ["query", "key"];
    svg.appendChild(el("svg:text", { x: plot.x + plot.w / 2, y: d.height - 6, "text-anchor": "middle", class: "av-axis" }, colAxis));
    const qx = 4 + titlePx / 2;
    const qy = plot.y + plot.h / 2;
    svg.appendChild(el("svg:text", { x: qx, y: qy, transform: `rotate(-90 ${qx} ${qy})`, "text-anchor": "middle",
      "dominant-baseline": "central", class: "av-axis" }, rowAxis));
    if (this.heatmap.row() >= 0 && this.heatmap.row() < d.n) {  // a matrix of final values may have no chosen row
      outline(svg, { x: plot.x - 1, y: plot.y + this.heatmap.row() * cellH - 1, width: plot.w + 2, height: cellH + 2 }, HIGHLIGHT, "av-outline");
    }
    const column = v.key - d.col_start; // the chosen cell, whose score the page takes apart
    if (Number.isInteger(v.key) && column >= 0 && column < d.m) {
      outline(svg, { x: plot.x + column * cellW, y: plot.y + this.heatmap.row() * cellH, width: cellW, height: cellH }, "#ffffff", "av-cell-outline");
    }
    if (document.activeElement === this.heatmap.figure) { // the keyboard's cell, while the figure has focus
      const [i, j] = this.heatmap.cursorCell();
      outline(svg, { x: plot.x + j * cellW, y: plot.y + i * cellH, width: cellW, height: cellH }, "#ffffff", "av-cursor", "4 2");
    }
    this.heatmap.drawBarTicks(svg);
  }

  drawBarTicks(svg) {
    const { plot } = this.heatmap;
    const d = this.heatmap.data;
    const { top, zmax } = this.heatmap.colours;
    const scale = this.heatmap.scale();
    const x = plot.x + plot.w + 12 + 14 + 4;
    const ticks = scale === "sqrt"
      ? [0, 0.01, 0.05, 0.1, 0.2, 0.5, 1].filter((t) => t <= top).concat([top]).map((t) => [Math.sqrt(t / top), t])
      : [0, 0.25, 0.5, 0.75, 1].map((f) => [f, f * zmax]);
    for (const [position, value] of ticks) {
      svg.appendChild(el("svg:text", { x, y: plot.y + plot.h * (1 - position), "dominant-baseline": "central",
        class: "av-tick" }, formatG(value, 3)));
    }
    const tx = this.heatmap.width - 6;
    const ty = plot.y + plot.h / 2;
    svg.appendChild(el("svg:text", { x: tx, y: ty, transform: `rotate(-90 ${tx} ${ty})`, "text-anchor": "middle",
      class: "av-bar-title" }, colourBarTitle(scale, top, d.what || "weight")));
  }

  /** What is drawn, for tests and benchmarks: read from the root element's `attnviz` property. */
  expose() {
    const d = this.heatmap.data;
    const { weights, allowed, overflow } = this.heatmap.result;
    const rows = (flat) => Array.from({ length: d.n }, (_, i) => Array.from(flat.subarray(i * d.m, (i + 1) * d.m)));
    this.heatmap.root.attnviz = {
      view: { ...this.heatmap.view }, rows: d.rows, cols: d.cols, overflow: overflow.length > 0 && !this.heatmap.view.hard,
      weights: () => rows(weights), shown: () => (this.heatmap.colours ? rows(this.heatmap.colours.shown) : []), allowed: () => rows(allowed),
      zmax: this.heatmap.colours ? this.heatmap.colours.zmax : null,
      scores: () => rows(this.heatmap.drawnScores), full: () => Array.from({ length: d.n }, (_, i) => Array.from(
        this.heatmap.full.weights.subarray(i * this.heatmap.keyCount(), (i + 1) * this.heatmap.keyCount()))), timings: this.heatmap.timings, drawn: (this.heatmap.drawn = (this.heatmap.drawn || 0) + 1),
      rowLabels: this.heatmap.rowLabels, colLabels: this.heatmap.colLabels,
      cellCentre: (i, j) => {
        const box = this.heatmap.figure.getBoundingClientRect();
        return [box.left - this.heatmap.figure.scrollLeft + this.heatmap.plot.x + ((j + 0.5) * this.heatmap.plot.w) / d.m, box.top + this.heatmap.plot.y + ((i + 0.5) * this.heatmap.plot.h) / d.n];
      },
    };
  }

  cellAt(event) {
    const box = this.heatmap.figure.getBoundingClientRect();
    const { plot } = this.heatmap;
    const x = event.clientX - box.left + this.heatmap.figure.scrollLeft - plot.x; // a figure wider than its column pans
    const y = event.clientY - box.top - plot.y;
    if (x < 0 || y < 0 || x >= plot.w || y >= plot.h) return null;
    return [Math.floor((y / plot.h) * this.heatmap.data.n), Math.floor((x / plot.w) * this.heatmap.data.m)];
  }

  hover(event) {
    const cell = this.heatmap.cellAt(event);
    if (!cell) return (this.heatmap.tip.style.display = "none");
    const [i, j] = cell;
    const d = this.heatmap.data;
    const k = i * d.m + j;
    const lines = [`query #${d.row_start + i} ${d.rows[i]}`, `key #${d.col_start + j} ${d.cols[j]}`];
    lines.push(...this.heatmap.hoverLines(k), "click: inspect this query");
    this.heatmap.tip.replaceChildren(...lines.map((line) => el("div", {}, line)));
    const box = this.heatmap.figure.getBoundingClientRect();
    this.heatmap.tip.style.display = "block";
    this.heatmap.tip.style.left = `${Math.min(event.clientX - box.left + this.heatmap.figure.scrollLeft + 12, this.heatmap.width - 220)}px`;
    this.heatmap.tip.style.top = `${event.clientY - box.top + 12}px`;
  }

  /** The hover's numbers for cell k (flat index): the weight and the score, or each head's weight. */
  hoverLines(k) {
    if (!this.heatmap.result.allowed[k]) return ["masked: weight 0"];
    if (this.heatmap.data.heads === 1) return [`weight: ${formatG(this.heatmap.result.weights[k], 4)}`, `score: ${formatG(this.heatmap.drawnScores[k], 4)}`];
    return [`${OVER_NAMES[this.heatmap.over()]} over heads: ${formatG(this.heatmap.result.weights[k], 4)}`,
      "per head: " + this.heatmap.result.heads.map((w) => formatG(w[k], 3)).join(" · ")];
  }
}
