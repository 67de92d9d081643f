// One head's overview of a whole document, drawn on a canvas in the browser (figures.long.overview_data): each block of
// queries' mean weight on each block of keys. Hover names the blocks' pieces; a click on a block, or a box dragged
// over several, asks Python for their exact weights (a trigger: one round trip for a tile), which the same canvas then
// draws piece by piece. The box follows the pointer without a round trip, and "Back to the whole document" draws the
// overview again at once. Pieces are set as text (textContent), never as HTML.

import { FONT, HIGHLIGHT, INK, MASKED_RGB, canvasContext, colourBar, el, float32Of, mountOnce, short } from "./draw.mjs";
import { matrixCsv } from "./files.mjs";
import { formatG, paletteColour } from "./weights.mjs";

const LEVELS = 1023; // colours per palette

/** The region of blocks between two corners [row, key]: [row, key] for one block, else [first row, first key, last
 * row, last key], as the page's `zoom` holds it. */
export function regionOf([a, b], [c, d]) {
  if (a === c && b === d) return [a, b];
  return [Math.min(a, c), Math.min(b, d), Math.max(a, c), Math.max(b, d)];
}

/** Whether no query of row block `row` may read any key of key block `key`: in a decoder, a block past the diagonal. */
export function blockHidden(row, key, causal) {
  return causal && key > row;
}

export class Overview {
  constructor(root) {
    this.root = root;
    root.classList.add("av-overview");
    this.heading = root.appendChild(el("div", { class: "av-atlas-title" }));
    const bar = root.appendChild(el("div", { class: "av-overview-bar" }));
    this.back = bar.appendChild(el("button", { class: "av-button", type: "button" }, "Back to the whole document"));
    this.back.addEventListener("click", () => this.zoomOut());
    bar.appendChild(el("button", { class: "av-button", type: "button", title: "the figure, 3× size" }, "PNG"))
      .addEventListener("click", () => this.render(3).toBlob((blob) => this.save(blob, "png")));
    bar.appendChild(el("button", { class: "av-button", type: "button", title: "the numbers drawn" }, "CSV"))
      .addEventListener("click", () => this.save(new Blob([this.csv()], { type: "text/csv" }), "csv"));
    // The keyboard's way in: the figure takes focus, the arrows move a block (a piece, in a tile) and a polite live
    // region reads it as the hover does; Enter opens the block's exact weights, Escape goes back to the whole document.
    this.figure = root.appendChild(el("div", { class: "av-atlas-figure", tabindex: "0", role: "application" }));
    this.live = root.appendChild(el("div", { class: "av-sr", "aria-live": "polite", "aria-atomic": "true" }));
    this.cursor = [0, 0];
    this.figure.addEventListener("keydown", (e) => this.key(e));
    this.canvas = this.figure.appendChild(el("canvas"));
    this.box = this.figure.appendChild(el("div", { class: "av-overview-box" }));
    this.tip = this.figure.appendChild(el("div", { class: "av-tip", role: "tooltip" }));
    this.figure.addEventListener("mousedown", (e) => this.press(e));
    this.figure.addEventListener("mousemove", (e) => this.move(e));
    this.figure.addEventListener("mouseleave", () => (this.tip.style.display = "none"));
    window.addEventListener("mouseup", (e) => this.release(e));
    this.resize = new ResizeObserver(() => this.data && this.draw());
    this.resize.observe(root);
    this.drawn = 0;
  }

  load(data, setTriggerValue) {
    this.setTriggerValue = setTriggerValue;
    this.data = data;
    this.values = float32Of(data.values); // (B, B)
    this.tile = data.tile ? { ...data.tile, weights: float32Of(data.tile.weights) } : null; // (r, c)
    this.showing = this.tile ? "tile" : "overview";
    this.drag = null;
    this.tip.style.display = "none"; // a hover over the blocks of the view before names none of these
    this.table = new Uint8Array(3 * (LEVELS + 1));
    for (let i = 0; i <= LEVELS; i++) this.table.set(paletteColour(data.palette, i / LEVELS), 3 * i);
    this.root.style.fontSize = `${data.font_px + 2}px`;
    this.draw();
  }

