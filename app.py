import streamlit as st

st.set_page_config(page_title="attnviz", layout="wide")
pages = [
    st.Page("pages/self_attention.py", title="Self-attention", icon=":material/grid_on:", default=True),
    st.Page("pages/kv_database.py", title="Key–value database", icon=":material/database:"),
]
st.navigation(pages).run()
