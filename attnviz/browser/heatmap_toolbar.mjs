// The interactive heatmap (heatmap.mjs), its toolbar part: a part that the Heatmap (heatmap.mjs) owns.
// The controls: the toolbar (τ, hard, mask, heads, colour scale, palette, downloads), and the pointer and keys.

import { el } from "./draw.mjs";
import { OVER_NAMES, SCALE_NAMES } from "./heatmap_draw.mjs";
import { formatG, maskRule } from "./weights.mjs";

export class Toolbar {
  /** A part of `heatmap` (heatmap.mjs), which keeps the state and hands each call on to its part. */
  constructor(heatmap) {
    this.heatmap = heatmap;
  }

  buildToolbar() {
    const d = this.heatmap.data;
    const has = (name) => this.heatmap.controls.includes(name);
    const side = d.side ? ` (${d.side})` : ""; // Compare: which side a control belongs to
    this.heatmap.toolbar.replaceChildren();
    this.heatmap.tauInput = this.heatmap.hardInput = this.heatmap.maskInput = this.heatmap.overInput = this.heatmap.scaleInput = this.heatmap.paletteInput = null;
    if (has("temp")) {
      const tau = this.heatmap.toolbar.appendChild(el("label", { class: "av-control" }, `${this.heatmap.short ? "" : "Temperature "}τ${side} `));
      this.heatmap.tauInput = tau.appendChild(el("input", { type: "range", min: "0", max: String(d.taus.length - 1), step: "1",
        "aria-label": `Temperature τ (log scale)${side}` }));
      this.heatmap.tauText = tau.appendChild(el("span", { class: "av-value" }));
      this.heatmap.tauInput.addEventListener("input", (e) => this.heatmap.change({ temp: d.taus[+this.heatmap.tauInput.value] }, e.timeStamp));
    }
    if (has("hard")) {
      const hard = this.heatmap.toolbar.appendChild(el("label", { class: "av-control" }));
      this.heatmap.hardInput = hard.appendChild(el("input", { type: "checkbox" }));
      hard.appendChild(document.createTextNode(this.heatmap.short ? ` Hard${side}` : ` Hard attention (one-hot argmax)${side}`));
      if (this.heatmap.short) hard.title = "Hard attention: each query takes only its best key (one-hot argmax)";
      this.heatmap.hardInput.addEventListener("change", (e) => this.heatmap.change({ hard: this.heatmap.hardInput.checked }, e.timeStamp));
    }
    if (has("mask")) this.heatmap.maskInput = this.heatmap.select(`Mask${side}`, this.heatmap.masks, (value, e) => this.heatmap.change({ mask: value }, e.timeStamp));
    if (has("over") && d.heads > 1) {
      this.heatmap.overInput = this.heatmap.select("Over heads", OVER_NAMES, (value, e) => this.heatmap.change({ over: value }, e.timeStamp));
    }
    if (has("scale")) {
      const scales = this.heatmap.owner ? Object.fromEntries(Object.entries(SCALE_NAMES).filter(([s]) => s !== "row")) : SCALE_NAMES;
      this.heatmap.scaleInput = this.heatmap.select("Colour scale", scales, (value, e) => this.heatmap.change({ scale: value }, e.timeStamp));
    }
    if (has("palette")) {
      const palettes = Object.fromEntries(Object.keys(d.palettes).map((p) => [p, p]));
      this.heatmap.paletteInput = this.heatmap.select("Palette", palettes, (value, e) => this.heatmap.change({ palette: value }, e.timeStamp));
    }
    const png = this.heatmap.toolbar.appendChild(el("button", { type: "button", class: "av-button" }, "PNG (3×)"));
    png.addEventListener("click", () => this.heatmap.savePng());
    const svg = this.heatmap.toolbar.appendChild(el("button", { type: "button", class: "av-button" }, "SVG"));
    svg.addEventListener("click", () => this.heatmap.saveSvg());
    for (const [kind, label, title] of [["csv", "CSV", "the numbers drawn, as CSV"], ["npy", ".npy", "the numbers drawn, as float32 .npy (numpy.load)"]]) {
      const button = this.heatmap.toolbar.appendChild(el("button", { type: "button", class: "av-button", title }, label));
      button.addEventListener("click", () => this.heatmap.saveNumbers(kind));
    }
    this.heatmap.syncToolbar();
  }

