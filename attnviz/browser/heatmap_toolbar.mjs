// The interactive heatmap (heatmap.mjs), its toolbar part: methods that heatmap.mjs puts on the Heatmap class.
// The controls: the toolbar (τ, hard, mask, heads, colour scale, palette, downloads), and the pointer and keys.

import { el } from "./draw.mjs";
import { OVER_NAMES, SCALE_NAMES } from "./heatmap_draw.mjs";
import { formatG, maskRule } from "./weights.mjs";

export const Toolbar = {
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
    for (const [kind, label, title] of [["csv", "CSV", "the numbers drawn, as CSV"], ["npy", ".npy", "the numbers drawn, as float32 .npy (numpy.load)"]]) {
      const button = this.toolbar.appendChild(el("button", { type: "button", class: "av-button", title }, label));
      button.addEventListener("click", () => this.saveNumbers(kind));
    }
    this.syncToolbar();
  },

  select(label, options, onChange) {
    const wrap = this.toolbar.appendChild(el("label", { class: "av-control" }, label + " "));
    const input = wrap.appendChild(el("select"));
    for (const [value, name] of Object.entries(options)) input.appendChild(el("option", { value }, name));
    input.addEventListener("change", (e) => onChange(input.value, e));
    return input;
  },

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
  },

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
  },

  /** Hide the drawn column j's key (its position in the sentence: col_start + j), or show it again. */
  toggleHidden(column, started) {
    const j = this.data.col_start + column;
    const hide = new Set(this.view.hide);
    hide.has(j) ? hide.delete(j) : hide.add(j);
    this.change({ hide: [...hide].sort((a, b) => a - b) }, started);
  },

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
  },
};
