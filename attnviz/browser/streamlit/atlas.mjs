// Streamlit's head-atlas component (appkit/interactive.py): a click is a trigger, one rerun.
import { mountAtlas } from "../atlas.mjs";
import { unwrapped } from "../streamlit.mjs";

export default (component) => mountAtlas(unwrapped(component));
