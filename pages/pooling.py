"""Attention pooling lab: Nadaraya–Watson regression (GPA → salary) and classification, live."""

import time

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from attnviz.functional import pick_device
from attnviz.figures import SCALES, attention_heatmap, bandwidth_training, pooling_regression
from attnviz.pooling import KERNELS, TRUE_FUNCTIONS, BandwidthFit, blobs, classify, fit_bandwidth, nadaraya_watson, salary_data
from attnviz.urlstate import Param, boolean, choice, encode_bool, int_range, nearest
from appkit.common import load_url_state, save_url_state, scale_select
from attnviz.export import Matrix
from appkit.present import chart

BANDWIDTHS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0]
SCHEMA = {
    "n": Param(40, int_range(2, 400)),
    "noise": Param(3000, int_range(0, 20000, step=500)),
    "f": Param("saturating", choice(TRUE_FUNCTIONS)),
    "seed": Param(0, int_range(0, 2**31 - 1)),
    "kernel": Param("gaussian", choice(KERNELS)),
    "bw": Param(0.1, nearest(BANDWIDTHS)),
    "pick": Param(3.0, nearest([round(2 + 0.05 * i, 2) for i in range(41)])),
    "csigma": Param(0.5, nearest(BANDWIDTHS)),
    "chard": Param(False, boolean, encode_bool),
    "scale": Param("row", choice(SCALES)),
}
KERNEL_FORMULAS = {
    "gaussian": r"\alpha(q, x_j) = \mathrm{softmax}_j\!\left(-\frac{(q - x_j)^2}{2\sigma^2}\right)",
    "boxcar": r"\alpha(q, x_j) = \frac{[\,|q - x_j| \le h\,]}{\sum_l [\,|q - x_l| \le h\,]}",
    "epanechnikov": r"\alpha(q, x_j) = \frac{\max(0, 1 - u_j^2)}{\sum_l \max(0, 1 - u_l^2)},\ u_j = \frac{q - x_j}{h}",
    "scaled_dot": r"\alpha(q, x_j) = \mathrm{softmax}_j\!\left(\frac{q\,x_j}{\sqrt{1}\,\tau}\right),\ \tau = h",
}


FIT_STEPS = 150
FIT_SECONDS = 4.0  # the live fit is drawn over about this long, so a class can watch σ move
FITS_KEPT = 8  # finished fits a session keeps (150 numbers each), one per data setting


def learn_bandwidth_live(x, y, where) -> BandwidthFit:
    """Fit σ, drawing the loss and σ curves and a progress bar as it goes (one frame every few steps)."""
    progress, frame = where.progress(0.0, text="Adam step 0"), where.empty()
    every = 5
    pause = FIT_SECONDS / (FIT_STEPS / every)

    def draw(step, losses, sigmas):
        if step % every == 0 or step == FIT_STEPS:
            progress.progress(step / FIT_STEPS, text=f"Adam step {step} of {FIT_STEPS}: σ = {sigmas[-1]:.4f}, loss {losses[-1]:.4f}")
            chart(frame, bandwidth_training(losses, sigmas, FIT_STEPS), key=f"fit_live_{step}")
            time.sleep(pause)

    fit = fit_bandwidth(x, y, steps=FIT_STEPS, device=pick_device(), on_step=draw)
    progress.empty()
    frame.empty()
    return fit


st.title("Attention pooling")
st.write("Attention does regression and classification with no training: the keys are the training inputs, "
         "the values their labels, and a query is a new point. Its prediction is the weighted mean of the values.")
st.latex(r"\hat f(q) = \sum_{j=1}^{n} \alpha(q, x_j)\, y_j")
load_url_state(SCHEMA)

st.header("Regression: GPA → starting salary")
with st.sidebar:
    st.header("Data")
    st.slider("n training points", 2, 400, key="n")
    st.slider("Noise (salary std)", 0, 20000, step=500, key="noise")
    st.selectbox("True function", list(TRUE_FUNCTIONS), key="f")
    st.number_input("Seed", 0, 2**31 - 1, key="seed")
    st.header("Pooling")
    kernel = st.selectbox("Kernel", KERNELS, key="kernel", help="gaussian is softmax attention with score −(q−k)²/2σ².")
    st.select_slider("Bandwidth σ / h (log scale)", BANDWIDTHS, key="bw")
    scale_select(st)
state = st.session_state
x, y = salary_data(state.n, state.noise, state.f, state.seed)
grid = np.linspace(2.0, 4.0, 201)
fitted, weights = nadaraya_watson(grid, x, y, kernel, state.bw)
st.latex(KERNEL_FORMULAS[kernel] + (r",\ \sigma = %g" if kernel == "gaussian" else r",\ h = %g") % state.bw)
query = st.select_slider("Inspect the query at GPA", [round(2 + 0.05 * i, 2) for i in range(41)], key="pick",
                         help="The training points are drawn with size proportional to this query's weights.")
prediction, query_weights = nadaraya_watson(np.array([query]), x, y, kernel, state.bw)
empty = ~np.isfinite(fitted) | (weights.sum(1) == 0)
fitted = np.where(empty, np.nan, fitted)  # (G,) no prediction: not drawn
chart(st, pooling_regression(x, y, grid, fitted, TRUE_FUNCTIONS[state.f](grid), query, prediction[0], query_weights[0]),
      key="regression")
