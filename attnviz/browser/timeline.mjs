// The generation timeline: every step of a model's writing (attnviz.figures.timeline_data), sent once. Scrubbing,
// play and pause, and the head shown all run here with no round trip. Step s reads pieces 0 … P + s − 1 (P the
// prompt's) and writes piece P + s: the bars are what it offered (kept pieces blue, the chosen one orange), the rows
// are the query's weights in each head of one layer, the matrix is the chosen head's over the pieces so far, with the
// written pieces marked apart from the prompt.

import { HIGHLIGHT, INK, bytesOf, canvasContext, el, mountOnce } from "./draw.mjs";
import { paletteColour } from "./weights.mjs";

const KEPT = "#0072b2";
const DROPPED = "#c8c8c8";
const PLAY_MS = 600;

export class Timeline {
  constructor(root) {
    this.root = root;
    root.classList.add("av-timeline");
    this.heading = root.appendChild(el("div", { class: "av-atlas-title" }));
    const controls = root.appendChild(el("div", { class: "av-timeline-controls" }));
    this.play = controls.appendChild(el("button", { type: "button", "aria-label": "play" }, "▶ Play"));
    this.slider = controls.appendChild(el("input", { type: "range", min: "0", step: "1", "aria-label": "step" }));
    this.headPick = controls.appendChild(el("select", { "aria-label": "head" }));
    this.said = root.appendChild(el("div", { class: "av-timeline-said" }));
    this.text = root.appendChild(el("div", { class: "av-timeline-text" }));
    const panels = root.appendChild(el("div", { class: "av-timeline-panels" }));
    this.barsBox = panels.appendChild(el("div", { class: "av-atlas-figure" }));
    this.barsCaption = this.barsBox.appendChild(el("div", { class: "av-timeline-caption" }));
    this.bars = this.barsBox.appendChild(el("canvas", { class: "av-timeline-bars" }));
    this.rowsBox = panels.appendChild(el("div", { class: "av-atlas-figure" }));
    this.rowsCaption = this.rowsBox.appendChild(el("div", { class: "av-timeline-caption" }));
    this.rows = this.rowsBox.appendChild(el("canvas", { class: "av-timeline-rows" }));
    this.matrixBox = root.appendChild(el("div", { class: "av-atlas-figure" }));
    this.matrixCaption = this.matrixBox.appendChild(el("div", { class: "av-timeline-caption" }));
    this.matrix = this.matrixBox.appendChild(el("canvas", { class: "av-timeline-matrix" }));
    this.tip = root.appendChild(el("div", { class: "av-tip", role: "tooltip" }));
    this.slider.addEventListener("input", () => this.show(Number(this.slider.value)));
    this.headPick.addEventListener("change", () => {
      this.head = Number(this.headPick.value);
      this.draw();
    });
    this.play.addEventListener("click", () => (this.timer ? this.pause() : this.start()));
    for (const canvas of [this.rows, this.matrix]) {
      canvas.addEventListener("mousemove", (e) => this.hover(e, canvas));
      canvas.addEventListener("mouseleave", () => (this.tip.style.display = "none"));
    }
    this.resize = new ResizeObserver(() => this.data && this.draw());
    this.resize.observe(root);
  }

  load(data) {
    const fresh = !this.data || this.data.version !== data.version;
    this.data = data;
    if (fresh) this.unpack(data);
    this.root.style.fontSize = `${data.font_px + 2}px`;
    this.heading.textContent = data.title;
    this.slider.max = String(Math.max(0, data.steps.length - 1));
    if (fresh) {
      this.pause();
      this.step = 0;
      this.head = Math.min(data.head, data.heads - 1);
      this.headPick.replaceChildren(...Array.from({ length: data.heads }, (_, h) =>
        el("option", { value: String(h) }, `head ${h + data.base}`)));
      this.text.replaceChildren(...data.tokens.map((t, j) =>
        el("span", { class: j < data.prompt ? "av-prompt" : "av-written" }, t)));
    }
    this.headPick.value = String(this.head);
    this.show(this.step);
  }

