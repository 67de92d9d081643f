"""What app.py's navigation needs on every run, made once: the tab's icon, and a session's pages.

A run of 30 sessions at once is a queue for one interpreter lock, and each file-system call in a run hands the lock
on and waits for it back. `st.Page` resolves its script's path (one call per folder, and one more to check the file)
and `set_page_config` read the icon's file on every run: about 60 such calls before a page's first element."""

import base64
from pathlib import Path

import streamlit as st

# A data URL: Streamlit passes it to the browser as it is, reading no file and registering no media per run; the icon
# is a file of ours, as a page's :material/ icon would be fetched from a font server as the favicon.
FAVICON = "data:image/png;base64," + base64.b64encode(
    (Path(__file__).resolve().parents[1] / "favicon.png").read_bytes()).decode("ascii")

_PAGES = "_attnviz_pages"  # session state: this session's st.Page objects


def session_pages(make) -> list:
    """make()'s pages, made on a session's first run and kept for its later runs (a session's runs never overlap,
    and st.navigation marks only the page it runs)."""
    if _PAGES not in st.session_state:
        st.session_state[_PAGES] = make()
    return st.session_state[_PAGES]
