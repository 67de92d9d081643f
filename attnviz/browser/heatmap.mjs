// The interactive attention heatmap: it receives a view's raw scores once and recomputes and redraws in the browser
// when τ, hard attention, the mask, the colour scale, the palette or the chosen query change (weights.mjs computes).
// User text (tokens) is only ever set as textContent, never parsed as HTML. The host hears of the view once the person
// pauses (SYNC_MS after the last change), through the setStateValue it gave (figures.mjs's mount).
// Its parts are objects it owns: Drawing (heatmap_draw.mjs), Toolbar (heatmap_toolbar.mjs), Inspector
// (heatmap_inspector.mjs) and Export (heatmap_export.mjs). The heatmap keeps the state and hands each call on to its part.

import { announce, cellWords, el, float32Of, followed, short, strongest } from "./draw.mjs";
import { CONTROLS, Drawing, MASK_NAMES, SYNC_MS } from "./heatmap_draw.mjs";
import { Export } from "./heatmap_export.mjs";
import { Inspector } from "./heatmap_inspector.mjs";
import { Toolbar } from "./heatmap_toolbar.mjs";
import { colourValues, columns, headWeights, maskRule, rowMaxima } from "./weights.mjs";

export class Heatmap {
  static count = 0; // heatmaps made in this page: each description's id
  /**
   * `options.owner`: a Compare that this heatmap is a side of (it hears of each change and syncs Python);
   * `options.controls`: which of CONTROLS the toolbar has; `options.masks`: the mask choices ({value: name});
   * `options.inspector`: false to leave out the chosen query's bars; `options.short`: short control labels (both
   * for a compact Compare, whose three panels share a row).
   */
  constructor(root, options = {}) {
    this.root = root;
    this.drawing = new Drawing(this);
    this.tools = new Toolbar(this);
    this.inspection = new Inspector(this);
    this.exporter = new Export(this);
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
    // What the keyboard's focused cell holds, read out politely (its text only: the figure's name says the rest).
    this.live = root.appendChild(el("div", { class: "av-sr", "aria-live": "polite", "aria-atomic": "true" }));
    // What the drawn weights show (draw.mjs's describeWeights), the figure's description.
    this.description = root.appendChild(el("div", { class: "av-sr", id: `av-description-${++Heatmap.count}` }));
    this.figure.setAttribute("aria-describedby", this.description.id);
    this.inspector = root.appendChild(el("div", { class: "av-inspector" }));
    this.figure.addEventListener("mousemove", (e) => this.hover(e));
    this.figure.addEventListener("mouseleave", () => (this.tip.style.display = "none"));
    this.figure.addEventListener("click", (e) => this.click(e));
    this.figure.addEventListener("keydown", (e) => this.key(e));
    this.figure.addEventListener("focus", () => this.data && this.drawOverlay());
    this.figure.addEventListener("blur", () => this.data && this.drawOverlay());
    this.resize = new ResizeObserver(() => this.layout() && this.draw());
    this.resize.observe(root);
    if (!this.owner) {
      root.attnvizFollow = (view) => this.follow(view);
      root.attnvizSentence = (data) => this.newSentence(data);
    }
  }

  /** A new sentence's data from the server (the sentence box, sentence.mjs), drawn under the view shown: the query,
   * the hidden keys and the key taken apart stay where the new sentence still has them, else go back to their first
   * values, as the page's run would; a view that changed goes to the host. */
  newSentence(data) {
    const n = data.n, shown = this.view, synced = this.synced;
    const view = { ...shown, query: shown.query < n ? shown.query : 0, hide: shown.hide.filter((j) => j < n) };
    if ("key" in view && view.key >= n) view.key = -1;
    this.load({ ...data, view, beacon: this.data.beacon, awaiting: false }, this.setStateValue);
    this.synced = synced; // what the host has
    if (this.timer === null) this.sync();
  }

  /** A class's view (the presenter's), applied here without telling the host: a student's page follows it. */
  follow(view) {
    if (!this.data) return;
    Object.assign(this.view, followed(this.view, view, this.data.row_start + this.data.n));
    this.syncToolbar();
    this.update(performance.now(), false);
  }

  // ------------------------------------------------------------ data and state

