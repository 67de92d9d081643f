// The head atlas: every head of every layer as a thumbnail, drawn on one canvas in the browser (a Streamlit component,
// components v2). Python sends each thumbnail once as bytes (figures.atlas_data: the colour scale's value of each block,
// 0 … 255); a click on a thumbnail tells Python which head to open (a trigger, so one click is one rerun). A model of
// 32 layers × 32 heads is 1,024 thumbnails: a few hundred thousand pixels, put in one image and drawn scaled.

import { FONT, HIGHLIGHT, INK, MASKED_RGB, bytesOf, canvasContext, colourBar, el, mountOnce } from "./draw.mjs";
import { formatG, paletteColour } from "./weights.mjs";

export class Atlas {
  constructor(root) {
    this.root = root;
    root.classList.add("av-atlas");
    this.heading = root.appendChild(el("div", { class: "av-atlas-title" }));
    // One focusable widget (not a grid: its heads are drawn, not elements): the arrows move the chosen head and a polite
    // live region reads it; Enter opens it.
    this.figure = root.appendChild(el("div", { class: "av-atlas-figure", role: "application", tabindex: "0" }));
    this.live = root.appendChild(el("div", { class: "av-sr", "aria-live": "polite", "aria-atomic": "true" }));
    this.canvas = this.figure.appendChild(el("canvas"));
    this.tip = this.figure.appendChild(el("div", { class: "av-tip", role: "tooltip" }));
    this.timings = [];
    this.figure.addEventListener("mousemove", (e) => this.hover(e));
    this.figure.addEventListener("mouseleave", () => (this.tip.style.display = "none"));
    this.figure.addEventListener("click", (e) => this.click(e));
    this.figure.addEventListener("keydown", (e) => this.key(e));
    this.resize = new ResizeObserver(() => this.data && this.draw());
    this.resize.observe(root);
  }

  /** What the numbers count from: 1 on the pages, 0 in the notebook, as its arguments do. */
  get base() {
    return this.data.base ?? 1;
  }

  /** Layer l's and head h's numbers as the model counts them: their own names where the atlas draws a subset. */
  layerName(l) {
    return this.data.layer_names ? String(this.data.layer_names[l]) : String(l + this.base);
  }

  headName(h) {
    return this.data.head_names ? String(this.data.head_names[h]) : String(h + this.base);
  }

  load(data, setTriggerValue) {
    const started = performance.now();
    this.setTriggerValue = setTriggerValue;
    if (!this.data || this.data.version !== data.version) {
      this.tip.style.display = "none"; // a hover over the last data's heads names none of these
      this.values = bytesOf(data.blocks); // (L, H, r, r) each block's colour value, 0 … 255
      this.masked = data.masked ? bytesOf(data.masked) : null; // (r, r) 1 where no query reads any key of the block
      this.image = null;
    }
    this.data = data;
    this.chosen = data.chosen;
    this.root.style.fontSize = `${data.font_px + 2}px`;
    this.heading.textContent = data.title;
    this.draw();
    this.timings.push(performance.now() - started);
  }

  /** The layout for the root's width: each thumbnail `tile` px square, at most tile_max_px, the whole within
   * max_height. A deep and narrow model (30 layers × 9 heads) fills a third of the width as one column of layers, so
   * its layers go into `columns` side by side (layers 1–15, then 16–30) where that makes every thumbnail at least a
   * quarter larger. */
  layout() {
    const d = this.data;
    const width = Math.max(240, Math.floor(this.root.clientWidth || 700));
    const left = Math.ceil(d.font_px * 3.2);
    const top = Math.ceil(d.font_px * 1.8);
    const gap = Math.ceil(d.font_px * 1.5); // between two columns of layers
    const ctx = this.canvas.getContext("2d");
    ctx.font = `${Math.max(10, d.font_px - 2)}px ${FONT}`;
    const bar = 14 + 12 + 6 + Math.ceil(ctx.measureText(d.zmax_text).width) + 8; // the colour bar and its top label
    const tileFor = (columns) => Math.max(4, Math.min(d.tile_max_px,
      Math.floor((width - bar - columns * left - (columns - 1) * gap) / (columns * d.heads)),
      Math.floor((d.max_height - top) / Math.ceil(d.layers / columns))));
    let columns = 1;
    for (let c = 2; c <= Math.min(4, d.layers); c++) if (tileFor(c) >= 1.25 * tileFor(columns)) columns = c;
    const tile = tileFor(columns);
    const rows = Math.ceil(d.layers / columns);
    const stride = left + tile * d.heads + gap; // from one column of layers to the next
    return { width, left, top, tile, rows, columns, stride, right: columns * stride - gap, height: top + tile * rows + 8 };
  }

