// A page drawn in two parts (pages/decoder.py): a click reruns its own part at once, and while the rest of the page
// still shows the text before it, this component says so and asks for one run of the whole page once the person
// pauses: no pointer press and no key for `pause_ms`. Each press or key starts the wait again.

const EVENTS = ["pointerdown", "keydown"];
const CAPTURE = { capture: true }; // heard before the page's own handlers, which may stop the event

/** Mount into component.parentElement for component.data ({token, pause_ms, note}); after the pause,
 * component.setTriggerValue("settled", token). The returned cleanup (on unmount) cancels the wait. */
export function mountSettle({ data, parentElement, setTriggerValue }, doc = globalThis.document) {
  const state = parentElement.attnvizSettle || (parentElement.attnvizSettle = { timer: null, restart: null });
  const stop = () => {
    clearTimeout(state.timer);
    if (state.restart) for (const name of EVENTS) doc.removeEventListener(name, state.restart, CAPTURE);
    state.restart = null;
  };
  stop();
  const restart = () => {
    clearTimeout(state.timer);
    state.timer = setTimeout(() => {
      stop(); // asked once: the run it starts mounts this again if the page is still behind
      setTriggerValue("settled", data.token);
    }, data.pause_ms);
  };
  state.restart = restart;
  for (const name of EVENTS) doc.addEventListener(name, restart, CAPTURE);
  parentElement.classList.add("av-settle"); // a caption's look, set here: this component carries no style sheet
  Object.assign(parentElement.style, { fontSize: "0.875rem", opacity: "0.7" });
  parentElement.textContent = data.note;
  restart();
  return stop;
}