  /** Keys a query at `query` reads: the pieces up to it, or with `cross`, every source piece. */
  keysOf(query) {
    return this.data.cross ? this.data.keys.length : query + 1;
  }

  keyLabel(j) {
    return this.data.cross ? this.data.keys[j] : this.data.tokens[j];
  }

  /** Whether key j is a piece the model wrote (the source's are not). */
  writtenKey(j) {
    return !this.data.cross && j >= this.data.prompt;
  }

  /** The sent weights (base64 uint16, head after head, rows first_row … n − 1 over keys 0 … i, or with `cross` over
   * every source piece) as
   * this.rowsOf[h][i] = Float32Array of row i's weights, views into one array. */
  unpack(d) {
    const bytes = bytesOf(d.weights);
    const values = new Uint16Array(bytes.buffer);
    const n = d.tokens.length;
    let at = 0;
    this.rowsOf = Array.from({ length: d.heads }, () => {
      const head = [];
      for (let i = d.first_row; i < n; i++) {
        const keys = d.cross ? d.keys.length : i + 1;
        head[i] = Float32Array.from(values.subarray(at, at + keys), (v) => v / 65535);
        at += keys;
      }
      return head;
    });
  }

  start() {
    if (this.step >= this.data.steps.length - 1) this.show(0);
    this.play.textContent = "❚❚ Pause";
    this.play.setAttribute("aria-label", "pause");
    this.timer = setInterval(() => {
      this.show(this.step + 1);
      if (this.step >= this.data.steps.length - 1) this.pause();
    }, PLAY_MS);
  }

  pause() {
    clearInterval(this.timer);
    this.timer = null;
    this.play.textContent = "▶ Play";
    this.play.setAttribute("aria-label", "play");
    if (this.root.attnvizTimeline) this.root.attnvizTimeline.playing = false;
  }

  show(step) {
    this.step = Math.max(0, Math.min(step, this.data.steps.length - 1));
    this.slider.value = String(this.step);
    this.draw();
  }

  draw() {
    const began = performance.now();
    const d = this.data, s = d.steps[this.step], query = d.prompt + this.step - 1, written = d.prompt + this.step;
    const chosen = d.tokens[written];
    this.text.childNodes.forEach((span, j) => {
      span.style.display = j <= written ? "" : "none";
      span.classList.toggle("av-now", j === written);
      span.classList.toggle("av-query", j === query);
    });
    const sink = this.sinkShare(query);
    this.said.textContent = `Step ${this.step + 1} of ${d.steps.length}: after “${d.tokens[query]}” the model writes ` +
      `“${chosen}” (p_T = ${s.p_chosen.toFixed(3)}${s.chosen_offered < 0 ? ", not among the bars" : ""}; ` +
      `P(drawn) = ${(s.p_drawn ?? s.p_chosen).toFixed(3)}). ` +
      `The first ${d.cross ? "source " : ""}piece's share of this query's weight, mean over layer ${d.layer + d.base}'s heads: ${sink.toFixed(2)}.`;
    this.drawBars(s);
    this.drawRows(query);
    this.drawMatrix(query);
    const ms = performance.now() - began;
    this.root.attnvizTimeline = { step: this.step, steps: d.steps.length, head: this.head, chosen, query,
      kept: s.kept_count, sink, playing: Boolean(this.timer), drawn_ms: ms };
  }

  sinkShare(query) {
    let total = 0;
    for (const head of this.rowsOf) total += head[query][0];
    return total / this.data.heads;
  }

  width(box) {
    return Math.max(260, Math.floor(box.clientWidth || (this.root.clientWidth || 700) / 2));
  }

