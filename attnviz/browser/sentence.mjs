// The sentence box (appkit/interactive.sentence_box): a text committed as Streamlit's own text area commits it, with
// Ctrl+Enter (⌘+Enter) or by leaving the box changed. Where its data carries `post` (nothing the server drew but the
// live heatmap depends on the sentence), the box posts the text to the server (appkit/beacon), which answers with the
// heatmap's new raw scores; the box hands them to that heatmap and puts the link in the address bar: no page run.
// Else, or where the server answers that the page must run, the text goes to the host as a trigger (one rerun).
// The text is only ever a textarea's value.

import { el, mountOnce } from "./draw.mjs";

let boxes = 0;

export class SentenceBox {
  constructor(root) {
    this.root = root;
    root.classList.add("av-sentence");
    const id = `av-sentence-${++boxes}`;
    this.label = root.appendChild(el("label", { for: id, class: "av-sentence-label" }));
    this.box = root.appendChild(el("textarea", { id, class: "av-sentence-box" }));
    this.hint = root.appendChild(el("div", { class: "av-sentence-hint", "aria-live": "polite" }));
    this.sent = null; // the text the server last sent
    this.committed = null; // the text last committed here
    this.box.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        this.commit();
      }
    });
    this.box.addEventListener("blur", () => this.commit());
    this.box.addEventListener("input", () => this.showHint());
  }

  load(data, setTriggerValue) {
    this.data = data;
    this.setTriggerValue = setTriggerValue;
    this.label.textContent = data.label;
    this.box.title = data.help || "";
    this.box.maxLength = data.max_chars;
    this.box.style.height = `${data.height}px`;
    if (data.text !== this.sent) {
      this.sent = data.text;
      if (data.text !== this.committed) { // a text from elsewhere (a link, another control): shown
        this.box.value = data.text;
        this.committed = data.text;
      } // else the run for the text committed here: what was typed since stays
    }
    this.showHint();
  }

  showHint() {
    this.hint.textContent = this.box.value !== this.committed ? "Press Ctrl+Enter to apply" : "";
  }

  commit() {
    const text = this.box.value;
    if (text === this.committed) return;
    this.committed = text;
    this.showHint();
    const post = this.data.post;
    const heatmap = post && [...document.querySelectorAll(".av-heatmap")].find((root) => root.attnvizBeacon === post.token);
    if (!heatmap) return this.setTriggerValue("text", text);
    const search = window.location.search;
    fetch(post.url, { method: "POST", headers: { "Content-Type": "application/json" }, credentials: "same-origin",
      body: JSON.stringify({ token: post.token, text, search }) })
      .then((answer) => (answer.ok ? answer.json() : Promise.reject(answer.status)))
      .then((answer) => {
        if (this.committed !== text) return; // a later text was committed meanwhile: its answer counts
        if (!answer.data) return this.setTriggerValue("text", text); // the page draws more from it: one run
        if (window.location.search === search && answer.search !== search) {
          window.history.replaceState(window.history.state, "", window.location.pathname + answer.search + window.location.hash);
        }
        heatmap.attnvizSentence(answer.data);
      })
      .catch(() => this.setTriggerValue("text", text));
  }
}

/** Mount the box into component.parentElement for component.data. */
export function mountSentence({ data, parentElement, setTriggerValue }) {
  mountOnce(parentElement, "av-sentence-host", SentenceBox).load(data, setTriggerValue);
}