  /** The top-left corner of the thumbnail in place `slot` of layer l. */
  place(l, slot) {
    const { left, top, tile, rows, stride } = this.box;
    return [Math.floor(l / rows) * stride + left + slot * tile, top + (l % rows) * tile];
  }

  /** Every block of every head, one pixel each, as one image (L·r rows, H·r columns). */
  cells() {
    if (this.image) return this.image;
    const { layers, heads, r } = this.data;
    const stops = this.data.palette;
    const table = new Uint8Array(3 * 256);
    for (let v = 0; v < 256; v++) table.set(paletteColour(stops, v / 255), 3 * v);
    const canvas = document.createElement("canvas");
    canvas.width = heads * r;
    canvas.height = layers * r;
    const image = new ImageData(canvas.width, canvas.height);
    const pixels = image.data;
    for (let l = 0; l < layers; l++) {
      for (let h = 0; h < heads; h++) {
        const base = ((l * heads + h) * r) * r;
        for (let i = 0; i < r; i++) {
          for (let j = 0; j < r; j++) {
            const p = 4 * ((l * r + i) * canvas.width + h * r + j);
            const masked = this.masked && this.masked[i * r + j];
            const v = this.values[base + i * r + j];
            pixels[p] = masked ? MASKED_RGB[0] : table[3 * v];
            pixels[p + 1] = masked ? MASKED_RGB[1] : table[3 * v + 1];
            pixels[p + 2] = masked ? MASKED_RGB[2] : table[3 * v + 2];
            pixels[p + 3] = 255;
          }
        }
      }
    }
    canvas.getContext("2d").putImageData(image, 0, 0);
    this.image = canvas;
    return canvas;
  }

  /** The place of head h in layer l's row (heads drawn in `order` when sorted by a score), and back. */
  slotOf(l, h) {
    return this.data.order ? this.data.order.indexOf(h, l * this.data.heads) - l * this.data.heads : h;
  }

  headIn(l, slot) {
    return this.data.order ? this.data.order[l * this.data.heads + slot] : slot;
  }

