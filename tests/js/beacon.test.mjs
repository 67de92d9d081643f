// Streamlit's adapter for a heatmap's paused view (attnviz/browser/streamlit.mjs) without a browser: the post, the link it
// writes, and whether a run's data lacks a view the heatmap posted (the post on its way, or answered after the run took
// the views before it), against a fake fetch and address bar.
import assert from "node:assert/strict";
import { test } from "node:test";

import { awaiting, viewSender } from "../../attnviz/browser/streamlit.mjs";

/** A fake fetch that holds each post until the test answers it with the server's {search, seq}, or fails it. */
function fakeServer() {
  const held = [];
  globalThis.fetch = (url, options) => new Promise((resolve, reject) => {
    held.push({ body: JSON.parse(options.body), answer: (json) => resolve({ ok: true, json: async () => json }), fail: () => reject(new Error("down")) });
  });
  return held;
}

function fakeAddress(search) {
  globalThis.window = {
    location: { pathname: "/", hash: "", search },
    history: { state: null, replaceState: (state, title, url) => (window.location.search = url.slice(1)) },
  };
}

const flush = () => new Promise((resolve) => setTimeout(resolve, 0));

test("a posted view is awaited until a run has taken it", async () => {
  const held = fakeServer();
  fakeAddress("?text=the+cat");
  const reruns = [];
  const data = (taken) => ({ beacon: { url: "/_attnviz/view", token: "a", taken } });
  const send = viewSender({ data: data(0), setStateValue: (name, value) => reruns.push(value) });
  assert.equal(awaiting(data(0)), false);
  send("view", { scale: "absolute" });
  assert.equal(awaiting(data(0)), true); // on its way: a run's data cannot have it
  assert.deepEqual(held[0].body, { token: "a", view: { scale: "absolute" }, search: "?text=the+cat" });
  held[0].answer({ search: "?text=the+cat&scale=absolute", seq: 1 });
  await flush();
  assert.equal(window.location.search, "?text=the+cat&scale=absolute");
  assert.equal(awaiting(data(0)), true); // answered, but a run that took only the views before it lacks it
  assert.equal(awaiting(data(1)), false); // a run took it
  assert.deepEqual(reruns, []);
});

test("a run that rewrote the link while the post was on its way gets the view put in its link", async () => {
  const held = fakeServer();
  fakeAddress("?text=the+cat");
  const data = { beacon: { url: "/_attnviz/view", token: "b", taken: 0 } };
  viewSender({ data, setStateValue: () => {} })("view", { scale: "absolute" });
  window.location.search = "?text=a+dog"; // the run for a new sentence wrote its link
  held[0].answer({ search: "?text=the+cat&scale=absolute", seq: 1 });
  await flush();
  assert.equal(window.location.search, "?text=a+dog"); // the stale link is not written …
  assert.equal(held.length, 2); // … the view is posted again with the new one
  assert.equal(held[1].body.search, "?text=a+dog");
  assert.equal(awaiting(data), true);
  held[1].answer({ search: "?text=a+dog&scale=absolute", seq: 2 });
  await flush();
  assert.equal(window.location.search, "?text=a+dog&scale=absolute");
  assert.equal(awaiting({ beacon: { ...data.beacon, taken: 1 } }), true); // the run took only the first post
  assert.equal(awaiting({ beacon: { ...data.beacon, taken: 2 } }), false);
});

test("a failed post reruns the page with the view, and awaits nothing", async () => {
  const held = fakeServer();
  fakeAddress("");
  const reruns = [];
  const data = { beacon: { url: "/_attnviz/view", token: "c", taken: 0 } };
  viewSender({ data, setStateValue: (name, value) => reruns.push([name, value]) })("view", { temp: 2 });
  held[0].fail();
  await flush();
  assert.deepEqual(reruns, [["view", { temp: 2 }]]);
  assert.equal(awaiting(data), false);
});

test("without a beacon the host's own setStateValue is used, and nothing is awaited", () => {
  const setStateValue = () => {};
  assert.equal(viewSender({ data: {}, setStateValue }), setStateValue);
  assert.equal(awaiting({}), false);
});