  drawBars(s) {
    const d = this.data, font = d.font_px, row = font + 10;
    this.barsCaption.textContent = `Offered: p_T = softmax(z/T), before top-k and top-p (${d.sampler}); blue: kept ` +
      `(${s.kept_count} piece${s.kept_count === 1 ? "" : "s"} in all), orange: chosen`;
    const width = this.width(this.barsBox), height = row * s.offered.length + 6;
    const ctx = canvasContext(this.bars, this.bars, width, height);
    const left = Math.min(width * 0.35, font * 9), room = width - left - font * 4;
    const largest = Math.max(...s.probs, 1e-9);
    ctx.font = `${font}px sans-serif`;
    ctx.textBaseline = "middle";
    s.offered.forEach((label, k) => {
      const y = 3 + k * row;
      ctx.fillStyle = k === s.chosen_offered ? HIGHLIGHT : s.kept[k] ? KEPT : DROPPED;
      ctx.fillRect(left, y + 2, Math.max(1, room * s.probs[k] / largest), row - 4);
      ctx.fillStyle = INK;
      ctx.textAlign = "right";
      ctx.fillText(label, left - 6, y + row / 2, left - 8);
      ctx.textAlign = "left";
      ctx.fillText(s.probs[k].toFixed(3), left + room * s.probs[k] / largest + 4, y + row / 2);
    });
  }

  /** The CSS colour of `value` on a row whose largest is `largest`: one of 256 made once per palette. */
  cellColour(value, largest) {
    if (this.coloursOf !== this.data.palette) {
      this.coloursOf = this.data.palette;
      this.colours = Array.from({ length: 256 }, (_, v) => `rgb(${paletteColour(this.data.palette, v / 255).join(",")})`);
    }
    return this.colours[Math.round(255 * Math.min(1, Math.max(0, largest > 0 ? value / largest : 0)))];
  }

  drawRows(query) {
    const d = this.data, font = d.font_px, keys = this.keysOf(query);
    const what = d.cross ? "the source" : "the pieces so far";
    this.rowsCaption.textContent = `“${d.tokens[query]}” (#${query}) reads ${what}: layer ${d.layer + d.base}, each head's row ÷ its largest`;
    // Columns sized for the last step's keys: a key keeps its place while the steps are scrubbed.
    const width = this.width(this.rowsBox), left = font * 4, bottom = font * 4, cell = (width - left - 4) / this.keysOf(d.tokens.length - 1);
    const row = Math.max(8, Math.min(20, Math.floor(240 / d.heads)));
    const height = row * d.heads + bottom;
    const ctx = canvasContext(this.rows, this.rows, width, height);
    ctx.font = `${font}px sans-serif`;
    for (let h = 0; h < d.heads; h++) {
      const values = this.rowsOf[h][query];
      const largest = Math.max(...values);
      for (let j = 0; j < keys; j++) {
        ctx.fillStyle = this.cellColour(values[j], largest);
        ctx.fillRect(left + j * cell, h * row, Math.ceil(cell), row - 1);
      }
      if (h === this.head) {
        ctx.strokeStyle = HIGHLIGHT;
        ctx.strokeRect(left + 0.5, h * row + 0.5, cell * keys - 1, row - 2);
      }
      ctx.fillStyle = INK;
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      ctx.fillText(`H${h + d.base}`, left - 4, h * row + row / 2);
    }
    this.keyLabels(ctx, (j) => left + (j + 0.5) * cell, row * d.heads + 3, keys, cell);
    this.rowsLayout = { left, top: 0, cell, row, keys, heads: d.heads, query };
  }

