// Streamlit's generation-timeline component (pages/_interactive.py): it sends nothing back.
import { mountTimeline } from "../timeline.mjs";

export default mountTimeline;
