"""The app's own machinery, which app.py and the page scripts in pages/ import: the warm-up at server start
(`warm`), the heatmap's beacon (`beacon`), app-wide settings (`present`), the shared page helpers (`common`), the
browser components (`interactive`), the model server (`model`) and the parts the pages lay out (`explorer`,
`model_page`, `model_views`, `effects_panel`, and the Lesson's steps in `lesson`). It imports streamlit; the library,
attnviz, never does. Streamlit puts app.py's folder on sys.path, where this package then resolves."""