  /** What is drawn: the overview's B × B blocks, or the tile's r × c pieces. */
  grid() {
    const d = this.data;
    if (this.showing === "overview") return { rows: d.count, cols: d.count, largest: d.largest };
    return { rows: this.tile.queries[1] - this.tile.queries[0], cols: this.tile.keys[1] - this.tile.keys[0], largest: this.tile.largest };
  }

  layout() {
    const d = this.data;
    const { rows, cols } = this.grid();
    const width = Math.max(240, Math.floor(this.root.clientWidth || 700));
    const left = Math.ceil(d.font_px * 4);
    const bottom = Math.ceil(d.font_px * 2.6);
    const bar = 14 + 12 + 6 + d.font_px * 4;
    const cell = Math.max(0.5, Math.min((width - left - bar) / cols, d.max_px / rows, d.max_px / cols));
    return { width, left, top: 6, cell, rows, cols, height: 6 + cell * rows + bottom };
  }

  /** Each cell's colour value, 0 … LEVELS (linear in the overview, the square root of α in a tile), or −1 where the
   * mask hides it. */
  level(i, j) {
    if (this.showing === "overview") {
      if (blockHidden(i, j, this.data.causal)) return -1;
      return Math.round(LEVELS * Math.min(1, this.values[i * this.data.count + j] / this.data.largest));
    }
    const t = this.tile;
    const cols = t.keys[1] - t.keys[0];
    if (this.data.causal && t.keys[0] + j > t.queries[0] + i) return -1;
    return Math.round(LEVELS * Math.sqrt(Math.min(1, t.weights[i * cols + j] / t.largest)));
  }

