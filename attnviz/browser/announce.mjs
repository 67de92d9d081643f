// A page's new place, said and focused: when `data.place` changes (the Lesson's step), the page's heading that starts
// with `data.heading` takes focus (tabindex -1, so Tab order is unchanged) and a polite live region reads
// `data.said`. The first mount of a page says nothing and moves nothing: a fresh page is read from its top.
// Every page mounts it (without a place) for what its own elements lack: a formula wider than its column scrolls
// sideways, and such a block takes focus, so the keyboard can scroll it (WCAG 2.1.1).

const LAST = new Map(); // data.scope → the place last announced (per page of the tab)

/** Mount into component.parentElement for component.data ({scope, place, heading, said}); returns nothing to undo. */
export function mountAnnounce({ data, parentElement }, doc = globalThis.document) {
  watchScrollers(doc);
  if (data.place === undefined || data.place === null) return;
  let region = parentElement.querySelector(".av-sr");
  if (!region) {
    region = parentElement.appendChild(doc.createElement("div"));
    region.className = "av-sr";
    region.setAttribute("aria-live", "polite");
    region.setAttribute("aria-atomic", "true");
  }
  const last = LAST.get(data.scope);
  LAST.set(data.scope, data.place);
  if (last === undefined || last === data.place) return;
  region.textContent = data.said;
  const heading = [...doc.querySelectorAll("h1, h2, h3")].find((h) => h.textContent.trim().startsWith(data.heading));
  if (!heading) return;
  heading.setAttribute("tabindex", "-1");
  const active = doc.activeElement;
  // A person typing or choosing in a control of the page keeps their focus; a click on Next or a key moves on.
  if (!active || active === doc.body || active.tagName === "BUTTON" || active.closest("[data-testid='stSelectbox']")) {
    heading.focus({ preventScroll: false });
  }
}

/** Formula blocks (KaTeX's) that scroll sideways take focus and a name; watched as the page changes. */
function watchScrollers(doc) {
  if (doc.attnvizScrollers || typeof MutationObserver === "undefined") return;
  let queued = false;
  const look = () => {
    queued = false;
    for (const block of doc.querySelectorAll(".katex-display")) {
      if (block.scrollWidth > block.clientWidth && !block.hasAttribute("tabindex")) {
        block.setAttribute("tabindex", "0");
        block.setAttribute("role", "region");
        block.setAttribute("aria-label", "Formula, wider than its column: scroll it sideways");
      }
    }
  };
  doc.attnvizScrollers = new MutationObserver(() => {
    if (!queued) (queued = true) && requestAnimationFrame(look);
  });
  doc.attnvizScrollers.observe(doc.body, { childList: true, subtree: true });
  look();
}
