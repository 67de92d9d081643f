// Streamlit's head-atlas component (pages/_interactive.py): a click is a trigger, one rerun.
import { mountAtlas } from "../atlas.mjs";

export default mountAtlas;