  load(data, setStateValue) {
    this.setStateValue = setStateValue;
    const fresh = !this.data || this.data.version !== data.version;
    const pythonView = JSON.stringify(data.view);
    this.data = data;
    this.root.attnvizBeacon = data.beacon ? data.beacon.token : null; // the sentence box finds its heatmap by it
    if (data.masks) this.masks = data.masks; // a page's own mask choices (a decoder's are causal)
    this.root.style.fontSize = `${data.font_px + 2}px`; // the toolbar, hover and inspector; the figure's text is font_px
    if (fresh) {
      this.tip.style.display = "none"; // a hover over the last data's cells names none of these
      // (H, n, M) float32, before τ, mask and softmax: base64 from Python, or a slice a notebook widget already holds
      this.scores = typeof data.scores === "string" ? float32Of(data.scores) : data.scores;
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

  /** Whether a change the person made waits for the pause to be sent (this heatmap's, or its Compare's), or was sent
   * but is not yet in the data (the host's `awaiting`: streamlit.mjs). */
  pending() {
    return this.owner ? this.owner.pending() : this.timer !== null || Boolean(this.data && this.data.awaiting);
  }

  /** Recompute what the change needs, redraw, and sync Python once the person pauses. */
  update(started, byPerson) {
    this.recompute();
    this.draw();
    if (byPerson) {
      if (!this.owner) announce(this.root, this.view);
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
        window: this.data.window || 0, windowBoth: Boolean(this.data.window_both), // the layer's own sliding window
        sink: Boolean(this.data.sink), // the last column: a learned sink, read under every mask
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
    const label = short(this.data.rows[i], this.data.row_chars ?? this.data.tick_chars);
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

  /** The keyboard's cell (drawn row, drawn column): the chosen query's row, and the column the arrows moved to, else
   * the chosen key's, else the row's strongest. */
  cursorCell() {
    const d = this.data;
    const row = Math.min(d.n - 1, Math.max(0, this.row()));
    if (this.cursorCol === undefined || this.cursorCol >= d.m) {
      const key = this.view.key - d.col_start;
      this.cursorCol = Number.isInteger(key) && key >= 0 && key < d.m ? key : strongest(this.result.weights, this.result.allowed, row, d.m);
    }
    return [row, this.cursorCol];
  }

  /** The focused cell in words, into the live region: "query happy, key dog, weight 0.17, 2nd of 16". */
  readCell() {
    this.live.textContent = cellWords(this.data, this.result, ...this.cursorCell());
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

  // ------------------------------------------------------------ the parts' calls, through the heatmap, so that a
  // subclass (heatmap_matrix.mjs's Matrix) overrides a part's step (what, hoverLines, click, key) for every caller

  // Drawing (its module's class), one of the heatmap's parts
  layout(...args) {
    return this.drawing.layout(...args);
  }

  draw(...args) {
    return this.drawing.draw(...args);
  }

  what(...args) {
    return this.drawing.what(...args);
  }

  drawCells(...args) {
    return this.drawing.drawCells(...args);
  }

  cellImage(...args) {
    return this.drawing.cellImage(...args);
  }

  paletteTable(...args) {
    return this.drawing.paletteTable(...args);
  }

  drawColourBar(...args) {
    return this.drawing.drawColourBar(...args);
  }

  drawOverlay(...args) {
    return this.drawing.drawOverlay(...args);
  }

  drawBarTicks(...args) {
    return this.drawing.drawBarTicks(...args);
  }

  expose(...args) {
    return this.drawing.expose(...args);
  }

  cellAt(...args) {
    return this.drawing.cellAt(...args);
  }

  hover(...args) {
    return this.drawing.hover(...args);
  }

  hoverLines(...args) {
    return this.drawing.hoverLines(...args);
  }

  // Toolbar (its module's class), one of the heatmap's parts
  buildToolbar(...args) {
    return this.tools.buildToolbar(...args);
  }

  select(...args) {
    return this.tools.select(...args);
  }

  syncToolbar(...args) {
    return this.tools.syncToolbar(...args);
  }

  click(...args) {
    return this.tools.click(...args);
  }

  toggleHidden(...args) {
    return this.tools.toggleHidden(...args);
  }

  key(...args) {
    return this.tools.key(...args);
  }

  // Inspector (its module's class), one of the heatmap's parts
  drawInspector(...args) {
    return this.inspection.drawInspector(...args);
  }

  // Export (its module's class), one of the heatmap's parts
  render(...args) {
    return this.exporter.render(...args);
  }

  savePng(...args) {
    return this.exporter.savePng(...args);
  }

  saveSvg(...args) {
    return this.exporter.saveSvg(...args);
  }

  saveNumbers(...args) {
    return this.exporter.saveNumbers(...args);
  }

  save(...args) {
    return this.exporter.save(...args);
  }
}

