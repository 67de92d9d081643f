// A whole document as text, each piece shaded by the weight one query gives it (figures.long.document_data): to read
// a head's attention like a page rather than a matrix. Pieces are set as text (textContent), never as HTML. A click on
// a piece makes it the query (a trigger: one rerun); hover gives the piece's position and weight.

import { HIGHLIGHT, el, float32Of, mountOnce } from "./draw.mjs";

const PAGE = 50; // pieces a Page Up or Page Down moves

export class DocumentText {
  constructor(root) {
    this.root = root;
    root.classList.add("av-document");
    this.heading = root.appendChild(el("div", { class: "av-atlas-title" }));
    // The keyboard's way in: the text takes focus, the arrows move a piece at a time, Page Up and Down by PAGE, Home
    // and End to the ends; a polite live region reads the piece and its weight, and Enter makes it the query.
    this.body = root.appendChild(el("div", { class: "av-document-body", tabindex: "0", role: "application" }));
    this.live = root.appendChild(el("div", { class: "av-sr", "aria-live": "polite", "aria-atomic": "true" }));
    this.body.addEventListener("keydown", (e) => this.key(e));
    this.body.addEventListener("click", (e) => {
      const i = Number(e.target.dataset?.i);
      if (Number.isInteger(i) && this.setTriggerValue) this.setTriggerValue("query", i);
    });
  }

  key(event) {
    if (!this.spans || !this.spans.length) return;
    const last = this.spans.length - 1;
    const moves = { ArrowLeft: -1, ArrowUp: -1, ArrowRight: 1, ArrowDown: 1, PageUp: -PAGE, PageDown: PAGE, Home: -Infinity, End: Infinity };
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      if (this.setTriggerValue) this.setTriggerValue("query", this.cursor);
      return;
    }
    if (!(event.key in moves)) {
      if (event.key.length === 1 && !event.ctrlKey && !event.metaKey) event.stopPropagation(); // no page-wide letter keys
      return;
    }
    event.preventDefault();
    this.moveTo(Math.min(last, Math.max(0, this.cursor + moves[event.key])));
  }

  /** The keyboard's piece: outlined, scrolled into view, and read. */
  moveTo(i) {
    if (this.spans[this.cursor]) this.spans[this.cursor].classList.remove("av-cursor-piece");
    this.cursor = i;
    const span = this.spans[i];
    span.classList.add("av-cursor-piece");
    span.scrollIntoView({ block: "nearest" });
    const text = span.textContent.trim() || "part of the character before it";
    this.live.textContent = `piece ${i} of ${this.spans.length}, “${text}”, weight ${this.weights[i].toPrecision(3)}`;
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
      const alpha = Math.min(1, weights[i] / data.largest);
      span.style.background = `rgba(68, 1, 84, ${alpha.toFixed(3)})`;
      if (alpha > 0.5) span.style.color = "#ffffff";
      if (i === data.query) span.style.outline = `2px solid ${HIGHLIGHT}`;
      return span;
    });
    this.body.replaceChildren(...spans);
    this.body.setAttribute("aria-label", `${data.title}: ${spans.length} pieces, each shaded by its weight. Arrow keys `
      + "read the pieces one by one, Page Up and Page Down move by " + PAGE + ", Enter makes a piece the query.");
    this.spans = spans;
    this.weights = weights;
    this.cursor = Math.min(Math.max(0, data.query), spans.length - 1);
    this.root.attnviz = { query: data.query, pieces: spans.length, weight: (i) => weights[i] };
  }
}

/** Mount the document into component.parentElement for component.data; a click on a piece calls
 * component.setTriggerValue("query", i). */
export function mountDocument({ data, parentElement, setTriggerValue }) {
  mountOnce(parentElement, "av-document-host", DocumentText).load(data, setTriggerValue);
}
