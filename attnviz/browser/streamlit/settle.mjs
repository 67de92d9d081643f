// Streamlit's settle component (appkit/interactive.py's catch_up): the whole page's run, asked once the person pauses.
import { mountSettle } from "../settle.mjs";
import { unwrapped } from "../streamlit.mjs";

export default (component) => mountSettle(unwrapped(component));
