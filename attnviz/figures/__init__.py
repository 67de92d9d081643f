"""Plotly figure builders and the browser figures' data: arrays in, a go.Figure (or a dict) out. No streamlit here.

Tokens may repeat ("his" twice), so axes are numeric positions with the tokens as tick text, and user text is
HTML-escaped because plotly renders a subset of HTML tags in labels and hovers. By concern:

- layout: palettes, colour scales, the screen and its label sizes, axes, margins (every figure uses it);
- matrices: attention heatmaps, grids of heads, B − A, block overviews, any labelled matrix;
- heads: a model's heads (the atlas, layers × heads summaries, the line view, the query–key space, a score
  taken apart);
- charts: the retrieval and pooling pages' charts.

Every name is also here, so `from attnviz import figures; figures.attention_heatmap(...)` reads as before.
"""

from __future__ import annotations

from attnviz.figures.layout import (  # noqa: F401
    PALETTES, DIVERGING, OOV_MARK, SCALES, PLOT_PX, LABEL_PX, PRESENTER_PLOT_PX, PRESENTER_LABEL_PX, ALL_LABELS,
    Screen, LAPTOP, PRESENTER, _screen, set_presenter, label_px, TICK_CHARS, CLICK_LIMIT, CLICK_MARKER, labels,
    positions, _short, _finite, _axis, _keys_axis, _rows_axis, grow_to_labels, _side, _colorbar, FONT_PX,
    TITLE_FONT_PX, COLORBAR_NUMBER_CHARS, AXIS_NUMBER_CHARS, LABELS_GAP, TITLE_GAP, COLORBAR_PAD, THEME_PAD_PX,
    text_px, _title_px, _axis_px, _ticks_px, _colorbar_px, fit_margins, ColourScale, colour_scale, palette_stops,
    _scale_stops, dims,
)
from attnviz.figures.matrices import (  # noqa: F401
    _weights_trace, MASKED_GREY, _masked_trace, _click_layer, _token_axes, attention_heatmap, interactive_heatmap,
    matrix_data, interactive_comparison, head_grid, panel_grid, difference_heatmap, block_max, block_overview, matrix_heatmap,
)
from attnviz.figures.heads import (  # noqa: F401
    score_parts, HEAD_COLOURS, LINE_ROW_PX, line_view, FADED, _add_lines, qk_space, ATLAS_BLOCKS, ATLAS_TILE_PX,
    ATLAS_HEIGHT_PX, _pick_layer, _outline, atlas_data, share_bars, layer_head_heatmap,
)
from attnviz.figures.effects import (  # noqa: F401
    ROUTE_FLOOR, ROUTE_THRESHOLDS, route_steps, routes_data, importance_data, effect_atlas_data,
)
from attnviz.figures.generation import timeline_data, payload_bytes  # noqa: F401
from attnviz.figures.charts import (  # noqa: F401
    bars_data, weight_bars, SCATTER_PLOT_PX, LABEL_PLACES, place_labels, pca_scatter, entropy_against_tau, bandwidth_training,
    pooling_regression, variance_against_d,
)
from attnviz.figures.classroom import quiz_figures  # noqa: F401,E402