  image() {
    const { rows, cols } = this.grid();
    const canvas = document.createElement("canvas");
    canvas.width = cols;
    canvas.height = rows;
    const picture = new ImageData(cols, rows);
    const pixels = picture.data;
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) {
        const v = this.level(i, j);
        const rgb = v < 0 ? MASKED_RGB : this.table.subarray(3 * v, 3 * v + 3);
        pixels.set(rgb, 4 * (i * cols + j));
        pixels[4 * (i * cols + j) + 3] = 255;
      }
    }
    canvas.getContext("2d").putImageData(picture, 0, 0);
    return canvas;
  }

  draw() {
    const box = (this.layoutBox = this.layout());
    this.paint(canvasContext(this.canvas, this.figure, box.width, box.height), box);
    this.heading.textContent = this.title();
    this.back.style.display = this.showing === "tile" ? "" : "none";
    this.box.style.display = "none";
    this.cursor = [Math.min(this.cursor[0], box.rows - 1), Math.min(this.cursor[1], box.cols - 1)];
    this.figure.setAttribute("aria-label", `${this.title()}: ${box.rows} × ${box.cols} ${this.showing === "tile" ? "pieces"
      : "blocks"}. Arrow keys move and read a ${this.showing === "tile" ? "piece" : "block"}` + (this.showing === "tile"
      ? "; Escape goes back to the whole document." : "; Enter opens its exact weights."));
    this.drawn += 1;
    this.expose();
  }

  title() {
    return this.showing === "tile" ? this.tile.title : this.data.title;
  }

  /** The cells, axes and colour bar on `ctx`, in CSS px. */
  paint(ctx, box) {
    const { left, top, cell, rows, cols } = box;
    ctx.drawImage(this.image(), left, top, cell * cols, cell * rows);
    this.drawAxes(ctx, box);
    this.drawColourBar(ctx, box);
  }

  /** The figure as one canvas at `scale`×, its title above, on white: the PNG download. */
  render(scale) {
    const box = this.layoutBox;
    const head = Math.ceil(this.data.font_px * 2);
    const canvas = document.createElement("canvas");
    canvas.width = box.width * scale;
    canvas.height = (box.height + head) * scale;
    const ctx = canvas.getContext("2d");
    ctx.scale(scale, scale);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, box.width, box.height + head);
    ctx.imageSmoothingEnabled = false;
    ctx.fillStyle = INK;
    ctx.font = `600 ${this.data.font_px + 2}px ${FONT}`;
    ctx.textBaseline = "top";
    ctx.fillText(this.title(), 4, 4);
    ctx.translate(0, head);
    this.paint(ctx, box);
    return canvas;
  }

  /** The numbers drawn as CSV: the overview's mean shares, rows and columns named by their blocks' pieces, or the
   * tile's weights, named by their pieces (a cell the mask hides is 0). */
  csv() {
    const d = this.data;
    if (this.showing === "overview") return matrixCsv(this.values, d.spans, d.spans, "query block \\ key block");
    const t = this.tile;
    const named = (names, start) => names.map((name, i) => `#${start + i} ${name}`);
    return matrixCsv(t.weights, named(t.row_names, t.queries[0]), named(t.key_names, t.keys[0]));
  }

  save(blob, ext) {
    const part = this.showing === "tile" ? `_q${this.tile.queries[0]}_k${this.tile.keys[0]}` : "";
    const link = el("a", { download: `${this.data.file}${part}.${ext}`, href: URL.createObjectURL(blob) });
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  }

  /** Tick labels: positions of the first piece of every k-th block (or piece), where they would not crowd. */
  drawAxes(ctx, { left, top, cell, rows, cols }) {
    ctx.save();
    const d = this.data;
    const [rowStart, colStart, unit] = this.showing === "tile" ? [this.tile.queries[0], this.tile.keys[0], 1] : [0, 0, d.block];
    ctx.fillStyle = INK;
    ctx.font = `${Math.max(10, d.font_px - 2)}px ${FONT}`;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    const every = (count) => Math.max(1, Math.ceil((d.font_px * 3) / cell), Math.ceil(count / 16));
    for (let i = 0; i < rows; i += every(rows)) ctx.fillText(String(rowStart + i * unit), left - 4, top + (i + 0.5) * cell);
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (let j = 0; j < cols; j += every(cols)) ctx.fillText(String(colStart + j * unit), left + (j + 0.5) * cell, top + rows * cell + 3);
    ctx.font = `${d.font_px}px ${FONT}`;
    ctx.fillText(this.showing === "tile" ? "keys (positions)" : "keys (first piece of each block)", left + (cols * cell) / 2,
      top + rows * cell + d.font_px + 4);
    ctx.save();
    ctx.translate(d.font_px * 0.9, top + (rows * cell) / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textBaseline = "middle";
    ctx.fillText("queries", 0, 0);
    ctx.restore();
    ctx.restore();
  }

  drawColourBar(ctx, { left, top, cell, rows, cols }) {
    const high = this.grid().largest;
    ctx.save();
    colourBar(ctx, this.data.palette, left + cols * cell + 14, top, Math.min(240, rows * cell), this.data.font_px,
      this.showing === "tile" ? `α ${formatG(high, 3)} (√ scale)` : `mean share ${formatG(high, 3)}`);
    ctx.restore();
  }

  /** The cell [row, column] under a pointer event, or null outside the grid. */
  cellAt(event) {
    const rect = this.canvas.getBoundingClientRect();
    const { left, top, cell, rows, cols } = this.layoutBox;
    const i = Math.floor((event.clientY - rect.top - top) / cell);
    const j = Math.floor((event.clientX - rect.left - left) / cell);
    return i >= 0 && i < rows && j >= 0 && j < cols ? [i, j] : null;
  }

  press(event) {
    if (this.showing !== "overview" || event.button !== 0) return;
    const at = this.cellAt(event);
    if (!at) return;
    event.preventDefault();
    this.drag = { from: at, to: at };
    this.showBox();
  }

  move(event) {
    const at = this.cellAt(event);
    if (this.drag) {
      if (at) this.drag.to = at;
      this.showBox();
    }
    this.hover(event, at);
  }

  release(event) {
    if (!this.drag) return;
    const at = this.cellAt(event);
    if (at) this.drag.to = at;
    const region = regionOf(this.drag.from, this.drag.to);
    this.drag = null;
    const [a, b, c = a] = region;
    if (blockHidden(c, b, this.data.causal)) {  // keys after every query of the region: nothing to read there
      this.box.style.display = "none";
      return;
    }
    this.heading.textContent = "Computing the exact weights…";
    this.tip.style.display = "none"; // the hover named a block of the view that is going away
    this.setTriggerValue("region", region);
  }

  /** The dragged box over the blocks between its corners: moved with the pointer, no redraw of the canvas. */
  showBox() {
    const { left, top, cell } = this.layoutBox;
    const [a, b, c = a, e = b] = regionOf(this.drag.from, this.drag.to);
    Object.assign(this.box.style, { display: "block", left: `${left + b * cell}px`, top: `${top + a * cell}px`,
      width: `${(e - b + 1) * cell}px`, height: `${(c - a + 1) * cell}px`, borderColor: HIGHLIGHT });
  }

  /** What cell [i, j] holds, as the hover and the live region say it. */
  cellLines([i, j]) {
    const d = this.data;
    if (this.showing === "overview") {
      return [`queries ${d.spans[i]}`, `keys ${d.spans[j]}`, blockHidden(i, j, d.causal)
        ? "hidden by the mask" : `mean share ${formatG(this.values[i * d.count + j], 4)}`];
    }
    const t = this.tile;
    const q = t.queries[0] + i;
    const k = t.keys[0] + j;
    const w = t.weights[i * (t.keys[1] - t.keys[0]) + j];
    return [`query #${q} ${short(t.row_names[i], 24)}`, `key #${k} ${short(t.key_names[j], 24)}`,
      d.causal && k > q ? "hidden by the mask" : `α = ${formatG(w, 4)}`];
  }

  key(event) {
    const { rows, cols } = this.layoutBox;
    if (event.key === "Escape" && this.showing === "tile") return this.zoomOut();
    if ((event.key === "Enter" || event.key === " ") && this.showing === "overview") {
      event.preventDefault();
      const [i, j] = this.cursor;
      if (blockHidden(i, j, this.data.causal)) return (this.live.textContent = "hidden by the mask: nothing to open");
      this.heading.textContent = "Computing the exact weights…";
      return this.setTriggerValue("region", [i, j]);
    }
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1], PageUp: [-10, 0],
      PageDown: [10, 0], Home: [0, -Infinity], End: [0, Infinity] };
    if (!(event.key in moves)) {
      if (event.key.length === 1 && !event.ctrlKey && !event.metaKey) event.stopPropagation(); // no page-wide letter keys
      return;
    }
    event.preventDefault();
    const [di, dj] = moves[event.key];
    this.cursor = [Math.min(rows - 1, Math.max(0, this.cursor[0] + di)), Math.min(cols - 1, Math.max(0, this.cursor[1] + dj))];
    const { left, top, cell } = this.layoutBox;
    Object.assign(this.box.style, { display: "block", left: `${left + this.cursor[1] * cell}px`, top: `${top + this.cursor[0] * cell}px`,
      width: `${cell}px`, height: `${cell}px`, borderColor: HIGHLIGHT });
    this.live.textContent = this.cellLines(this.cursor).join(", ");
  }

  hover(event, at) {
    if (!at) return (this.tip.style.display = "none");
    const lines = [...this.cellLines(at), ...(this.showing === "overview" ? ["click, or drag over blocks: the exact weights"] : [])];
    this.tip.replaceChildren(...lines.map((line) => el("div", {}, line)));
    const rect = this.figure.getBoundingClientRect();
    this.tip.style.display = "block";
    this.tip.style.left = `${Math.min(event.clientX - rect.left + 12, this.layoutBox.width - 220)}px`;
    this.tip.style.top = `${event.clientY - rect.top + 12}px`;
  }

  zoomOut() {
    this.showing = "overview";
    this.tip.style.display = "none";
    this.draw();
    this.setTriggerValue("region", []);
  }

  /** What is drawn, for tests: read from the root element's `attnviz` property. */
  expose() {
    const { left, top, cell } = this.layoutBox;
    this.root.attnviz = {
      showing: this.showing, drawn: this.drawn, count: this.data.count,
      tile: this.tile && { queries: [...this.tile.queries], keys: [...this.tile.keys], title: this.tile.title },
      title: this.heading.textContent,
      cellCentre: (i, j) => {
        const rect = this.canvas.getBoundingClientRect();
        return [rect.left + left + (j + 0.5) * cell, rect.top + top + (i + 0.5) * cell];
      },
      level: (i, j) => this.level(i, j),
    };
  }
}

/** Mount the overview into component.parentElement for component.data; a click or a dragged box calls
 * component.setTriggerValue("region", blocks), the back button with []. */
export function mountOverview({ data, parentElement, setTriggerValue }) {
  mountOnce(parentElement, "av-overview-host", Overview).load(data, setTriggerValue);
}
