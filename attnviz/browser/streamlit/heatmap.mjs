// Streamlit's heatmap component (pages/_interactive.py): a heatmap, Compare A | B, a matrix or bars, by its data.
import { mount } from "../figures.mjs";
import { viewSender } from "../streamlit.mjs";

export default function mountHeatmap(component) {
  mount({ ...component, setStateValue: viewSender(component) });
}
