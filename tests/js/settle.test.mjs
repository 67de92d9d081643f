// node --test tests/js: the settle component's wait (attnviz/browser/settle.mjs), on node's mocked timers.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mountSettle } from "../../attnviz/browser/settle.mjs";

function host() {
  return { classList: { names: new Set(), add(name) { this.names.add(name); } }, style: {}, textContent: "" };
}

function mount(parent, doc, token, sent) {
  return mountSettle({ data: { token, pause_ms: 700, note: `behind ${token}` }, parentElement: parent,
    setTriggerValue: (name, value) => sent.push([name, value]) }, doc);
}

test("the whole page is asked for once, after the pause, with the last data's token", (context) => {
  context.mock.timers.enable({ apis: ["setTimeout"] });
  const doc = new EventTarget(), parent = host(), sent = [];
  mount(parent, doc, "a", sent);
  assert.equal(parent.textContent, "behind a");
  assert.ok(parent.classList.names.has("av-settle"));
  context.mock.timers.tick(699);
  assert.deepEqual(sent, []);
  mount(parent, doc, "b", sent); // the next click's run: the wait starts again
  context.mock.timers.tick(699);
  assert.deepEqual(sent, []);
  context.mock.timers.tick(1);
  assert.deepEqual(sent, [["settled", "b"]]);
  context.mock.timers.tick(5000);
  assert.equal(sent.length, 1);
});

test("a press or a key starts the wait again; once asked, or unmounted, it stops listening", (context) => {
  context.mock.timers.enable({ apis: ["setTimeout"] });
  const doc = new EventTarget(), parent = host(), sent = [];
  const cleanup = mount(parent, doc, "a", sent);
  context.mock.timers.tick(600);
  doc.dispatchEvent(new Event("pointerdown"));
  context.mock.timers.tick(600);
  doc.dispatchEvent(new Event("keydown"));
  context.mock.timers.tick(600);
  assert.deepEqual(sent, []);
  context.mock.timers.tick(100);
  assert.deepEqual(sent, [["settled", "a"]]);
  doc.dispatchEvent(new Event("pointerdown")); // a press while the whole page's run is on its way asks for no second
  context.mock.timers.tick(5000);
  assert.equal(sent.length, 1);
  mount(parent, doc, "b", sent);
  context.mock.timers.tick(300);
  cleanup(); // the whole page has caught up: this component is gone
  context.mock.timers.tick(5000);
  doc.dispatchEvent(new Event("keydown"));
  context.mock.timers.tick(5000);
  assert.equal(sent.length, 1);
});
