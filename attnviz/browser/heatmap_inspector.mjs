// The interactive heatmap (heatmap.mjs), its inspector part: a part that the Heatmap (heatmap.mjs) owns.
// The query inspector: the chosen query's weights as bars over the keys, and its entropy.

import { el, short } from "./draw.mjs";
import { chartFormat, entropy, formatG } from "./weights.mjs";

/** Horizontal bars, one per item {label, value, text, highlight}, each as long as its value against the largest: the
 * inspector's, and a chart of bars of their own (heatmap_matrix.mjs). Labels are set as text, never as HTML. */
export function bars(items) {
  const top = Math.max(1e-12, ...items.map((item) => item.value));
  const list = el("div", { class: "av-bars", role: "list" });
  for (const { label, value, text, highlight } of items) {
    const line = list.appendChild(el("div", { class: "av-bar-row", role: "listitem" }));
    line.appendChild(el("span", { class: "av-bar-label" }, label));
    const track = line.appendChild(el("span", { class: "av-bar-track" }));
    const bar = track.appendChild(el("span", { class: "av-bar" + (highlight ? " av-bar-highlight" : "") }));
    bar.style.width = `${(100 * Math.max(0, value)) / top}%`;
    line.appendChild(el("span", { class: "av-bar-value", title: formatG(value, 6) }, text)); // hover: more digits
  }
  return list;
}

export class Inspector {
  /** A part of `heatmap` (heatmap.mjs), which keeps the state and hands each call on to its part. */
  constructor(heatmap) {
    this.heatmap = heatmap;
  }

  drawInspector() {
    if (!this.heatmap.inspects) return this.heatmap.inspector.replaceChildren();
    const d = this.heatmap.data;
    const v = this.heatmap.view;
    const i = this.heatmap.row();
    const count = this.heatmap.keyCount(); // a window's query is inspected over every key of its row
    const [labels, start] = this.heatmap.windowed() ? [d.keys, 0] : [d.cols, d.col_start];
    const row = this.heatmap.full.weights.subarray(i * count, (i + 1) * count); // (M,)
    const allowed = this.heatmap.full.allowed.subarray(i * count, (i + 1) * count);
    let keys = [...Array(count).keys()];
    if (count > d.bars_limit) {
      keys = keys.sort((a, b) => row[b] - row[a] || a - b).slice(0, d.bars_limit).sort((a, b) => a - b);
    }
    const panel = el("div", { class: "av-panel" });
    panel.appendChild(el("div", { class: "av-heading" },
      `Query #${v.query} ${d.rows[i]}: ` + (count > d.bars_limit ? `its ${d.bars_limit} largest weights` : "its weights over the keys")));
    const format = chartFormat(keys.map((j) => row[j]));
    panel.appendChild(bars(keys.map((j) => ({ label: `#${start + j} ${short(labels[j], d.tick_chars)}`, value: row[j],
      text: allowed[j] ? format(row[j]) : "masked" }))));
    const keysAllowed = allowed.reduce((a, b) => a + b, 0);
    const facts = el("div", { class: "av-facts" });
    if (this.heatmap.over() === "max") {
      facts.appendChild(el("div", { class: "av-bound" }, "Rows need not sum to 1: each cell is its strongest head's weight, " +
        "so the row has no entropy to give."));
      panel.appendChild(facts);
      this.heatmap.inspector.replaceChildren(panel);
      return;
    }
    const h = entropy(row);
    facts.appendChild(el("div", { class: "av-entropy" }, `Entropy of the row: H = ${h.toFixed(3)} nats`));
    facts.appendChild(el("div", { class: "av-bound" },
      `H(α_i) = −Σ_j α_ij ln α_ij ≤ ln ${Math.max(keysAllowed, 1)} = ${Math.log(Math.max(keysAllowed, 1)).toFixed(3)} ` +
      "(0: all weight on one key; the bound: spread evenly over the allowed keys)"));
    panel.appendChild(facts);
    this.heatmap.inspector.replaceChildren(panel);
  }
}
