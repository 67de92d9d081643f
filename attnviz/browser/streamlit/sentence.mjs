// Streamlit's sentence box component (appkit/interactive.sentence_box): a new text is posted to the live heatmap, or
// is a trigger, one rerun.
import { mountSentence } from "../sentence.mjs";
import { unwrapped } from "../streamlit.mjs";

export default (component) => mountSentence(unwrapped(component));
