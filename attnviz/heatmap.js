// The interactive attention heatmap: a Streamlit component (components v2) that receives a view's raw scores
// once and recomputes and redraws in the browser when τ, hard attention, the mask, the colour scale, the palette
// or the chosen query change. The math is weights.mjs (prepended to this file when the component is registered).
// User text (tokens) is only ever set as textContent, never parsed as HTML.
// Python hears of the view once the person pauses (SYNC_MS after the last change), so the URL, the session's
// controls and the downloads follow what is drawn.

const SYNC_MS = 400;
const SVG_NS = "http://www.w3.org/2000/svg";
const HIGHLIGHT = "#d55e00";
const MASKED_RGB = [0xe4, 0xe4, 0xe4]; // a masked cell: no weight at all, drawn apart from a small weight
const PALETTE_LEVELS = 1023; // colours per palette: finer than a screen's 8 bits a channel can show
const SVG_CELLS = 128 * 128; // above this many cells an SVG download carries the cells as an image
const MASK_NAMES = { none: "none", causal: "causal", keys: "hide keys" }; // a page may send its own (data.masks)
const SCALE_NAMES = { row: "per row", max: "0 → largest shown", absolute: "0 → 1", sqrt: "√ stretch" };
const OVER_NAMES = { mean: "average", max: "maximum" }; // how several heads combine into the one matrix drawn
const CONTROLS = ["temp", "hard", "mask", "over", "scale", "palette"]; // a heatmap's toolbar, all of it
const SHARED = ["scale", "palette", "query"]; // Compare: what A, B and B − A share

function el(tag, attrs = {}, text) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG_NS, tag.slice(4)) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function decodeScores(base64) {
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  return new Float32Array(bytes.buffer);
}

function short(label, chars) {
  return [...label].length <= chars ? label : [...label].slice(0, chars - 1).join("") + "…";
}

const ALL_LABELS = 20; // figures.ALL_LABELS: up to this many tokens every label is drawn

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

class Heatmap {
  /**
   * `options.owner`: a Compare that this heatmap is a side of (it hears of each change and syncs Python);
   * `options.controls`: which of CONTROLS the toolbar has; `options.masks`: the mask choices ({value: name});
   * `options.inspector`: false to leave out the chosen query's bars; `options.short`: short control labels (both
   * for a compact Compare, whose three panels share a row).
   */
  constructor(root, options = {}) {
    this.root = root;
    this.owner = options.owner || null;
    this.controls = options.controls || CONTROLS;
    this.masks = options.masks || MASK_NAMES;
    this.inspects = options.inspector !== false;
    this.short = Boolean(options.short);
    this.timings = this.owner ? this.owner.timings : [];
    this.synced = null;
    this.timer = null;
    root.classList.add("av-root");
    this.toolbar = root.appendChild(el("div", { class: "av-toolbar" }));
    this.message = root.appendChild(el("div", { class: "av-message", role: "status" }));
    this.figure = root.appendChild(el("div", { class: "av-figure", tabindex: "0", role: "application" }));
    this.canvas = this.figure.appendChild(el("canvas", { class: "av-cells" }));
    this.svg = this.figure.appendChild(el("svg:svg", { class: "av-overlay" }));
    this.tip = this.figure.appendChild(el("div", { class: "av-tip", role: "tooltip" }));
    this.inspector = root.appendChild(el("div", { class: "av-inspector" }));
    this.figure.addEventListener("mousemove", (e) => this.hover(e));
    this.figure.addEventListener("mouseleave", () => (this.tip.style.display = "none"));
    this.figure.addEventListener("click", (e) => this.click(e));
    this.figure.addEventListener("keydown", (e) => this.key(e));
    this.resize = new ResizeObserver(() => this.layout() && this.draw());
    this.resize.observe(root);
  }

  // ------------------------------------------------------------ data and state

  load(data, setStateValue) {
    this.setStateValue = setStateValue;
    const fresh = !this.data || this.data.version !== data.version;
    const pythonView = JSON.stringify(data.view);
    this.data = data;
    if (data.masks) this.masks = data.masks; // a page's own mask choices (a decoder's are causal)
    this.root.style.fontSize = `${data.font_px + 2}px`; // the toolbar, hover and inspector; the figure's text is font_px
    if (fresh) {
      this.scores = decodeScores(data.scores); // (H, n, M) float32, before τ, mask and softmax
      // (n, m) the drawn columns' scores of the first head, for the hover
      this.drawnScores = this.windowed() ? columns(this.scores, data.n, this.keyCount(), data.col_start, data.m) : this.scores;
      if (this.pending() && this.view) {
        // A change not yet sent (new data came within the pause): keep it, within the new sentence's positions.
        const hide = this.view.hide.filter((j) => j < this.keyCount());
        const query = Math.min(Math.max(this.view.query, data.row_start), data.row_start + data.n - 1);
        this.view = { ...data.view, ...this.view, query, hide };
      } else {
        this.view = { ...data.view };
      }
      this.synced = pythonView;
      this.buildToolbar();
      this.weightsFor = null;
    } else if (pythonView !== this.synced && !this.pending()) {
      this.view = { ...data.view }; // Python changed the view (a link, another control): take it
      this.synced = pythonView;
      this.syncToolbar();
    }
    this.layout();
    this.update(performance.now(), false);
  }

