// Streamlit's routes component (appkit/interactive.py): the threshold is a state value, an edge's head a trigger.
import { mountRoutes } from "../routes.mjs";
import { unwrapped } from "../streamlit.mjs";

export default (component) => mountRoutes(unwrapped(component));
