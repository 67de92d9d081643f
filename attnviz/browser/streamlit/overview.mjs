// Streamlit's overview component (appkit/interactive.py): a click or a dragged box is a trigger, one rerun.
import { mountOverview } from "../overview.mjs";
import { unwrapped } from "../streamlit.mjs";

export default (component) => mountOverview(unwrapped(component));
