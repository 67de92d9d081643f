import streamlit as st
from starlette.middleware import Middleware

from appkit.beacon import ViewBeacon
from attnviz.classroom.http import ClassRoutes
from appkit.present import presenting, settings  # imported here, so before the warm-up's imports compete with it
from appkit.site import FAVICON, session_pages
from appkit.warm import lifespan, wait_for_imports, while_loading

if __name__ != "__main__":
    # `streamlit run app.py` imports this file to find this App and serves it; each session then runs the file as
    # its script (as __main__). The lifespan loads torch and GloVe in a thread as the server starts; the
    # middleware takes a heatmap's paused view without a page run (appkit/beacon), and serves a live class's state,
    # events and answers (attnviz.classroom.http).
    app = st.App(__file__, lifespan=lifespan, middleware=[Middleware(ViewBeacon), Middleware(ClassRoutes)])
else:
    st.set_page_config(page_title="attnviz", page_icon=FAVICON, layout="wide",
                       initial_sidebar_state="collapsed" if presenting() else "auto")
    pages = session_pages(lambda: [
        st.Page("pages/self_attention.py", title="Self-attention", icon=":material/grid_on:", default=True),
        st.Page("pages/lesson.py", title="Lesson", icon=":material/school:"),
        st.Page("pages/kv_database.py", title="Key–value database", icon=":material/database:"),
        st.Page("pages/pooling.py", title="Attention pooling", icon=":material/scatter_plot:"),
        st.Page("pages/scoring.py", title="Scoring functions", icon=":material/functions:"),
        st.Page("pages/encoder_decoder.py", title="Encoder–decoder", icon=":material/swap_horiz:"),
        st.Page("pages/batches.py", title="Batches", icon=":material/stacks:"),
        st.Page("pages/heads.py", title="Heads and layers", icon=":material/hub:"),
        st.Page("pages/trained.py", title="Trained model", icon=":material/model_training:"),
        st.Page("pages/decoder.py", title="Decoder", icon=":material/keyboard_double_arrow_right:"),
        st.Page("pages/long_text.py", title="Long text", icon=":material/article:"),
    ])
    navigation = st.navigation(pages)
    settings()
    with while_loading():
        wait_for_imports()
        navigation.run()