  draw() {
    const d = this.data;
    const box = (this.box = this.layout());
    const { width, left, top, tile, rows, columns, stride, height } = box;
    const ctx = canvasContext(this.canvas, this.figure, width, height);
    const cells = this.cells();
    for (let c = 0; c < columns && c * rows < d.layers; c++) this.drawColumn(ctx, cells, c * rows,
      Math.min(rows, d.layers - c * rows), c * stride + left, box);
    if (d.score_bars) this.drawScoreBars(ctx, box);
    if (this.chosen) {
      const [x, y] = this.place(this.chosen[0], this.slotOf(this.chosen[0], this.chosen[1]));
      ctx.strokeStyle = HIGHLIGHT;
      ctx.lineWidth = 3;
      ctx.strokeRect(x - 1, y - 1, tile + 2, tile + 2);
    }
    ctx.fillStyle = INK;
    ctx.font = `${d.font_px}px ${FONT}`;
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    ctx.save();
    ctx.translate(d.font_px * 0.8, top + (tile * rows) / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.fillText("layer", 0, d.font_px * 0.6);
    ctx.restore();
    this.drawColourBar(ctx, box);
    this.figure.setAttribute("aria-label", `${d.title}. Chosen: layer ${this.layerName(this.chosen[0])}, head ${this.headName(this.chosen[1])}. ` +
      `${d.layers} layers × ${d.heads} heads, each a thumbnail of its weights. Arrow keys move the chosen head and read it; Enter opens it.`);
    this.expose();
  }

  /** Layers first … first + count − 1 at x: their thumbnails, the lines between them, their numbers (layers down the
   * left, heads along the top, every k-th where they would crowd). */
  drawColumn(ctx, cells, first, count, x, { top, tile }) {
    const d = this.data;
    ctx.drawImage(cells, 0, first * d.r, d.heads * d.r, count * d.r, x, top, tile * d.heads, tile * count);
    // White lines part the thumbnails; dark ones part the key/value groups of grouped-query attention.
    ctx.lineWidth = tile >= 10 ? 1 : 0.5;
    ctx.strokeStyle = "#ffffff";
    ctx.beginPath();
    for (let h = 1; h < d.heads; h++) ctx.moveTo(x + h * tile, top), ctx.lineTo(x + h * tile, top + tile * count);
    for (let l = 1; l < count; l++) ctx.moveTo(x, top + l * tile), ctx.lineTo(x + tile * d.heads, top + l * tile);
    ctx.stroke();
    if (d.group > 1) {
      ctx.strokeStyle = INK;
      ctx.lineWidth = 2;
      ctx.beginPath();
      for (let h = d.group; h < d.heads; h += d.group) ctx.moveTo(x + h * tile, top), ctx.lineTo(x + h * tile, top + tile * count);
      ctx.stroke();
    }
    ctx.fillStyle = INK;
    ctx.font = `${d.font_px}px ${FONT}`;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    const stepL = Math.max(1, Math.ceil((d.font_px * 1.3) / tile));
    for (let l = 0; l < count; l += stepL) ctx.fillText(this.layerName(first + l), x - 6, top + (l + 0.5) * tile);
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    const stepH = Math.max(1, Math.ceil((d.font_px * 2) / tile));
    // Sorted by a score, the numbers along the top are places (#1: each layer's highest), not heads.
    for (let h = 0; h < d.heads; h += stepH) ctx.fillText(d.order ? `#${h + 1}` : this.headName(h), x + (h + 0.5) * tile, top - 3);
  }

  /** A head score on each thumbnail, keeping its pattern: a bar along the thumbnail's foot, its length the score
   * (the full width = 1), over a white track. */
  scoreBar(l, head) {
    const value = this.data.measure.values[l * this.data.heads + head];
    return Math.min(1, Math.max(0, Number.isFinite(value) ? value : 0));
  }

  drawScoreBars(ctx, { tile }) {
    const d = this.data;
    const height = Math.max(2, Math.round(tile / 5));
    for (let l = 0; l < d.layers; l++) {
      for (let slot = 0; slot < d.heads; slot++) {
        const [x, corner] = this.place(l, slot);
        const y = corner + tile - height;
        ctx.fillStyle = "#ffffff";
        ctx.fillRect(x, y, tile, height);
        ctx.fillStyle = HIGHLIGHT;
        ctx.fillRect(x, y, tile * this.scoreBar(l, this.headIn(l, slot)), height);
      }
    }
  }

  drawColourBar(ctx, { top, tile, rows, right }) {
    const d = this.data;
    colourBar(ctx, d.palette, right + 14, top, Math.min(200, tile * rows), d.font_px, d.zmax_text, d.zmin_text || "0");
  }

  headAt(event) {
    const rect = this.canvas.getBoundingClientRect();
    const { left, top, tile, rows, columns, stride } = this.box;
    const x = event.clientX - rect.left;
    const column = Math.floor(x / stride);
    const slot = Math.floor((x - column * stride - left) / tile);
    const row = Math.floor((event.clientY - rect.top - top) / tile);
    const l = column * rows + row;
    const inside = column >= 0 && column < columns && row >= 0 && row < rows && slot >= 0 && slot < this.data.heads;
    return inside && l < this.data.layers ? [l, this.headIn(l, slot)] : null;
  }

  /** What one head's thumbnail says: its place, its key/value head where heads share one, its measure. */
  headLines(l, h) {
    const lines = [`layer ${this.layerName(l)}, head ${this.headName(h)}`];
    if (this.data.group > 1) lines.push(`key/value head ${Math.floor(h / this.data.group) + this.base}`);
    if (this.data.measure) lines.push(`${this.data.measure.name}: ${formatG(this.data.measure.values[l * this.data.heads + h], 3)}`);
    return lines;
  }

  hover(event) {
    const at = this.headAt(event);
    if (!at) return (this.tip.style.display = "none");
    const lines = [...this.headLines(...at), "click: open this head"];
    this.tip.replaceChildren(...lines.map((line) => el("div", {}, line)));
    const rect = this.figure.getBoundingClientRect();
    this.tip.style.display = "block";
    this.tip.style.left = `${Math.min(event.clientX - rect.left + 12, this.box.width - 180)}px`;
    this.tip.style.top = `${event.clientY - rect.top + 12}px`;
  }

  click(event) {
    const at = this.headAt(event);
    if (at) this.open(at);
  }

  key(event) {
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    if (event.key === "Enter") return this.open(this.chosen);
    if (!(event.key in moves)) return;
    event.preventDefault();
    const [dl, dh] = moves[event.key];
    const l = Math.min(this.data.layers - 1, Math.max(0, this.chosen[0] + dl));
    const slot = Math.min(this.data.heads - 1, Math.max(0, this.slotOf(this.chosen[0], this.chosen[1]) + dh));
    this.chosen = [l, this.headIn(l, slot)];
    this.draw();
    this.live.textContent = this.headLines(...this.chosen).join(", ");
  }

  open([l, h]) {
    this.chosen = [l, h];
    this.draw();
    this.setTriggerValue("head", [l, h]);
  }

  /** What is drawn, for tests and benchmarks: read from the root element's `attnviz` property. */
  expose() {
    const { tile, columns } = this.box;
    this.root.attnviz = {
      layers: this.data.layers, heads: this.data.heads, chosen: [...this.chosen], version: this.data.version,
      timings: this.timings, drawn: (this.drawn = (this.drawn || 0) + 1),
      order: this.data.order ? [...this.data.order] : null, columns,
      scoreBar: (l, head) => (this.data.score_bars ? this.scoreBar(l, head) : undefined),
      tileCentre: (l, head) => {
        const rect = this.canvas.getBoundingClientRect();
        const [x, y] = this.place(l, this.slotOf(l, head));
        return [rect.left + x + tile / 2, rect.top + y + tile / 2];
      },
      showTile: (l, head) => {  // scroll the page until the tile is in the middle of the screen (a tall atlas overflows it)
        const [x, y] = this.place(l, this.slotOf(l, head));
        const mark = this.figure.appendChild(el("div"));
        Object.assign(mark.style, { position: "absolute", left: `${x}px`, top: `${y}px`, width: `${tile}px`,
          height: `${tile}px` });
        mark.scrollIntoView({ block: "center", inline: "center" });
        mark.remove();
      },
      value: (l, head, i, j) => this.values[((l * this.data.heads + this.slotOf(l, head)) * this.data.r + i) * this.data.r + j],
    };
  }
}

/** Mount the atlas into component.parentElement for component.data; a click calls component.setTriggerValue("head",
 * [layer, head]). */
export function mountAtlas({ data, parentElement, setTriggerValue }) {
  mountOnce(parentElement, "av-atlas-host", Atlas).load(data, setTriggerValue);
}
