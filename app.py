import streamlit as st

st.set_page_config(page_title="attnviz", layout="wide")
pages = [
    st.Page("pages/self_attention.py", title="Self-attention", icon=":material/grid_on:", default=True),
    st.Page("pages/kv_database.py", title="Key–value database", icon=":material/database:"),
    st.Page("pages/pooling.py", title="Attention pooling", icon=":material/scatter_plot:"),
    st.Page("pages/scoring.py", title="Scoring functions", icon=":material/functions:"),
]
st.navigation(pages).run()
