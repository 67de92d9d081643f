// Streamlit's heatmap component (appkit/interactive.py): a heatmap, Compare A | B, a matrix or bars, by its data.
import { mount } from "../figures.mjs";
import { awaiting, unwrapped, viewSender } from "../streamlit.mjs";

export default function mountHeatmap(sent) {
  const component = unwrapped(sent);
  mount({ ...component, data: { ...component.data, awaiting: awaiting(component.data) }, setStateValue: viewSender(component) });
}
