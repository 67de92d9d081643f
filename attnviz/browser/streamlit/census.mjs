// Streamlit's census map component (appkit/interactive.py): a head's cell is a trigger.
import { mountCensus } from "../census.mjs";
import { unwrapped } from "../streamlit.mjs";

export default (component) => mountCensus(unwrapped(component));
