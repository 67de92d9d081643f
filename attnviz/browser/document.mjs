// A whole document as text, each piece shaded by the weight one query gives it (figures.long.document_data): to read
// a head's attention like a page rather than a matrix. Pieces are set as text (textContent), never as HTML. A click on
// a piece makes it the query (a trigger: one rerun); hover gives the piece's position and weight.

import { HIGHLIGHT, el, float32Of, mountOnce } from "./draw.mjs";

export class DocumentText {
  constructor(root) {
    this.root = root;
    root.classList.add("av-document");
    this.heading = root.appendChild(el("div", { class: "av-atlas-title" }));
    this.body = root.appendChild(el("div", { class: "av-document-body" }));
    this.body.addEventListener("click", (e) => {
      const i = Number(e.target.dataset?.i);
      if (Number.isInteger(i) && this.setTriggerValue) this.setTriggerValue("query", i);
    });
  }

  load(data, setTriggerValue) {
    this.setTriggerValue = setTriggerValue;
    this.heading.textContent = data.title;
    const weights = float32Of(data.weights); // (n,) the query's weight on each piece
    const spans = data.pieces.map((piece, i) => {
      // A piece with no characters of its own (the second byte of a character split in pieces, as Chinese text is)
      // still gets a place to click: a thin mark, its title saying whose character it shares.
      const title = `#${i}: weight ${weights[i].toPrecision(3)}${piece ? "" : " (part of the character before it)"}`;
      const span = el("span", { "data-i": String(i), title, class: piece ? "" : "av-piece-part" }, piece);
      const alpha = Math.min(1, weights[i] / data.top);
      span.style.background = `rgba(68, 1, 84, ${alpha.toFixed(3)})`;
      if (alpha > 0.5) span.style.color = "#ffffff";
      if (i === data.query) span.style.outline = `2px solid ${HIGHLIGHT}`;
      return span;
    });
    this.body.replaceChildren(...spans);
    this.root.attnviz = { query: data.query, pieces: spans.length, weight: (i) => weights[i] };
  }
}

/** Mount the document into component.parentElement for component.data; a click on a piece calls
 * component.setTriggerValue("query", i). */
export function mountDocument({ data, parentElement, setTriggerValue }) {
  mountOnce(parentElement, "av-document-host", DocumentText).load(data, setTriggerValue);
}
