// The interactive heatmap (heatmap.mjs), its export part: a part that the Heatmap (heatmap.mjs) owns.
// Exports, built in the page from what is drawn: the figure as PNG (3×) or SVG, its numbers as CSV or float32 .npy.

import { HIGHLIGHT, INK, MASKED_RGB, SVG_NS, el } from "./draw.mjs";
import { matrixCsv, npyFloat32 } from "./files.mjs";
import { SVG_CELLS } from "./heatmap_draw.mjs";
import { paletteColour } from "./weights.mjs";

export class Export {
  /** A part of `heatmap` (heatmap.mjs), which keeps the state and hands each call on to its part. */
  constructor(heatmap) {
    this.heatmap = heatmap;
  }

  /** The figure as one canvas at `scale`× (cells, colour bar, every text of the overlay). */
  render(scale) {
    const canvas = document.createElement("canvas");
    canvas.width = this.heatmap.width * scale;
    canvas.height = this.heatmap.data.height * scale;
    const ctx = canvas.getContext("2d");
    ctx.scale(scale, scale);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, this.heatmap.width, this.heatmap.data.height);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(this.heatmap.cellImage(), this.heatmap.plot.x, this.heatmap.plot.y, this.heatmap.plot.w, this.heatmap.plot.h);
    this.heatmap.drawColourBar(ctx);
    ctx.fillStyle = INK;
    for (const text of this.heatmap.svg.querySelectorAll("text")) {
      ctx.save();
      ctx.font = getComputedStyle(text).font || this.heatmap.font;
      const [x, y] = [+text.getAttribute("x"), +text.getAttribute("y")];
      ctx.textAlign = { end: "right", middle: "center" }[text.getAttribute("text-anchor")] || "left";
      ctx.textBaseline = text.getAttribute("dominant-baseline") === "central" ? "middle" : "alphabetic";
      ctx.translate(x, y);
      if (text.getAttribute("transform")) ctx.rotate(-Math.PI / 2);
      ctx.fillText(text.textContent, 0, 0);
      ctx.restore();
    }
    const outline = this.heatmap.svg.querySelector(".av-outline");
    if (outline) {
      ctx.strokeStyle = HIGHLIGHT;
      ctx.lineWidth = 2;
      ctx.strokeRect(+outline.getAttribute("x"), +outline.getAttribute("y"), +outline.getAttribute("width"), +outline.getAttribute("height"));
    }
    return canvas;
  }

  savePng() {
    this.heatmap.render(3).toBlob((blob) => this.heatmap.save(blob, "png"));
  }

  /** The figure as SVG: every cell a rect (an image above SVG_CELLS cells), the colour bar a gradient, the texts. */
  saveSvg() {
    const d = this.heatmap.data;
    const { plot } = this.heatmap;
    const svg = this.heatmap.svg.cloneNode(true);
    svg.setAttribute("xmlns", SVG_NS);
    const cells = el("svg:g", { class: "av-svg-cells" });
    if (d.n * d.m <= SVG_CELLS) {
      const stops = d.palettes[this.heatmap.view.palette];
      const [w, h] = [plot.w / d.m, plot.h / d.n];
      for (let k = 0; k < d.n * d.m; k++) {
        const rgb = this.heatmap.result.allowed[k] ? paletteColour(stops, this.heatmap.colours.shown[k] / this.heatmap.colours.zmax) : MASKED_RGB;
        const [i, j] = [Math.floor(k / d.m), k % d.m];
        cells.appendChild(el("svg:rect", { x: plot.x + j * w, y: plot.y + i * h, width: w + 0.05, height: h + 0.05,
          fill: `rgb(${rgb.join(",")})` }));
      }
    } else {
      cells.appendChild(el("svg:image", { x: plot.x, y: plot.y, width: plot.w, height: plot.h, preserveAspectRatio: "none",
        style: "image-rendering: pixelated", href: this.heatmap.cellImage().toDataURL("image/png") }));
    }
    const gradient = el("svg:linearGradient", { id: "av-bar", x1: "0", y1: "1", x2: "0", y2: "0" });
    for (const [position, rgb] of d.palettes[this.heatmap.view.palette]) {
      gradient.appendChild(el("svg:stop", { offset: String(position), "stop-color": `rgb(${rgb.join(",")})` }));
    }
    const defs = el("svg:defs");
    defs.appendChild(gradient);
    const bar = el("svg:rect", { x: plot.x + plot.w + 12, y: plot.y, width: 14, height: plot.h, fill: "url(#av-bar)" });
    svg.prepend(defs, cells, bar);
    svg.setAttribute("style", `font: ${this.heatmap.font}; fill: ${INK}`);
    this.heatmap.save(new Blob([new XMLSerializer().serializeToString(svg)], { type: "image/svg+xml" }), "svg");
  }

  /** The numbers drawn (n, m): the weights, their combination over heads where there are several, or the figure's
   * values; as CSV (`kind` "csv", each number as float32) or float32 .npy. Nothing where no weights exist (S/τ left
   * float32's range: the figure says so). */
  saveNumbers(kind) {
    const d = this.heatmap.data;
    if (this.heatmap.result.overflow.length && !this.heatmap.view.hard) return;
    const [rows, cols] = d.axes || ["query", "key"];
    const file = kind === "csv" ? matrixCsv(this.heatmap.result.weights, d.rows, d.cols, `${rows} \\ ${cols}`)
      : npyFloat32(this.heatmap.result.weights, d.n, d.m);
    this.heatmap.save(new Blob([file], { type: kind === "csv" ? "text/csv" : "application/octet-stream" }), kind);
  }

  save(blob, ext) {
    const link = el("a", { download: `${this.heatmap.data.file}.${ext}`, href: URL.createObjectURL(blob) });
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  }
}