  change(patch, started) {
    if (this.owner) return this.owner.changed(this, patch, started);
    Object.assign(this.view, patch);
    this.syncToolbar();
    this.update(started, true);
  }

  /** Whether a change the person made waits for the pause to be sent (this heatmap's, or its Compare's). */
  pending() {
    return (this.owner || this).timer !== null;
  }

  /** Recompute what the change needs, redraw, and sync Python once the person pauses. */
  update(started, byPerson) {
    this.recompute();
    this.draw();
    if (byPerson) {
      // From the input event to the frame that shows the change: the task after that frame's rendering.
      requestAnimationFrame(() => setTimeout(() => this.timings.push(performance.now() - started), 0));
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.sync(), SYNC_MS);
    }
  }

  /** The weights for the view's τ, hard attention and masks, computed again only when those changed. */
  recompute() {
    const v = this.view;
    const rule = maskRule(v.mask);
    const key = JSON.stringify([v.temp, v.hard, v.mask, rule.hides ? v.hide : [], this.over()]);
    if (this.weightsFor !== key) {
      const { n, m, heads, row_start: rowStart, col_start: start } = this.data;
      const count = this.keyCount();
      this.full = headWeights(this.scores, heads, n, count, {
        tau: v.temp, hard: v.hard, causal: rule.causal, hidden: rule.hides ? v.hide : [], rowStart,
      }, this.over()); // (n, M): every key of the rows, so a window's rows are normalised over the whole sentence
      const cut = (flat) => columns(flat, n, count, start, m); // (n, M) → (n, m) the drawn columns
      this.result = this.windowed()
        ? { ...this.full, weights: cut(this.full.weights), allowed: cut(this.full.allowed), heads: this.full.heads.map(cut) }
        : this.full;
      this.rowMax = this.windowed() ? rowMaxima(this.full.weights, n, count) : null; // (n,)
      this.weightsFor = key;
    }
  }

  /** The colour scale drawn: a Compare draws "per row" as "0 → largest shown", since per-row scaling would not compare. */
  scale() {
    return this.owner && this.view.scale === "row" ? "max" : this.view.scale;
  }

  /** What each cell's colour shows (colourValues), on the scale shared with the other side in a Compare. */
  colourise() {
    const d = this.data;
    return colourValues(this.result.weights, d.n, d.m, this.scale(), this.rowMax, this.owner ? this.owner.top : null);
  }

  /** The rows' keys: every key of the sentence (M), of which the m drawn are a window when `keys` is sent. */
  keyCount() {
    return this.data.keys ? this.data.keys.length : this.data.m;
  }

  windowed() {
    return this.keyCount() !== this.data.m;
  }

  /** Row i's tick label: its token, cut to tick_chars; in a long input's window with its position, since a word
   * recurs there (the window's keys and queries are positions of the whole sentence). */
  rowLabel(i) {
    const label = short(this.data.rows[i], this.data.tick_chars);
    return this.windowed() ? `#${this.data.row_start + i} ${label}` : label;
  }

  colLabel(j) {
    const label = short(this.data.cols[j], this.data.tick_chars);
    return this.windowed() ? `#${this.data.col_start + j} ${label}` : label;
  }

  /** The chosen query's row among the drawn rows (the view's query is a position in the sentence). */
  row() {
    return this.view.query - this.data.row_start;
  }

  /** How several heads combine: the view's choice ("mean" unless it says "max"); one head is itself. */
  over() {
    return this.data.heads > 1 && this.view.over === "max" ? "max" : "mean";
  }

  /** The figure's title: for several heads, which combination is drawn. */
  title() {
    const d = this.data;
    if (d.heads === 1) return d.title;
    return `${this.over() === "max" ? "Maximum" : "Average"} over ${d.heads} heads` + (d.title ? `: ${d.title}` : "");
  }

  sync() {
    if (this.owner) return this.owner.sync();
    this.timer = null;
    const state = JSON.stringify(this.view);
    if (state === this.synced) return;
    this.synced = state;
    this.setStateValue("view", { ...this.view });
  }

  // ------------------------------------------------------------ controls

  buildToolbar() {
    const d = this.data;
    const has = (name) => this.controls.includes(name);
    const side = d.side ? ` (${d.side})` : ""; // Compare: which side a control belongs to
    this.toolbar.replaceChildren();
    this.tauInput = this.hardInput = this.maskInput = this.overInput = this.scaleInput = this.paletteInput = null;
    if (has("temp")) {
      const tau = this.toolbar.appendChild(el("label", { class: "av-control" }, `${this.short ? "" : "Temperature "}τ${side} `));
      this.tauInput = tau.appendChild(el("input", { type: "range", min: "0", max: String(d.taus.length - 1), step: "1",
        "aria-label": `Temperature τ (log scale)${side}` }));
      this.tauText = tau.appendChild(el("span", { class: "av-value" }));
      this.tauInput.addEventListener("input", (e) => this.change({ temp: d.taus[+this.tauInput.value] }, e.timeStamp));
    }
    if (has("hard")) {
      const hard = this.toolbar.appendChild(el("label", { class: "av-control" }));
      this.hardInput = hard.appendChild(el("input", { type: "checkbox" }));
      hard.appendChild(document.createTextNode(this.short ? ` Hard${side}` : ` Hard attention (one-hot argmax)${side}`));
      if (this.short) hard.title = "Hard attention: each query takes only its best key (one-hot argmax)";
      this.hardInput.addEventListener("change", (e) => this.change({ hard: this.hardInput.checked }, e.timeStamp));
    }
    if (has("mask")) this.maskInput = this.select(`Mask${side}`, this.masks, (value, e) => this.change({ mask: value }, e.timeStamp));
    if (has("over") && d.heads > 1) {
      this.overInput = this.select("Over heads", OVER_NAMES, (value, e) => this.change({ over: value }, e.timeStamp));
    }
    if (has("scale")) {
      const scales = this.owner ? Object.fromEntries(Object.entries(SCALE_NAMES).filter(([s]) => s !== "row")) : SCALE_NAMES;
      this.scaleInput = this.select("Colour scale", scales, (value, e) => this.change({ scale: value }, e.timeStamp));
    }
    if (has("palette")) {
      const palettes = Object.fromEntries(Object.keys(d.palettes).map((p) => [p, p]));
      this.paletteInput = this.select("Palette", palettes, (value, e) => this.change({ palette: value }, e.timeStamp));
    }
    const png = this.toolbar.appendChild(el("button", { type: "button", class: "av-button" }, "PNG (3×)"));
    png.addEventListener("click", () => this.savePng());
    const svg = this.toolbar.appendChild(el("button", { type: "button", class: "av-button" }, "SVG"));
    svg.addEventListener("click", () => this.saveSvg());
    this.syncToolbar();
  }

  select(label, options, onChange) {
    const wrap = this.toolbar.appendChild(el("label", { class: "av-control" }, label + " "));
    const input = wrap.appendChild(el("select"));
    for (const [value, name] of Object.entries(options)) input.appendChild(el("option", { value }, name));
    input.addEventListener("change", (e) => onChange(input.value, e));
    return input;
  }

  syncToolbar() {
    const v = this.view;
    if (this.tauInput) {
      const index = this.data.taus.indexOf(v.temp);
      this.tauInput.value = String(index < 0 ? this.data.taus.indexOf(1) : index);
      this.tauText.textContent = `= ${formatG(v.temp, 4)}`;
    }
    if (this.hardInput) this.hardInput.checked = v.hard;
    if (this.maskInput) this.maskInput.value = v.mask;
    if (this.overInput) this.overInput.value = this.over();
    if (this.scaleInput) this.scaleInput.value = this.scale();
    if (this.paletteInput) this.paletteInput.value = v.palette;
  }

  // ------------------------------------------------------------ layout and drawing

  /** Margins sized for the labels (measured), the plot area, and the label positions; false if unchanged. */
  layout() {
    const d = this.data;
    const width = Math.max(320, Math.floor(this.root.clientWidth || 700));
    const font = `${d.font_px}px "Source Sans Pro", "Source Sans 3", sans-serif`;
    const ctx = this.canvas.getContext("2d");
    ctx.font = font;
    const widest = (count, label) => Math.max(0, ...Array.from({ length: count }, (_, i) => ctx.measureText(label(i)).width));
    const titlePx = Math.round(d.font_px * 1.4);
    const left = Math.ceil(widest(d.n, (i) => this.rowLabel(i)) + titlePx + 16);
    const bottom = Math.ceil(widest(d.m, (j) => this.colLabel(j)) + titlePx + 16);
    const right = Math.ceil(14 + 20 + ctx.measureText("0.000").width + titlePx + 12);
    const top = d.title || d.heads > 1 ? Math.round(d.font_px * 2.6) : 12;
    const plot = { x: left, y: top, w: Math.max(40, width - left - right), h: Math.max(40, d.height - top - bottom) };
    const key = JSON.stringify([width, plot, d.version]);
    if (key === this.laidOut) return false;
    this.laidOut = key;
    Object.assign(this, { width, font, plot });
    this.colLabels = thinned(d.m, plot.w, d.label_px);
    const fonts = [labelFontPx(d.n, plot.h, d.label_px, d.font_px, d.min_font_px), labelFontPx(d.m, plot.w, d.label_px, d.font_px, d.min_font_px)];
    this.labelFonts = fonts.map((px) => (px < d.font_px ? `${px}px` : ""));
    return true;
  }

  draw() {
    const d = this.data;
    const v = this.view;
    if (this.result.overflow.length && !v.hard) {
      this.message.textContent = d.overflow_message;
      this.figure.style.display = "none";
      this.inspector.replaceChildren();
      this.expose();
      return;
    }
    this.figure.style.display = "";
    this.message.textContent = this.result.blocked.length
      ? `${this.result.blocked.length} query row(s) have every key masked, so their weights and output are all zero (no NaN).`
      : "";
    this.colours = this.colourise();
    this.drawCells();
    this.drawOverlay();
    this.drawInspector();
    const combined = d.heads > 1 ? `, ${OVER_NAMES[this.over()]} over ${d.heads} heads` : "";
    const count = (k, one, many) => `${k} ${k === 1 ? one : many}`;
    this.figure.setAttribute("aria-label", `${this.what()}${combined}, ${count(d.n, "query", "queries")} × ${count(d.m, "key", "keys")}. Chosen query: ` +
      `${d.rows[this.row()]} (position ${v.query}). Arrow keys move the query.` +
      (maskRule(v.mask).hides ? " Tab to a key's label and press Enter to hide or show it." : ""));
    this.expose();
  }

  /** What the cells are, for the figure's accessible name. */
  what() {
    return (this.data.side ? `${this.data.side}: ` : "") + "Attention weights";
  }

  drawCells() {
    const { n, m } = this.data;
    const { plot } = this;
    const scale = window.devicePixelRatio || 1;
    const width = this.width;
    const height = this.data.height;
    if (this.canvas.width !== Math.round(width * scale) || this.canvas.height !== Math.round(height * scale)) {
      this.canvas.width = Math.round(width * scale);
      this.canvas.height = Math.round(height * scale);
      this.canvas.style.width = `${width}px`;
      this.canvas.style.height = `${height}px`;
      this.figure.style.height = `${height}px`;
    }
    const ctx = this.canvas.getContext("2d");
    ctx.setTransform(scale, 0, 0, scale, 0, 0);
    ctx.clearRect(0, 0, width, height);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(this.cellImage(), plot.x, plot.y, plot.w, plot.h);
    this.drawColourBar(ctx);
  }

  /** The n×m cells as an image, one pixel per cell; drawn scaled, without smoothing. */
  cellImage() {
    const { n, m } = this.data;
    const table = this.paletteTable();
    const { shown, zmax } = this.colours;
    const allowed = this.result.allowed;
    if (!this.image || this.image.width !== m || this.image.height !== n) this.image = new ImageData(m, n);
    const pixels = this.image.data;
    for (let k = 0; k < n * m; k++) {
      const c = allowed[k] ? 3 * Math.round(Math.min(1, Math.max(0, shown[k] / zmax)) * PALETTE_LEVELS) : -1;
      pixels[4 * k] = c < 0 ? MASKED_RGB[0] : table[c];
      pixels[4 * k + 1] = c < 0 ? MASKED_RGB[1] : table[c + 1];
      pixels[4 * k + 2] = c < 0 ? MASKED_RGB[2] : table[c + 2];
      pixels[4 * k + 3] = 255;
    }
    const cells = this.cells || (this.cells = document.createElement("canvas"));
    cells.width = m;
    cells.height = n;
    cells.getContext("2d").putImageData(this.image, 0, 0);
    return cells;
  }

  /** The palette's colours at PALETTE_LEVELS + 1 evenly spaced points, as r, g, b bytes: looked up per cell. */
  paletteTable() {
    const name = this.view.palette;
    if (this.table && this.tableName === name) return this.table;
    const stops = this.data.palettes[name];
    this.table = new Uint8Array(3 * (PALETTE_LEVELS + 1));
    for (let i = 0; i <= PALETTE_LEVELS; i++) this.table.set(paletteColour(stops, i / PALETTE_LEVELS), 3 * i);
    this.tableName = name;
    return this.table;
  }

  drawColourBar(ctx) {
    const { plot } = this;
    const stops = this.data.palettes[this.view.palette];
    const x = plot.x + plot.w + 12;
    const gradient = ctx.createLinearGradient(0, plot.y + plot.h, 0, plot.y);
    for (const [position, rgb] of stops) gradient.addColorStop(position, `rgb(${rgb.join(",")})`);
    ctx.fillStyle = gradient;
    ctx.fillRect(x, plot.y, 14, plot.h);
  }

  /** Axis labels, titles, the colour bar's ticks and title, and the chosen query's outline, as SVG text. */
  drawOverlay() {
    const d = this.data;
    const v = this.view;
    const { plot } = this;
    const svg = this.svg;
    svg.replaceChildren();
    svg.setAttribute("width", this.width);
    svg.setAttribute("height", d.height);
    svg.style.font = this.font;
    const cellH = plot.h / d.n;
    const cellW = plot.w / d.m;
    if (this.title()) svg.appendChild(el("svg:text", { x: plot.x, y: d.font_px * 1.6, class: "av-title" }, this.title()));
    this.rowLabels = thinned(d.n, plot.h, d.label_px, this.row());
    const [rowFont, colFont] = this.labelFonts;
    for (const i of this.rowLabels) {
      const label = el("svg:text", { x: plot.x - 6, y: plot.y + (i + 0.5) * cellH, "text-anchor": "end",
        "dominant-baseline": "central", class: "av-row" + (i === this.row() ? " av-chosen" : ""), "data-row": i },
      this.rowLabel(i));
      if (rowFont) label.style.fontSize = rowFont;
      svg.appendChild(label);
    }
    const hiding = maskRule(v.mask).hides;
    const hidden = new Set(hiding ? v.hide : []);
    for (const j of this.colLabels) {
      const x = plot.x + (j + 0.5) * cellW;
      const y = plot.y + plot.h + 6;
      const label = svg.appendChild(el("svg:text", { x, y, transform: `rotate(-90 ${x} ${y})`, "text-anchor": "end",
        "dominant-baseline": "central", class: "av-col" + (hidden.has(d.col_start + j) ? " av-hidden" : ""), "data-col": j },
      this.colLabel(j)));
      if (colFont) label.style.fontSize = colFont;
      if (hiding) {  // a button for the keyboard: Enter or Space hides the key or shows it again
        label.setAttribute("tabindex", "0");
        label.setAttribute("role", "button");
        label.setAttribute("aria-pressed", String(hidden.has(d.col_start + j)));
        label.setAttribute("aria-label", `hide key #${d.col_start + j} ${d.cols[j]}`);
      }
    }
    if (this.focusCol !== undefined) {  // the label that had focus before this redraw keeps it
      const again = svg.querySelector(`[data-col="${this.focusCol}"]`);
      this.focusCol = undefined;
      if (again) again.focus();
    }
    const titlePx = d.font_px * 1.4;
    svg.appendChild(el("svg:text", { x: plot.x + plot.w / 2, y: d.height - 6, "text-anchor": "middle", class: "av-axis" }, "key"));
    const qx = 4 + titlePx / 2;
    const qy = plot.y + plot.h / 2;
    svg.appendChild(el("svg:text", { x: qx, y: qy, transform: `rotate(-90 ${qx} ${qy})`, "text-anchor": "middle",
      "dominant-baseline": "central", class: "av-axis" }, "query"));
    svg.appendChild(el("svg:rect", { x: plot.x - 1, y: plot.y + this.row() * cellH - 1, width: plot.w + 2, height: cellH + 2,
      fill: "none", stroke: HIGHLIGHT, "stroke-width": 2, class: "av-outline" }));
    const column = v.key - d.col_start; // the chosen cell, whose score the page takes apart
    if (Number.isInteger(v.key) && column >= 0 && column < d.m) {
      svg.appendChild(el("svg:rect", { x: plot.x + column * cellW, y: plot.y + this.row() * cellH, width: cellW, height: cellH,
        fill: "none", stroke: "#ffffff", "stroke-width": 2, class: "av-cell-outline" }));
    }
    this.drawBarTicks(svg);
  }

  drawBarTicks(svg) {
    const { plot } = this;
    const { top, zmax } = this.colours;
    const scale = this.scale();
    const x = plot.x + plot.w + 12 + 14 + 4;
    const ticks = scale === "sqrt"
      ? [0, 0.01, 0.05, 0.1, 0.2, 0.5, 1].filter((t) => t <= top).concat([top]).map((t) => [Math.sqrt(t / top), t])
      : [0, 0.25, 0.5, 0.75, 1].map((f) => [f, f * zmax]);
    for (const [position, value] of ticks) {
      svg.appendChild(el("svg:text", { x, y: plot.y + plot.h * (1 - position), "dominant-baseline": "central",
        class: "av-tick" }, formatG(value, 3)));
    }
    const tx = this.width - 6;
    const ty = plot.y + plot.h / 2;
    svg.appendChild(el("svg:text", { x: tx, y: ty, transform: `rotate(-90 ${tx} ${ty})`, "text-anchor": "middle",
      class: "av-bar-title" }, colourBarTitle(scale, top)));
  }

  drawInspector() {
    if (!this.inspects) return this.inspector.replaceChildren();
    const d = this.data;
    const v = this.view;
    const i = this.row();
    const count = this.keyCount(); // a window's query is inspected over every key of its row
    const [labels, start] = this.windowed() ? [d.keys, 0] : [d.cols, d.col_start];
    const row = this.full.weights.subarray(i * count, (i + 1) * count); // (M,)
    const allowed = this.full.allowed.subarray(i * count, (i + 1) * count);
    let keys = [...Array(count).keys()];
    if (count > d.bars_limit) {
      keys = keys.sort((a, b) => row[b] - row[a] || a - b).slice(0, d.bars_limit).sort((a, b) => a - b);
    }
    const top = Math.max(1e-12, ...row);
    const panel = el("div", { class: "av-panel" });
    panel.appendChild(el("div", { class: "av-heading" },
      `Query #${v.query} ${d.rows[i]}: ` + (count > d.bars_limit ? `its ${d.bars_limit} largest weights` : "its weights over the keys")));
    const bars = panel.appendChild(el("div", { class: "av-bars", role: "list" }));
    for (const j of keys) {
      const line = bars.appendChild(el("div", { class: "av-bar-row", role: "listitem" }));
      line.appendChild(el("span", { class: "av-bar-label" }, `#${start + j} ${short(labels[j], d.tick_chars)}`));
      const track = line.appendChild(el("span", { class: "av-bar-track" }));
      const bar = track.appendChild(el("span", { class: "av-bar" }));
      bar.style.width = `${(100 * row[j]) / top}%`;
      line.appendChild(el("span", { class: "av-bar-value" }, allowed[j] ? formatG(row[j], 4) : "masked"));
    }
    const keysAllowed = allowed.reduce((a, b) => a + b, 0);
    const facts = el("div", { class: "av-facts" });
    if (this.over() === "max") {
      facts.appendChild(el("div", { class: "av-bound" }, "Rows need not sum to 1: each cell is its strongest head's weight, " +
        "so the row has no entropy to give."));
      panel.appendChild(facts);
      this.inspector.replaceChildren(panel);
      return;
    }
    const h = entropy(row);
    facts.appendChild(el("div", { class: "av-entropy" }, `Entropy of the row: H = ${h.toFixed(3)} nats`));
    facts.appendChild(el("div", { class: "av-bound" },
      `H(α_i) = −Σ_j α_ij ln α_ij ≤ ln ${Math.max(keysAllowed, 1)} = ${Math.log(Math.max(keysAllowed, 1)).toFixed(3)} ` +
      "(0: all weight on one key; the bound: spread evenly over the allowed keys)"));
    panel.appendChild(facts);
    this.inspector.replaceChildren(panel);
  }

  /** What is drawn, for tests and benchmarks: read from the root element's `attnviz` property. */
  expose() {
    const d = this.data;
    const { weights, allowed, overflow } = this.result;
    const rows = (flat) => Array.from({ length: d.n }, (_, i) => Array.from(flat.subarray(i * d.m, (i + 1) * d.m)));
    this.root.attnviz = {
      view: { ...this.view }, rows: d.rows, cols: d.cols, overflow: overflow.length > 0 && !this.view.hard,
      weights: () => rows(weights), shown: () => (this.colours ? rows(this.colours.shown) : []), allowed: () => rows(allowed),
      zmax: this.colours ? this.colours.zmax : null,
      scores: () => rows(this.drawnScores), full: () => Array.from({ length: d.n }, (_, i) => Array.from(
        this.full.weights.subarray(i * this.keyCount(), (i + 1) * this.keyCount()))), timings: this.timings, drawn: (this.drawn = (this.drawn || 0) + 1),
      rowLabels: this.rowLabels, colLabels: this.colLabels,
      cellCentre: (i, j) => {
        const box = this.figure.getBoundingClientRect();
        return [box.left + this.plot.x + ((j + 0.5) * this.plot.w) / d.m, box.top + this.plot.y + ((i + 0.5) * this.plot.h) / d.n];
      },
    };
  }

  // ------------------------------------------------------------ pointer and keyboard

  cellAt(event) {
    const box = this.figure.getBoundingClientRect();
    const { plot } = this;
    const x = event.clientX - box.left - plot.x;
    const y = event.clientY - box.top - plot.y;
    if (x < 0 || y < 0 || x >= plot.w || y >= plot.h) return null;
    return [Math.floor((y / plot.h) * this.data.n), Math.floor((x / plot.w) * this.data.m)];
  }

  hover(event) {
    const cell = this.cellAt(event);
    if (!cell) return (this.tip.style.display = "none");
    const [i, j] = cell;
    const d = this.data;
    const k = i * d.m + j;
    const lines = [`query #${d.row_start + i} ${d.rows[i]}`, `key #${d.col_start + j} ${d.cols[j]}`];
    lines.push(...this.hoverLines(k), "click: inspect this query");
    this.tip.replaceChildren(...lines.map((line) => el("div", {}, line)));
    const box = this.figure.getBoundingClientRect();
    this.tip.style.display = "block";
    this.tip.style.left = `${Math.min(event.clientX - box.left + 12, this.width - 220)}px`;
    this.tip.style.top = `${event.clientY - box.top + 12}px`;
  }

  /** The hover's numbers for cell k (flat index): the weight and the score, or each head's weight. */
  hoverLines(k) {
    if (!this.result.allowed[k]) return ["masked: weight 0"];
    if (this.data.heads === 1) return [`weight: ${formatG(this.result.weights[k], 4)}`, `score: ${formatG(this.drawnScores[k], 4)}`];
    return [`${OVER_NAMES[this.over()]} over heads: ${formatG(this.result.weights[k], 4)}`,
      "per head: " + this.result.heads.map((w) => formatG(w[k], 3)).join(" · ")];
  }

  click(event) {
    const target = event.target;
    const first = this.data.row_start;
    if (target.dataset && target.dataset.row !== undefined) return this.change({ query: first + +target.dataset.row }, event.timeStamp);
    if (target.dataset && target.dataset.col !== undefined && maskRule(this.view.mask).hides) {
      return this.toggleHidden(+target.dataset.col, event.timeStamp);
    }
    const cell = this.cellAt(event);
    if (!cell) return;
    // Where the page takes a score apart (its view has a `key`), the cell's key is chosen with its query.
    const patch = "key" in this.view ? { query: first + cell[0], key: this.data.col_start + cell[1] } : { query: first + cell[0] };
    this.change(patch, event.timeStamp);
  }

  /** Hide the drawn column j's key (its position in the sentence: col_start + j), or show it again. */
  toggleHidden(column, started) {
    const j = this.data.col_start + column;
    const hide = new Set(this.view.hide);
    hide.has(j) ? hide.delete(j) : hide.add(j);
    this.change({ hide: [...hide].sort((a, b) => a - b) }, started);
  }

  key(event) {
    const col = event.target.dataset ? event.target.dataset.col : undefined;
    if (col !== undefined && (event.key === "Enter" || event.key === " ") && maskRule(this.view.mask).hides) {
      event.preventDefault();
      this.focusCol = +col;
      return this.toggleHidden(+col, event.timeStamp);
    }
    const moves = { ArrowUp: -1, ArrowLeft: -1, ArrowDown: 1, ArrowRight: 1, Home: -Infinity, End: Infinity };
    if (!(event.key in moves)) return;
    event.preventDefault();
    const first = this.data.row_start;
    const query = Math.min(first + this.data.n - 1, Math.max(first, this.view.query + moves[event.key]));
    if (query !== this.view.query) this.change({ query }, event.timeStamp);
  }

  // ------------------------------------------------------------ exports

  /** The figure as one canvas at `scale`× (cells, colour bar, every text of the overlay). */
  render(scale) {
    const canvas = document.createElement("canvas");
    canvas.width = this.width * scale;
    canvas.height = this.data.height * scale;
    const ctx = canvas.getContext("2d");
    ctx.scale(scale, scale);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, this.width, this.data.height);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(this.cellImage(), this.plot.x, this.plot.y, this.plot.w, this.plot.h);
    this.drawColourBar(ctx);
    ctx.fillStyle = "#31333f";
    for (const text of this.svg.querySelectorAll("text")) {
      ctx.save();
      ctx.font = getComputedStyle(text).font || this.font;
      const [x, y] = [+text.getAttribute("x"), +text.getAttribute("y")];
      ctx.textAlign = { end: "right", middle: "center" }[text.getAttribute("text-anchor")] || "left";
      ctx.textBaseline = text.getAttribute("dominant-baseline") === "central" ? "middle" : "alphabetic";
      ctx.translate(x, y);
      if (text.getAttribute("transform")) ctx.rotate(-Math.PI / 2);
      ctx.fillText(text.textContent, 0, 0);
      ctx.restore();
    }
    const outline = this.svg.querySelector(".av-outline");
    ctx.strokeStyle = HIGHLIGHT;
    ctx.lineWidth = 2;
    ctx.strokeRect(+outline.getAttribute("x"), +outline.getAttribute("y"), +outline.getAttribute("width"), +outline.getAttribute("height"));
    return canvas;
  }

  savePng() {
    this.render(3).toBlob((blob) => this.save(blob, "png"));
  }

  /** The figure as SVG: every cell a rect (an image above SVG_CELLS cells), the colour bar a gradient, the texts. */
  saveSvg() {
    const d = this.data;
    const { plot } = this;
    const svg = this.svg.cloneNode(true);
    svg.setAttribute("xmlns", SVG_NS);
    const cells = el("svg:g", { class: "av-svg-cells" });
    if (d.n * d.m <= SVG_CELLS) {
      const stops = d.palettes[this.view.palette];
      const [w, h] = [plot.w / d.m, plot.h / d.n];
      for (let k = 0; k < d.n * d.m; k++) {
        const rgb = this.result.allowed[k] ? paletteColour(stops, this.colours.shown[k] / this.colours.zmax) : MASKED_RGB;
        const [i, j] = [Math.floor(k / d.m), k % d.m];
        cells.appendChild(el("svg:rect", { x: plot.x + j * w, y: plot.y + i * h, width: w + 0.05, height: h + 0.05,
          fill: `rgb(${rgb.join(",")})` }));
      }
    } else {
      cells.appendChild(el("svg:image", { x: plot.x, y: plot.y, width: plot.w, height: plot.h, preserveAspectRatio: "none",
        style: "image-rendering: pixelated", href: this.cellImage().toDataURL("image/png") }));
    }
    const gradient = el("svg:linearGradient", { id: "av-bar", x1: "0", y1: "1", x2: "0", y2: "0" });
    for (const [position, rgb] of d.palettes[this.view.palette]) {
      gradient.appendChild(el("svg:stop", { offset: String(position), "stop-color": `rgb(${rgb.join(",")})` }));
    }
    const defs = el("svg:defs");
    defs.appendChild(gradient);
    const bar = el("svg:rect", { x: plot.x + plot.w + 12, y: plot.y, width: 14, height: plot.h, fill: "url(#av-bar)" });
    svg.prepend(defs, cells, bar);
    svg.setAttribute("style", `font: ${this.font}; fill: #31333f`);
    this.save(new Blob([new XMLSerializer().serializeToString(svg)], { type: "image/svg+xml" }), "svg");
  }

  save(blob, ext) {
    const link = el("a", { download: `${this.data.file}.${ext}`, href: URL.createObjectURL(blob) });
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  }
}

/** B − A of a Compare's two sides, cell by cell, on a diverging scale centred on 0; no controls, no inspector. */
class Difference extends Heatmap {
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
class Compare {
  constructor(host, compact = false) {
    this.host = host;
    this.timer = null;
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
  }

  load(data, setStateValue) {
    this.setStateValue = setStateValue;
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
    return this.timer !== null;
  }

  /** A change on one side: the shared names go to the other side too; everything is redrawn; Python hears after the pause. */
  changed(panel, patch, started) {
    Object.assign(panel.view, patch);
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

export default function (component) {
  const { data, parentElement, setStateValue } = component;
  const kind = data.sides ? (data.compact ? "compact" : "compare") : "single";
  let host = parentElement.querySelector(".av-host");
  if (!host) host = parentElement.appendChild(el("div", { class: "av-host" }));
  if (host.kind !== kind) {
    host.replaceChildren();
    host.className = "av-host"; // a Compare's classes go with it
    host.kind = kind;
    host.view = kind === "single" ? new Heatmap(host.appendChild(el("div", { class: "av-heatmap" }))) : new Compare(host, kind === "compact");
  }
  host.view.load(data, setStateValue);
}
