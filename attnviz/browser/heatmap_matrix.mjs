// Figures of final numbers drawn with the heatmap's own code, for a page that would otherwise redraw a plotly chart on
// every rerun (each cost the Decoder's "Next word" about 250 ms of the browser's time): Matrix, a matrix already
// computed (each head's row of weights, a mean per layer and head), with the heatmap's labels, colour bar, hover and
// PNG/SVG, without τ, masks, an inspector or clicks; and BarChart, labelled bars (the inspector's).

import { el, float32Of } from "./draw.mjs";
import { Heatmap } from "./heatmap.mjs";
import { bars } from "./heatmap_inspector.mjs";
import { chartFormat, formatG } from "./weights.mjs";

export class Matrix extends Heatmap {
  constructor(root) {
    super(root, { controls: [], inspector: false });
    root.classList.add("av-matrix"); // not a heatmap of scores: tests and benchmarks that read those pass it by
  }

  load(data, setStateValue) {
    this.setStateValue = setStateValue;
    const fresh = !this.data || this.data.version !== data.version;
    this.data = data;
    this.root.style.fontSize = `${data.font_px + 2}px`;
    if (fresh) {
      // (n, m) float32, drawn as they are: base64, or already numbers (a head cut out of a notebook's bundle)
      this.values = data.values instanceof Float32Array ? data.values : float32Of(data.values);
      this.drawnScores = this.values;
      this.view = { ...data.view };
      this.buildToolbar();
    }
    this.layout();
    this.recompute();
    this.draw();
  }

  recompute() {
    const cells = this.data.n * this.data.m;
    this.result = { weights: this.values, allowed: new Uint8Array(cells).fill(1), blocked: [], overflow: [], heads: [this.values] };
    this.full = this.result;
  }

  scale() {
    return this.view.scale;
  }

  what() {
    return this.data.title || "Values";
  }

  hoverLines(k) {
    return [`${this.data.what}: ${formatG(this.values[k], 4)}`];
  }

  click() {}

  key() {}
}

/** Labelled horizontal bars with a title and what the numbers are: the page's bars, drawn without plotly. */
export class BarChart {
  constructor(root) {
    this.root = root;
    root.classList.add("av-barchart");
  }

  load(data) {
    this.root.style.fontSize = `${data.font_px + 2}px`;
    const values = Array.from(float32Of(data.values));
    const format = chartFormat(values);
    const items = values.map((value, i) => ({ label: data.labels[i], value, text: format(value), highlight: i === data.highlight }));
    const heading = el("div", { class: "av-heading" }, data.title);
    const axis = el("div", { class: "av-bound" }, data.axis);
    this.root.replaceChildren(heading, bars(items), axis);
    this.root.attnvizBars = { title: data.title, labels: data.labels, values };
  }
}