  select(label, options, onChange) {
    const wrap = this.heatmap.toolbar.appendChild(el("label", { class: "av-control" }, label + " "));
    const input = wrap.appendChild(el("select"));
    for (const [value, name] of Object.entries(options)) input.appendChild(el("option", { value }, name));
    input.addEventListener("change", (e) => onChange(input.value, e));
    return input;
  }

  syncToolbar() {
    const v = this.heatmap.view;
    if (this.heatmap.tauInput) {
      const index = this.heatmap.data.taus.indexOf(v.temp);
      this.heatmap.tauInput.value = String(index < 0 ? this.heatmap.data.taus.indexOf(1) : index);
      this.heatmap.tauText.textContent = `= ${formatG(v.temp, 4)}`;
      this.heatmap.tauInput.setAttribute("aria-valuetext", `τ = ${formatG(v.temp, 4)}`); // not the step's index
    }
    if (this.heatmap.hardInput) this.heatmap.hardInput.checked = v.hard;
    if (this.heatmap.maskInput) this.heatmap.maskInput.value = v.mask;
    if (this.heatmap.overInput) this.heatmap.overInput.value = this.heatmap.over();
    if (this.heatmap.scaleInput) this.heatmap.scaleInput.value = this.heatmap.scale();
    if (this.heatmap.paletteInput) this.heatmap.paletteInput.value = v.palette;
  }

  click(event) {
    const target = event.target;
    const first = this.heatmap.data.row_start;
    if (target.dataset && target.dataset.row !== undefined) return this.heatmap.change({ query: first + +target.dataset.row }, event.timeStamp);
    if (target.dataset && target.dataset.col !== undefined && maskRule(this.heatmap.view.mask).hides) {
      return this.heatmap.toggleHidden(+target.dataset.col, event.timeStamp);
    }
    const cell = this.heatmap.cellAt(event);
    if (!cell) return;
    // Where the page takes a score apart (its view has a `key`), the cell's key is chosen with its query.
    const patch = "key" in this.heatmap.view ? { query: first + cell[0], key: this.heatmap.data.col_start + cell[1] } : { query: first + cell[0] };
    this.heatmap.change(patch, event.timeStamp);
  }

  /** Hide the drawn column j's key (its position in the sentence: col_start + j), or show it again. */
  toggleHidden(column, started) {
    const j = this.heatmap.data.col_start + column;
    const hide = new Set(this.heatmap.view.hide);
    hide.has(j) ? hide.delete(j) : hide.add(j);
    this.heatmap.change({ hide: [...hide].sort((a, b) => a - b) }, started);
  }

  key(event) {
    // A letter typed on the figure is the figure's: Streamlit's page-wide single keys ("r" reruns) do not hear it.
    if (event.key.length === 1 && event.key !== " " && !event.ctrlKey && !event.metaKey && !event.altKey) event.stopPropagation();
    const col = event.target.dataset ? event.target.dataset.col : undefined;
    if (col !== undefined && (event.key === "Enter" || event.key === " ") && maskRule(this.heatmap.view.mask).hides) {
      event.preventDefault();
      this.heatmap.focusCol = +col;
      return this.heatmap.toggleHidden(+col, event.timeStamp);
    }
    if (event.target !== this.heatmap.figure) return;
    const d = this.heatmap.data;
    const cursor = this.heatmap.cursorCell();
    if (event.key === "Enter" || event.key === " ") { // as a click on the focused cell
      event.preventDefault();
      const patch = "key" in this.heatmap.view ? { query: d.row_start + cursor[0], key: d.col_start + cursor[1] } : { query: d.row_start + cursor[0] };
      return this.heatmap.change(patch, event.timeStamp);
    }
    const keys = { ArrowLeft: -1, ArrowRight: 1 };
    if (event.key in keys) { // the focused cell moves along the chosen query's row; the query stays
      event.preventDefault();
      this.heatmap.cursorCol = Math.min(d.m - 1, Math.max(0, cursor[1] + keys[event.key]));
      this.heatmap.drawOverlay();
      return this.heatmap.readCell();
    }
    const moves = { ArrowUp: -1, ArrowDown: 1, Home: -Infinity, End: Infinity, PageUp: -10, PageDown: 10 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    const first = d.row_start;
    const query = Math.min(first + d.n - 1, Math.max(first, this.heatmap.view.query + moves[event.key]));
    if (query !== this.heatmap.view.query) this.heatmap.change({ query }, event.timeStamp);
    this.heatmap.readCell();
  }
}
