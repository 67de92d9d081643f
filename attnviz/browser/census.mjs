// The long-context head census as a map (attnviz.models.census, figures.long.census_data): layers × heads, each
// head's class as a letter on its class's colour, the thresholds live here (no round trip), the counts and the KV
// cache share said as they change. classify() applies the rules of Census.classify to the same numbers, in the same
// order. A head's cell opens its evidence on the page (a trigger); arrows move between heads, Enter opens one.

import { el, mountOnce } from "./draw.mjs";

export const COLOURS = { previous: "#cfe3f7", local: "#d6efd0", streaming: "#fde2b8", retrieval: "#f6cde3", dense: "#e4e4e4" };
export const LETTERS = { previous: "P", local: "L", streaming: "S", retrieval: "R", dense: "D" };

/** Each head's class (an index into data.classes), flat, layer by layer, under `rules`. */
export function classify(data, rules) {
  const f = data.fields, index = (name) => data.classes.indexOf(name);
  return f.sink.map((_, k) => {
    if (f.previous[k] >= rules.previous) return index("previous");
    if (f.local[k] >= rules.local) return index("local");
    if (data.wu && data.wu[k] >= rules.wu) return index("retrieval");
    if (f.sink[k] + f.recent[k] >= rules.streaming) return index("streaming");
    if (f.distant[k] >= rules.retrieval && f.entropy[k] <= rules.focus) return index("retrieval");
    return index("dense");
  });
}

/** The share of a full KV cache the document needs (Census.cache_share): a key/value head keeps what the largest of
 * its query heads needs, a head that reads all of it all n pieces. */
export function cacheShare(data, rules, classes) {
  const n = data.n, keeps = { previous: Math.min(n, 2), local: Math.min(n, rules.local_span),
                              streaming: Math.min(n, rules.sinks + rules.recent) };
  let total = 0, count = 0;
  for (let start = 0; start < classes.length; start += data.kv_group) {
    let most = 0;
    for (let k = start; k < start + data.kv_group; k++) most = Math.max(most, keeps[data.classes[classes[k]]] ?? n);
    total += most;
    count += 1;
  }
  return total / (count * n);
}

/** What the counts mean, in words (Census.sentence's first parts). */
export function said(data, rules, classes) {
  const counts = data.classes.map((_, i) => classes.filter((c) => c === i).length);
  const parts = data.classes.map((_, i) => `${counts[i].toLocaleString("en-US")} ${data.names[i]}`).join(", ");
  const short = ["previous", "local", "streaming"].reduce((s, name) => s + counts[data.classes.indexOf(name)], 0);
  const share = Math.round(100 * cacheShare(data, rules, classes));
  return `Of the ${classes.length.toLocaleString("en-US")} heads: ${parts}. ${short.toLocaleString("en-US")} read no `
    + `further than a window and the first pieces; with every key/value head whose heads all do so keeping only those, `
    + `this document's KV cache would be ${share}% of its full size.`;
}

// The thresholds a person moves: [rule, label, min, max, step, format]
const SLIDERS = [
  ["previous", "previous-piece: share on the piece before at least", 0, 1, 0.01, (v) => `${Math.round(v * 100)}%`],
  ["local", "local: share within the local span at least", 0, 1, 0.01, (v) => `${Math.round(v * 100)}%`],
  ["streaming", "streaming: share on the sinks and the window at least", 0, 1, 0.01, (v) => `${Math.round(v * 100)}%`],
  ["retrieval", "retrieval: distant share at least", 0, 1, 0.01, (v) => `${Math.round(v * 100)}%`],
  ["focus", "retrieval: mean entropy at most (nats)", 0, 10, 0.1, (v) => v.toFixed(1)],
  ["wu", "retrieval: Wu et al.'s score at least", 0, 1, 0.01, (v) => v.toFixed(2)],
];

export class CensusMap {
  constructor(root) {
    this.root = root;
    root.classList.add("av-census");
    this.heading = root.appendChild(el("div", { class: "av-atlas-title" }));
    this.controls = root.appendChild(el("div", { class: "av-census-controls" }));
    this.summary = root.appendChild(el("p", { class: "av-census-said", role: "status", "aria-live": "polite" }));
    this.legend = root.appendChild(el("p", { class: "av-census-legend" }));
    this.wrap = root.appendChild(el("div", { class: "av-census-wrap" }));
    this.table = this.wrap.appendChild(el("table", { class: "av-census-map" }));
    this.focused = [0, 0];
  }

  load(data, setTriggerValue) {
    this.setTriggerValue = setTriggerValue;
    const fresh = !this.data || this.data.title !== data.title || this.data.fields.sink.length !== data.fields.sink.length;
    this.data = data;
    this.root.style.fontSize = `${data.font_px + 2}px`;
    this.heading.textContent = data.title;
    if (fresh || !this.rules) {
      this.rules = { ...data.rules };
      this.focused = [...data.chosen];
      this.buildControls();
      this.buildTable();
    }
    this.chosen = data.chosen;
    this.draw();
  }

