// Streamlit's head-atlas component (appkit/interactive.py): a click is a trigger, one rerun.
import { mountAtlas } from "../atlas.mjs";

export default mountAtlas;
