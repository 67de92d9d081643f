// Streamlit's routes component (pages/_interactive.py): the threshold is a state value, an edge's head a trigger.
import { mountRoutes } from "../routes.mjs";

export default mountRoutes;