  buildControls() {
    this.controls.replaceChildren();
    this.outputs = {};
    for (const [rule, label, min, max, step, format] of SLIDERS) {
      if (rule === "wu" && !this.data.wu) continue;
      const row = this.controls.appendChild(el("label", { class: "av-census-control" }));
      row.appendChild(document.createTextNode(`${label} `));
      const slider = row.appendChild(el("input", { type: "range", min: String(min), max: String(max), step: String(step) }));
      slider.value = String(this.rules[rule]);
      const shown = row.appendChild(el("output", {}, format(this.rules[rule])));
      slider.setAttribute("aria-valuetext", format(this.rules[rule]));
      slider.addEventListener("input", () => {
        this.rules[rule] = Number(slider.value);
        shown.textContent = format(this.rules[rule]);
        slider.setAttribute("aria-valuetext", format(this.rules[rule]));
        this.draw();
      });
      this.outputs[rule] = slider;
    }
  }

  buildTable() {
    const d = this.data;
    this.table.replaceChildren();
    this.table.appendChild(el("caption", {}, `${d.title}: each cell a head, its class's letter on its colour`));
    const head = this.table.appendChild(el("thead")).appendChild(el("tr"));
    head.appendChild(el("th", { scope: "col" }, "layer"));
    for (let h = 0; h < d.heads; h++) head.appendChild(el("th", { scope: "col" }, `H${h + d.base}`));
    const body = this.table.appendChild(el("tbody"));
    this.cells = [];
    for (let l = 0; l < d.layers; l++) {
      const row = body.appendChild(el("tr"));
      row.appendChild(el("th", { scope: "row" }, `L${l + d.base}`));
      const cells = [];
      for (let h = 0; h < d.heads; h++) {
        const cell = row.appendChild(el("td", d.openable === false ? { tabindex: "-1" } : { tabindex: "-1", role: "button" }));
        cell.addEventListener("click", () => this.open(l, h));
        cell.addEventListener("keydown", (event) => this.key(event, l, h));
        cell.addEventListener("focus", () => (this.focused = [l, h]));
        cells.push(cell);
      }
      this.cells.push(cells);
    }
  }

  draw() {
    const d = this.data, classes = classify(d, this.rules);
    this.classes = classes;
    const percent = (v) => `${Math.round(v * 100)}%`;
    for (let l = 0; l < d.layers; l++) {
      for (let h = 0; h < d.heads; h++) {
        const k = l * d.heads + h, name = d.classes[classes[k]], f = d.fields;
        const cell = this.cells[l][h];
        cell.textContent = LETTERS[name];
        cell.style.background = COLOURS[name];
        const wu = d.wu ? `, Wu et al.'s score ${d.wu[k].toFixed(2)}` : "";
        cell.setAttribute("aria-label", `layer ${l + d.base}, head ${h + d.base}: ${d.names[classes[k]]}; sinks and `
          + `window ${percent(f.sink[k] + f.recent[k])}, distant ${percent(f.distant[k])}, previous piece `
          + `${percent(f.previous[k])}, entropy ${f.entropy[k].toFixed(1)} nats${wu}`);
        cell.title = cell.getAttribute("aria-label");
        const chosen = d.openable !== false && l === this.chosen[0] && h === this.chosen[1];  // a page's open head
        cell.classList.toggle("av-census-chosen", chosen);
        cell.tabIndex = l === this.focused[0] && h === this.focused[1] ? 0 : -1;
      }
    }
    this.legend.textContent = d.classes.map((name, i) => `${LETTERS[name]} ${d.names[i]}`).join(" · ");
    this.summary.textContent = said(d, this.rules, classes);
    this.root.attnvizCensus = { rules: { ...this.rules }, classes: [...classes], said: this.summary.textContent };
  }

  key(event, l, h) {
    const d = this.data, moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      this.open(l, h);
      return;
    }
    const move = moves[event.key] || (event.key === "Home" ? [0, -h] : event.key === "End" ? [0, d.heads - 1 - h] : null);
    if (!move) return;
    event.preventDefault();
    const to = [Math.max(0, Math.min(d.layers - 1, l + move[0])), Math.max(0, Math.min(d.heads - 1, h + move[1]))];
    this.cells[l][h].tabIndex = -1;
    this.focused = to;
    const cell = this.cells[to[0]][to[1]];
    cell.tabIndex = 0;
    cell.focus();
  }

  open(l, h) {
    if (this.setTriggerValue && this.data.openable !== false) this.setTriggerValue("head", [l, h]);
  }
}

export function mountCensus({ data, parentElement, setTriggerValue }) {
  mountOnce(parentElement, "av-census-host", CensusMap).load(data, setTriggerValue);
}
