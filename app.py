import streamlit as st

st.set_page_config(page_title="attnviz", layout="wide")
pages = [
    st.Page("pages/self_attention.py", title="Self-attention", icon=":material/grid_on:", default=True),
]
st.navigation(pages).run()
