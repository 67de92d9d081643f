// Streamlit's announce component (appkit/interactive.py's announce): a new step said and its heading focused.
import { mountAnnounce } from "../announce.mjs";
import { unwrapped } from "../streamlit.mjs";

export default (component) => mountAnnounce(unwrapped(component));
