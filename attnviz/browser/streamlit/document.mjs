// Streamlit's shaded-document component (appkit/interactive.py): a click on a piece is a trigger, one rerun.
import { mountDocument } from "../document.mjs";
import { unwrapped } from "../streamlit.mjs";

export default (component) => mountDocument(unwrapped(component));
