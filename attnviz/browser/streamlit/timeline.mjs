// Streamlit's generation-timeline component (appkit/interactive.py): it sends nothing back.
import { mountTimeline } from "../timeline.mjs";

export default mountTimeline;
