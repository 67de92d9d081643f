// A figure's canvas at the screen's pixel ratio: the heatmap and the atlas size and clear theirs the same way.

/** Size `canvas` for width × height CSS px at the screen's pixel ratio (only where that changed: a resize clears it)
 * and `figure` to its height; returns its context, scaled to CSS px and cleared, with no smoothing of drawn images. */
function canvasContext(canvas, figure, width, height) {
  const scale = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(width * scale) || canvas.height !== Math.round(height * scale)) {
    canvas.width = Math.round(width * scale);
    canvas.height = Math.round(height * scale);
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    figure.style.height = `${height}px`;
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(scale, 0, 0, scale, 0, 0);
  ctx.clearRect(0, 0, width, height);
  ctx.imageSmoothingEnabled = false;
  return ctx;
}
