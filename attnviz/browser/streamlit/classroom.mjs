// Streamlit's class component (appkit/classroom.py): a student's page asks for one rerun when the class moves to a
// new step or sentence; everything else runs in the page.
import { mountClass } from "../classroom.mjs";
import { unwrapped } from "../streamlit.mjs";

export default (component) => mountClass(unwrapped(component));
