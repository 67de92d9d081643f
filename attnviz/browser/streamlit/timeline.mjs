// Streamlit's generation-timeline component (appkit/interactive.py): it sends nothing back.
import { mountTimeline } from "../timeline.mjs";
import { unwrapped } from "../streamlit.mjs";

export default (component) => mountTimeline(unwrapped(component));
