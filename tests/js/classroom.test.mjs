// node --test tests/js: the class panel's pure parts (attnviz/browser/classroom.mjs): what the results say, which bars
// are drawn, when a page holds a step back, and a timer read against the server's clock.
import { test } from "node:test";
import assert from "node:assert/strict";
import { chosenBars, holds, inStep, resultsText, secondsLeft, tallyBars } from "../../attnviz/browser/classroom.mjs";

const pick = { kind: "pick", options: ["dog", "happy", "tail"], step: 7, holds: ["figure", "result"] };
const number = { kind: "number", options: [], step: 12, holds: ["figure"] };

test("a tally is one bar per option, or one per value given, as given", () => {
  assert.deepEqual(tallyBars(pick, { answered: 3, counts: [1, 2, 0] }).map((b) => [b.label, b.count]),
    [["dog", 1], ["happy", 2], ["tail", 0]]);
  assert.deepEqual(tallyBars(number, { answered: 3, values: [[9, 2], [12.5, 1]] }).map((b) => [b.label, b.count]),
    [["9", 2], ["12.5", 1]]);
  assert.deepEqual(tallyBars(pick, null), []);
});

test("many options: only those chosen and the right one get a bar, the rest are counted", () => {
  const bars = Array.from({ length: 16 }, (_, i) => ({ label: `w${i}`, count: i === 3 ? 2 : i === 5 ? 1 : 0, index: i }));
  const { bars: kept, left } = chosenBars(bars, (bar) => bar.index === 9);
  assert.deepEqual(kept.map((b) => b.label), ["w3", "w5", "w9"]);
  assert.equal(left, 13);
  assert.equal(chosenBars(bars.slice(0, 4)).bars.length, 4); // a few: all of them
});

test("the results in words name each chosen option and, at the reveal, the round's share right", () => {
  const tally = { answered: 3, counts: [1, 2, 0] };
  assert.equal(resultsText(pick, tally, null, 1), "Round 1: 3 answered (dog: 1, happy: 2).");
  const truth = { rounds: [{ share: 2 / 3 }, { share: 1 }] };
  assert.equal(resultsText(pick, tally, truth, 1), "Round 1: 3 answered (dog: 1, happy: 2). 67% right.");
  assert.equal(resultsText(pick, { answered: 0, counts: [0, 0, 0] }, null, 2), "Round 2: 0 answered.");
});

test("a page holds its step back while that step's question is open, and not after the reveal", () => {
  const open = { question: pick, revealed: false };
  assert.equal(holds({ step: 7 }, open), true);
  assert.equal(holds({ step: 8 }, open), false); // another step's question
  assert.equal(holds({ step: 7 }, { ...open, revealed: true }), false);
  assert.equal(holds({ step: 7 }, { question: null }), false);
  assert.equal(holds({ step: 7 }, { question: { ...pick, holds: [] }, revealed: false }), false);
});

test("a page is in the class's step when the step and every value both name agree", () => {
  const state = { step: 7, params: { text: "a dog", tau: "0.5" } };
  assert.equal(inStep({ step: 7, params: { text: "a dog", tau: "0.5", other: "x" } }, state), true);
  assert.equal(inStep({ step: 7, params: { text: "a cat" } }, state), false);
  assert.equal(inStep({ step: 6, params: {} }, state), false);
});

test("the time left is read against the server's clock, never below 0", () => {
  assert.equal(secondsLeft(null, 100, 0, 0), null);
  assert.equal(secondsLeft(160, 100, 5_000, 5_000), 60); // heard now: 60 s left whatever this clock says
  assert.equal(secondsLeft(160, 100, 5_000, 25_000), 40);
  assert.equal(secondsLeft(160, 100, 5_000, 99_000), 0);
});
