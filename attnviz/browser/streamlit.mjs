// Streamlit's host adapter: what a component sends back to Python. A heatmap whose data carries a `beacon` posts its
// paused view to the server (appkit/beacon.py) instead of rerunning the page, and puts the link the server answers in
// the address bar; without one, or if the post fails, the view goes back as a state value (one rerun).

/** The component's arguments, its data unwrapped: Python sends it as a one-item list (appkit/interactive.py's _mount). */
export function unwrapped(component) {
  return { ...component, data: component.data[0] };
}

const posts = new Map(); // beacon token → { flying: posts not yet answered, seq: the last answer's number }

/** Whether a view this heatmap posted is missing from the run that sent `data`: the post is still on its way, or
 * reached the server after that run had taken the views before it (its number is past data.beacon.taken). The
 * heatmap then keeps the view it shows (a person's change made just before a new sentence survives it). */
export function awaiting(data) {
  const sent = data.beacon && posts.get(data.beacon.token);
  return Boolean(sent) && (sent.flying > 0 || sent.seq > data.beacon.taken);
}

/** The `setStateValue` a figure is given: component.setStateValue, or for "view" under a beacon, the post. */
export function viewSender({ data, setStateValue }) {
  const beacon = data.beacon;
  if (!beacon) return setStateValue;
  if (!posts.has(beacon.token)) posts.set(beacon.token, { flying: 0, seq: 0 });
  const sent = posts.get(beacon.token);
  const post = (view) => {
    const search = window.location.search;
    const body = JSON.stringify({ token: beacon.token, view, search });
    sent.flying += 1;
    fetch(beacon.url, { method: "POST", headers: { "Content-Type": "application/json" }, body, credentials: "same-origin" })
      .then((answer) => (answer.ok ? answer.json() : Promise.reject(answer.status)))
      .then((answer) => {
        sent.seq = Math.max(sent.seq, answer.seq);
        if (window.location.search !== search) return post(view); // a run rewrote the link meanwhile: put it in that one
        if (answer.search === search) return;
        window.history.replaceState(window.history.state, "", window.location.pathname + answer.search + window.location.hash);
      })
      .catch(() => setStateValue("view", view))
      .finally(() => (sent.flying -= 1));
  };
  return (name, value) => (name === "view" ? post(value) : setStateValue(name, value));
}