if empty.any():
    st.info(f"{int(empty.sum())} of {len(grid)} grid queries have no training point within the {kernel} kernel's reach, so they have no prediction (not drawn).")

sub = slice(None, None, 8)
query_gpas, train_gpas = [f"{g:.2f}" for g in grid[sub]], [f"{v:.2f}" for v in x]
chart(st, attention_heatmap(weights[sub], query_gpas, train_gpas, title="Weights: query GPAs × training GPAs", scale=state.scale),
      key="weights", matrix=Matrix(weights[sub], query_gpas, train_gpas, corner="query GPA \\ training GPA"))
st.caption("Rows: every 8th query GPA of the curve above. Columns: the training points' GPAs, in the order drawn.")

st.subheader("Learning the Gaussian kernel's σ (parametric attention pooling)")
st.write("Instead of picking σ by hand, learn it: gradient descent (Adam on log σ) lowers the leave-one-out loss, each "
         "training point predicted from all the others.")
if kernel != "gaussian":
    st.info(f"This learns the Gaussian kernel's σ, whatever the kernel above: the {kernel} kernel's weights jump where a "
            "point enters or leaves its reach, so its loss has no gradient to follow.")
st.latex(r"\mathcal{L}(\sigma) = \frac{1}{n}\sum_i \Big(y_i - \sum_{j \ne i} \alpha_\sigma(x_i, x_j)\, y_j\Big)^2")
fits = st.session_state.setdefault("_bandwidth_fits", {})  # (n, noise, f, seed) → the finished fit
data_key = (state.n, state.noise, state.f, state.seed)
left, right = st.columns([2, 1])
if right.button("Learn σ again" if data_key in fits else "Learn σ", icon=":material/play_arrow:", key="fit",
                help=f"{FIT_STEPS} Adam steps from σ = 1, drawn live over about {FIT_SECONDS:.0f} s."):
    fits.pop(data_key, None)
    fits[data_key] = learn_bandwidth_live(x, y, left)
    while len(fits) > FITS_KEPT:
        fits.pop(next(iter(fits)))
    st.rerun()  # draws the finished fit, and the button as "again"
fit = fits.get(data_key)
if fit is None:
    left.info("Press **Learn σ** to watch the bandwidth being learned, step by step.")
else:
    chart(left, bandwidth_training(fit.losses, fit.sigmas, FIT_STEPS, grid_sigma=fit.grid_sigma), key="loss",
          matrix=Matrix(np.array([fit.losses, fit.sigmas]).T, [str(s) for s in range(1, len(fit.losses) + 1)],
                        ["loss", "sigma"], corner="Adam step \\ value"))
    right.metric("Learned σ", f"{fit.sigma:.4f}", help=f"Adam on log σ from σ = {fit.start_sigma}, on {fit.device}.")
    right.metric("Best σ on a grid", f"{fit.grid_sigma:.4f}", help="121 values from 10^-2.5 to 10^0.5, same loss.")
    right.caption(f"Computed with torch on **{fit.device}**. The loss is on standardised salaries (mean 0, variance 1).")

st.header("Classification")
st.write("Values are one-hot class vectors, so the pooled value is a vector of class probabilities.")
c1, c2 = st.columns(2)
csigma = c1.select_slider("σ (Gaussian width)", BANDWIDTHS, key="csigma")
hard = c2.toggle("Hard attention (= 1-nearest-neighbour)", key="chard")
points, labels = blobs(30, 3, 0.8, state.seed)
axis = np.linspace(-4, 4, 61)
gx, gy = np.meshgrid(axis, axis)
probabilities = classify(np.stack([gx.ravel(), gy.ravel()], 1), points, labels, 3, sigma=csigma, hard=hard)  # (G, 3)
winner = probabilities.argmax(1).reshape(gx.shape)
confidence = probabilities.max(1).reshape(gx.shape)
colours = ["#0072b2", "#e69f00", "#009e73"]
decision = go.Figure(go.Heatmap(x=axis, y=axis, z=winner + confidence * 0.999, zmin=0, zmax=3, showscale=False,
                                colorscale=[[i / 3 + e / 3, c if e else "#ffffff"] for i, c in enumerate(colours) for e in (0, 1)],
                                customdata=confidence, hovertemplate="class %{z:.0f}<br>confidence %{customdata:.3f}<extra></extra>"))
for c, colour in enumerate(colours):
    decision.add_trace(go.Scatter(x=points[labels == c, 0], y=points[labels == c, 1], mode="markers", name=f"class {c}",
                                  marker=dict(color=colour, line=dict(color="black", width=1))))
# Square cells without stretching the map past the data: the axes keep −4…4 and the plot narrows instead (constrain).
decision.update_layout(title="Decision map: colour = predicted class, paler = less confident", height=480,
                       xaxis=dict(range=[axis[0], axis[-1]], constrain="domain"),
                       yaxis=dict(scaleanchor="x", range=[axis[0], axis[-1]], constrain="domain"))
chart(st, decision, key="classes")
st.latex(r"p(c \mid q) = \sum_j \alpha(q, x_j)\,[y_j = c]" + (r",\ \alpha = \text{one-hot argmax}" if hard else ""))
save_url_state(SCHEMA)