  keyLabels(ctx, x, y, count, cell) {
    const d = this.data, every = Math.max(1, Math.ceil((d.font_px + 2) / cell));
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let j = 0; j < count; j++) {
      if (this.writtenKey(j)) {
        ctx.fillStyle = KEPT;
        ctx.fillRect(x(j) - cell / 2, y - 3, Math.max(1, cell - 1), 2);
      }
      if (j % every && j !== count - 1) continue;
      ctx.save();
      ctx.fillStyle = this.writtenKey(j) ? KEPT : INK;
      ctx.translate(x(j), y + 2);
      ctx.rotate(-Math.PI / 3);
      ctx.fillText(this.keyLabel(j), 0, 0, d.font_px * 6);
      ctx.restore();
    }
  }

  drawMatrix(query) {
    const d = this.data, font = d.font_px, n = query + 1, head = this.rowsOf[this.head], columns = this.keysOf(query);
    const over = d.cross ? `the ${columns} source pieces, ${n} written so far` : `the ${n} pieces so far`;
    this.matrixCaption.textContent = `Head ${this.head + d.base} of layer ${d.layer + d.base} over ${over}, ` +
      `each row ÷ its largest; blue marks: written by the model; orange: the query of this step`;
    const full = Math.max(320, Math.floor(this.matrixBox.clientWidth || this.root.clientWidth || 700));
    const left = font * 6, bottom = font * 5;
    const last = d.tokens.length; // sized for the last step: the canvas is never reallocated while scrubbing
    const across = this.keysOf(last - 1);
    const cell = Math.max(2, Math.min(28, Math.floor((Math.min(full, 720) - left) / Math.max(last, across))));
    const width = left + cell * across + 4, height = cell * last + bottom;
    const ctx = canvasContext(this.matrix, this.matrix, width, height);
    ctx.font = `${font}px sans-serif`;
    for (let i = 0; i < n; i++) {
      const values = head[i];
      if (!values) continue; // a long prompt's own rows are not sent, only the steps'
      const largest = Math.max(...values);
      for (let j = 0; j < values.length; j++) {
        ctx.fillStyle = this.cellColour(values[j], largest);
        ctx.fillRect(left + j * cell, i * cell, cell, cell);
      }
      const every = Math.max(1, Math.ceil((font + 2) / cell));
      if (i % every === 0 || i === query) {
        ctx.fillStyle = i >= d.prompt ? KEPT : INK;
        ctx.textAlign = "right";
        ctx.textBaseline = "middle";
        ctx.fillText(d.tokens[i], left - 6, i * cell + cell / 2, left - 8);
      }
      if (i >= d.prompt) {
        ctx.fillStyle = KEPT;
        ctx.fillRect(left - 4, i * cell, 2, Math.max(1, cell - 1));
      }
    }
    ctx.strokeStyle = HIGHLIGHT;
    ctx.lineWidth = 2;
    ctx.strokeRect(left + 1, query * cell + 1, cell * columns - 2, cell - 2);
    ctx.lineWidth = 1;
    this.keyLabels(ctx, (j) => left + (j + 0.5) * cell, cell * n + 4, columns, cell);
    this.matrixLayout = { left, top: 0, cell, row: cell, keys: columns, heads: n, query };
  }

  hover(event, canvas) {
    const layout = canvas === this.rows ? this.rowsLayout : this.matrixLayout;
    if (!layout) return;
    const box = canvas.getBoundingClientRect();
    const j = Math.floor((event.clientX - box.left - layout.left) / layout.cell);
    const r = Math.floor((event.clientY - box.top - layout.top) / layout.row);
    const d = this.data, t = d.tokens;
    if (j < 0 || j >= layout.keys || r < 0 || r >= layout.heads) {
      this.tip.style.display = "none";
      return;
    }
    const [head, query] = canvas === this.rows ? [r, layout.query] : [this.head, r];
    const values = this.rowsOf[head][query];
    if (!values || j >= this.keysOf(query)) {
      this.tip.style.display = "none";
      return;
    }
    const weight = values[j];
    this.tip.textContent = `layer ${d.layer + d.base}, head ${head + d.base}: “${t[query]}” (#${query}) → ` +
      `“${this.keyLabel(j)}” (#${j}${this.writtenKey(j) ? ", written" : d.cross ? " of the source" : ""}) weight ${weight.toFixed(4)}`;
    this.tip.style.display = "block";
    const root = this.root.getBoundingClientRect();
    this.tip.style.left = `${event.clientX - root.left + 12}px`;
    this.tip.style.top = `${event.clientY - root.top + 12}px`;
  }
}

export function mountTimeline({ data, parentElement }) {
  mountOnce(parentElement, "av-timeline-host", Timeline).load(data);
}
