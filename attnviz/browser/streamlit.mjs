// Streamlit's host adapter: what a component sends back to Python. A heatmap whose data carries a `beacon` posts its
// paused view to the server (pages/_beacon.py) instead of rerunning the page, and puts the link the server answers in
// the address bar; without one, or if the post fails, the view goes back as a state value (one rerun).

/** The `setStateValue` a figure is given: component.setStateValue, or for "view" under a beacon, the post. */
export function viewSender({ data, setStateValue }) {
  const beacon = data.beacon;
  if (!beacon) return setStateValue;
  return (name, value) => {
    if (name !== "view") return setStateValue(name, value);
    const body = JSON.stringify({ token: beacon.token, view: value, search: window.location.search });
    fetch(beacon.url, { method: "POST", headers: { "Content-Type": "application/json" }, body, credentials: "same-origin" })
      .then((answer) => (answer.ok ? answer.json() : Promise.reject(answer.status)))
      .then(({ search }) => {
        if (search === window.location.search) return;
        window.history.replaceState(window.history.state, "", window.location.pathname + search + window.location.hash);
      })
      .catch(() => setStateValue(name, value));
  };
}
