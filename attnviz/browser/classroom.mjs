// A live class in the page (appkit/classroom.py; attnviz.classroom.http is the server's side). Three roles:
// - "student": joins, follows the class (the view is applied to the page's heatmaps here; a new step or sentence asks
//   the host for one rerun), answers the open question or the quiz by posting to the class's endpoints, and after the
//   teacher shows the results reads them as text;
// - "projector": the room's screen: the question in large type, how many answered, the results once shown (round 1
//   beside round 2), the reveal; it sends its heatmaps' view changes to the class;
// - "console": the teacher's controls, each a POST to the class (no rerun, so a click applies even after the server
//   restarted): ask, show, lock, a second round, a timer, reveal, close; the key, the live tallies, who is here.
// The projector and the console follow the class's step too, so either one drives. Every text from the server is set
// as textContent; the presenter's secret lives in this module's memory only, never in the page.

import { el } from "./draw.mjs";

const VIEW_POST_MS = 150; // the presenter's heatmap changes are sent at most this often
const JOIN_RETRY_MS = 1500; // a join refused for a busy moment (429) is tried again after this
const ROUND_TWO = "Round 2: you talked it over with your neighbour. Vote again (you may keep your answer).";

/** POST `body` as JSON to `url`: the answer's JSON, or an Error with the server's sentence. */
export async function post(url, body) {
  const answer = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body), credentials: "same-origin" });
  const sent = await answer.json().catch(() => ({}));
  if (!answer.ok) {
    const error = new Error(sent.error || `The server answered ${answer.status}.`);
    error.status = answer.status;
    throw error;
  }
  return sent;
}

/** The bars of one round's tally: one per option (counts), or one per value given (values: [value, count]). */
export function tallyBars(question, tally) {
  if (!tally) return [];
  if (tally.counts) return question.options.map((label, i) => ({ label, count: tally.counts[i] || 0, index: i }));
  return (tally.values || []).map(([value, count]) => ({ label: String(value), count, value }));
}

const FEW_BARS = 6; // more options than this: only those chosen (and the right one) get a bar

/** The bars worth drawing: all of a few; of many, those someone chose and the right one (`right(bar)`), and how many
 * options were left out for having no answer. */
export function chosenBars(bars, right = () => false) {
  if (bars.length <= FEW_BARS) return { bars, left: 0 };
  const kept = bars.filter((bar) => bar.count > 0 || right(bar));
  return { bars: kept, left: bars.length - kept.length };
}

/** One round's results in words, for a screen reader and for every student's page. */
export function resultsText(question, tally, truth, round) {
  const bars = tallyBars(question, tally);
  const parts = bars.filter((b) => b.count > 0).map((b) => `${b.label}: ${b.count}`);
  const heading = round ? `Round ${round}` : "Results";
  let text = `${heading}: ${tally.answered} answered${parts.length ? ` (${parts.join(", ")})` : ""}.`;
  const share = truth && truth.rounds && truth.rounds[round - 1] ? truth.rounds[round - 1].share : null;
  if (share !== null && share !== undefined) text += ` ${Math.round(100 * share)}% right.`;
  return text;
}

/** Whether the page shows the class's step and lesson values (the names both have). */
export function inStep(page, state) {
  if (page.step !== state.step) return false;
  return Object.entries(state.params || {}).every(([name, value]) => !(name in page.params) || page.params[name] === value);
}

/** Whether a page on `page.step` holds the step's results back for `state` (a student's page and the projector):
 * while a question of that step is open and not revealed, the room predicts before it sees. */
export function holds(page, state) {
  const q = state.question;
  return Boolean(q && !state.revealed && q.step === page.step && (q.holds || []).length);
}

/** Seconds left before `deadline` (server seconds), with the server's clock `now` heard at `heardAt` (ms, this page's). */
export function secondsLeft(deadline, now, heardAt, at = Date.now()) {
  if (!deadline) return null;
  return Math.max(0, Math.round(deadline - now - (at - heardAt) / 1000));
}

function rightLabel(question, truth) {
  return question.kind === "number" ? `${truth.answer} (± ${truth.tolerance})` : question.options[truth.answer];
}

export class ClassPanel {
  constructor(root) {
    this.root = root;
    root.classList.add("av-class");
    this.banner = root.appendChild(el("div", { class: "av-class-banner" }));
    this.body = root.appendChild(el("div", { class: "av-class-body" }));
    this.live = root.appendChild(el("p", { class: "av-class-live", role: "status", "aria-live": "polite" }));
    this.source = null;
    this.state = null;
    this.following = true;
    this.asked = null; // the version a rerun was asked for
    this.mine = {}; // "question id/round" → this student's answer
    this.sentQuiz = {};
    this.viewTimer = null;
    this.clock = null;
    this.onView = (event) => this.viewChanged(event.detail);
  }

  load(data, setStateValue) {
    const fresh = !this.data || this.data.code !== data.code || this.data.role !== data.role;
    this.data = data;
    this.setStateValue = setStateValue;
    this.root.style.fontSize = `${data.font_px}px`;
    this.base = `${data.url}/${data.code}`;
    if (fresh) this.open();
    else if (this.state) this.show();
  }

  async open() {
    if (this.source) this.source.close();
    document.removeEventListener("attnviz:view", this.onView);
    let stream = `${this.base}/events`;
    if (this.data.role === "student") {
      if (!(await this.join())) return;
      stream += `?student=${encodeURIComponent(this.student)}`;
    } else {
      // The cookie that keeps this browser the presenter across a restart (HttpOnly: no script reads it back).
      post(`${this.base}/console`, { secret: this.data.secret }).catch(() => {});
      if (this.data.role === "projector") document.addEventListener("attnviz:view", this.onView);
      stream += this.data.role === "console" ? `?console=${encodeURIComponent(this.data.console)}` : "?tally=1";
    }
    this.source = new EventSource(stream);
    this.source.onmessage = (event) => this.heard(JSON.parse(event.data));
    this.source.addEventListener("ended", () => this.stop("This class has ended."));
    this.source.addEventListener("removed", () => {
      this.forget();
      this.stop("The teacher removed you from this class.");
    });
    this.source.addEventListener("refused", (event) => this.refused(JSON.parse(event.data).error));
    this.source.onerror = () => {
      this.lost = true;
      this.say(this.state ? "Reconnecting to the class…" : "Connecting to the class…");
    };
    this.source.onopen = () => {
      // Back after the server restarted: a presenter's page runs once in its new session (its cookie makes it the
      // presenter there), so its next click applies.
      if (this.lost && this.data.role !== "student") this.setStateValue("resumed", Date.now());
      this.lost = false;
    };
  }

  storageKey() {
    return `attnviz-class-${this.data.code}`;
  }

  forget() {
    try { window.localStorage.removeItem(this.storageKey()); } catch { /* a private window */ }
    this.student = null;
  }

  /** This page's student token: the one kept from an earlier visit (a reload is the same student), or a new join. */
  async join() {
    try { this.student = window.localStorage.getItem(this.storageKey()); } catch { this.student = null; }
    if (this.student) return true;
    for (;;) {
      try {
        const asked = this.nickname === undefined ? {} : { nickname: this.nickname };
        this.student = (await post(`${this.base}/join`, asked)).student;
        try { window.localStorage.setItem(this.storageKey(), this.student); } catch { /* kept for this page */ }
        return true;
      } catch (error) {
        if (error.status === 429) {
          this.say("Many students are joining at once: trying again…");
          await new Promise((done) => setTimeout(done, JOIN_RETRY_MS * (1 + Math.random())));
          continue;
        }
        if (error.status === 400 && /nickname/.test(error.message)) return this.askNickname(error.message);
        this.stop(error.message);
        return false;
      }
    }
  }

  askNickname(message) {
    this.say(message);
    const form = el("form", { class: "av-class-row" });
    const input = form.appendChild(el("input", { type: "text", maxlength: "24", "aria-label": "Your nickname", autocomplete: "nickname" }));
    form.appendChild(el("button", { type: "submit" }, "Join"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.nickname = input.value;
      this.open();
    });
    this.body.replaceChildren(form);
    input.focus();
    return false;
  }

  /** The stream refused this page's token (a join never followed, or a class restarted from nothing): join anew once. */
  refused(message) {
    this.source.close();
    if (this.data.role === "student" && !this.rejoined) {
      this.rejoined = true;
      this.forget();
      this.open();
    } else {
      this.stop(message);
    }
  }

  stop(text) {
    if (this.source) this.source.close();
    clearInterval(this.clock);
    this.say(text);
    this.body.replaceChildren();
    this.speak(text);
  }

  say(text) {
    this.banner.replaceChildren(el("span", {}, text));
  }

  speak(text) {
    if (this.live.textContent !== text) this.live.textContent = text;
  }

  heard(state) {
    const before = this.state;
    this.state = state;
    this.heardAt = Date.now();
    if (this.following && !inStep(this.data, state) && this.asked !== state.version) {
      this.asked = state.version;
      this.setStateValue("follow", { step: state.step, params: state.params, version: state.version });
    }
    if (this.data.role !== "console" && holds(this.data, state) !== Boolean(this.data.held) && this.askedHold !== state.version) {
      this.askedHold = state.version; // one run draws the step again, held back or revealed
      this.setStateValue("hold", state.version);
    }
    if (this.data.role === "student" && this.following) this.applyView(state.view);
    this.show();
    this.tellChange(before, state);
  }

  /** Say in the live region what changed for this person: a question asked, a round, a lock, the results, the reveal. */
  tellChange(before, s) {
    const q = s.question;
    const was = before && before.question;
    if (!q) {
      if (was) this.speak("The question is closed.");
      return;
    }
    if (!was || was.id !== q.id) return this.speak(`Question: ${q.prompt}`);
    if (s.revealed && !before.revealed) return this.speak(`Answer: ${rightLabel(q, s.truth)}. ${s.truth.explain}`);
    if (s.round !== before.round) return this.speak("Round 2: talk to your neighbour, then vote again.");
    if (s.locked && !before.locked) return this.speak("Answers are locked.");
    if (s.shown && !before.shown && s.results) this.speak(resultsText(q, s.results[s.results.length - 1], null, s.results.length));
  }

  applyView(view) {
    if (!view || !Object.keys(view).length) return;
    for (const node of document.querySelectorAll(".av-host, .av-root, .av-compare")) {
      if (typeof node.attnvizFollow === "function") node.attnvizFollow(view);
    }
  }

  show() {
    const s = this.state;
    clearInterval(this.clock);
    if (s.deadline && s.question && !s.revealed) this.clock = setInterval(() => this.tick(), 1000);
    if (this.data.role === "projector") return this.showProjector(s);
    if (this.data.role === "console") return this.showConsole(s);
    const where = this.following ? `following the teacher, step ${s.step}` : `exploring on your own (the class is on step ${s.step})`;
    this.banner.replaceChildren(el("span", { class: "av-class-where" }, `Class ${s.code}: ${where}`));
    const toggle = this.banner.appendChild(el("button", { type: "button", class: "av-class-follow" },
      this.following ? "Explore on my own" : "Follow the class"));
    toggle.addEventListener("click", () => {
      this.following = !this.following;
      this.asked = null;
      if (this.following) this.heard(this.state);
      else this.show();
    });
    this.body.replaceChildren();
    if (s.question) this.body.appendChild(this.questionBox(s));
    if (s.quiz && s.quiz_items) this.body.appendChild(this.quizBox(s));
  }

  tick() {
    for (const node of this.root.querySelectorAll(".av-class-timer")) node.textContent = this.timerText(this.state);
  }

  timerText(s) {
    const left = secondsLeft(s.deadline, s.now, this.heardAt);
    return left === null ? "" : left > 0 ? `Time left: ${left} s` : "Time is up.";
  }

  questionBox(s) {
    const q = s.question, truth = s.revealed ? s.truth : null, key = `${q.id}/${s.round}`, mine = this.mine[key];
    const closed = Boolean(truth) || s.locked;
    const box = el("div", { class: "av-class-question", role: "group", "aria-labelledby": "av-class-prompt" });
    box.appendChild(el("p", { class: "av-class-prompt", id: "av-class-prompt" }, q.prompt));
    if (s.round === 2) box.appendChild(el("p", { class: "av-class-note" }, ROUND_TWO));
    if (s.deadline && !truth) box.appendChild(el("p", { class: "av-class-timer" }, this.timerText(s)));
    if (q.kind === "number") {
      const form = box.appendChild(el("form", { class: "av-class-row" }));
      const input = form.appendChild(el("input", { type: "number", step: "any", "aria-label": `Your answer: ${q.prompt}` }));
      if (mine !== undefined) input.value = String(mine);
      input.disabled = closed;
      const send = form.appendChild(el("button", { type: "submit" }, "Answer"));
      send.disabled = closed;
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        const value = Number(input.value);
        if (input.value.trim() === "" || !Number.isFinite(value)) {
          this.error = "Type a number, then press Answer.";
          return this.show();
        }
        this.answer(q, key, value);
      });
    } else {
      const row = box.appendChild(el("div", { class: "av-class-options" }));
      q.options.forEach((label, i) => {
        const button = row.appendChild(el("button", { type: "button", class: "av-class-option", "aria-pressed": String(mine === i) }, label));
        if (truth && i === truth.answer) {
          button.classList.add("av-class-right");
          button.setAttribute("aria-label", `${label} (the right answer)`);
        }
        button.disabled = closed;
        button.addEventListener("click", () => this.answer(q, key, i));
      });
    }
    const note = box.appendChild(el("p", { class: "av-class-note", role: "status" }));
    if (truth) {
      const share = truth.share === null ? "nobody answered" : `${Math.round(100 * truth.share)}% of the class got it`;
      const you = mine === undefined ? "" : (q.kind === "number" ? Math.abs(mine - truth.answer) <= truth.tolerance : mine === truth.answer)
        ? " You got it." : " Not this time.";
      note.textContent = `Answer: ${rightLabel(q, truth)}. ${share}.${you} ${truth.explain}`;
    } else if (s.locked) {
      note.textContent = mine === undefined ? "Answers are locked." : "Answers are locked: yours is in.";
    } else {
      note.textContent = mine === undefined ? "Answer before the reveal." : "Answer sent: you can change it until the reveal.";
    }
    if (s.results) {
      const list = box.appendChild(el("ul", { class: "av-class-results", "aria-label": "The class's answers" }));
      s.results.forEach((tally, r) => list.appendChild(el("li", {}, resultsText(q, tally, truth, r + 1))));
    }
    if (this.error) box.appendChild(el("p", { class: "av-class-error", role: "alert" }, this.error));
    return box;
  }

  async answer(question, key, value) {
    try {
      if (!this.student) throw new Error("Your page has not joined the class: reload it to join.");
      await post(`${this.base}/answer`, { student: this.student, question: question.id, value });
      this.mine[key] = value;
      this.error = null;
    } catch (error) {
      this.error = error.message;
    }
    this.show();
    const focus = this.root.querySelector(`.av-class-option[aria-pressed="true"]`) || this.root.querySelector(".av-class-row input");
    if (focus) focus.focus();
  }

  quizBox(s) {
    const phase = s.quiz, box = el("div", { class: "av-class-quiz" });
    box.appendChild(el("p", { class: "av-class-prompt" }, phase === "pre" ? "Before the lesson: the concept quiz" : "After the lesson: the concept quiz"));
    const chosen = (this.sentQuiz[phase] = this.sentQuiz[phase] || {});
    s.quiz_items.forEach((item, n) => {
      const set = box.appendChild(el("fieldset", { class: "av-class-item" }));
      set.appendChild(el("legend", {}, `${n + 1}. ${item.prompt}`));
      item.options.forEach((label, i) => {
        const line = set.appendChild(el("label", {}));
        const radio = line.appendChild(el("input", { type: "radio", name: `quiz-${phase}-${item.id}`, value: String(i) }));
        radio.checked = chosen[item.id] === i;
        radio.addEventListener("change", () => (chosen[item.id] = i));
        line.appendChild(document.createTextNode(` ${label}`));
      });
    });
    const send = box.appendChild(el("button", { type: "button" }, "Send my answers"));
    const note = box.appendChild(el("p", { class: "av-class-note", role: "status" }, this.quizNote || ""));
    send.addEventListener("click", async () => {
      try {
        await post(`${this.base}/quiz`, { student: this.student, phase, answers: chosen });
        this.quizNote = `Sent: ${Object.keys(chosen).length} of ${s.quiz_items.length} answered. You can change them and send again.`;
      } catch (error) {
        this.quizNote = error.message;
      }
      note.textContent = this.quizNote;
    });
    return box;
  }

  /** The rounds' bars side by side, each with its results in words beside it. */
  resultsBox(s, results, truth) {
    const q = s.question, box = el("div", { class: "av-class-rounds" });
    results.forEach((tally, r) => {
      const column = box.appendChild(el("figure", { class: "av-class-tally" }));
      column.appendChild(el("figcaption", {}, results.length > 1 ? `Round ${r + 1} (${tally.answered} answered)` : "The class's answers"));
      const isRight = (bar) => Boolean(truth) && (q.kind === "number" ? Math.abs(bar.value - truth.answer) <= truth.tolerance : bar.index === truth.answer);
      const { bars, left } = chosenBars(tallyBars(q, tally), isRight);
      const most = Math.max(1, ...bars.map((b) => b.count));
      const list = column.appendChild(el("div", { role: "img", "aria-label": resultsText(q, tally, truth, r + 1) }));
      for (const bar of bars) {
        const row = list.appendChild(el("div", { class: "av-class-bar", "aria-hidden": "true" }));
        const right = isRight(bar);
        row.appendChild(el("span", { class: "av-class-label" }, right ? `✓ ${bar.label}` : bar.label));
        const fill = row.appendChild(el("span", { class: "av-class-fill" }));
        fill.style.width = `${(100 * bar.count) / most}%`;
        if (right) fill.classList.add("av-class-right");
        row.appendChild(el("span", { class: "av-class-n" }, String(bar.count)));
      }
      if (left) column.appendChild(el("p", { class: "av-class-note" }, `${left} other options: no answers.`));
    });
    return box;
  }

  showProjector(s) {
    this.banner.replaceChildren(el("span", { class: "av-class-count" },
      `${s.students} ${s.students === 1 ? "student" : "students"} here · class ${s.code}`));
    this.body.replaceChildren();
    // Above the step, the panel shows only what the room needs now: a question, a quiz, or (on the join slide) who is here.
    this.root.classList.toggle("av-class-idle", !s.question && !s.quiz && !this.data.count);
    if (s.question) {
      const box = this.body.appendChild(el("div", { class: "av-class-question" }));
      box.appendChild(el("p", { class: "av-class-prompt" }, s.question.prompt));
      if (s.question.kind !== "number" && !s.revealed) {
        box.appendChild(el("p", { class: "av-class-note" }, s.question.options.join(" · ")));
      }
      const status = s.revealed ? "" : s.locked ? "Answers locked." : s.round === 2 ? "Round 2: talk to your neighbour, then vote again." : "Answer on your device.";
      box.appendChild(el("p", { class: "av-class-note" }, `${status} ${s.answered} answered.`.trim()));
      if (s.deadline && !s.revealed) box.appendChild(el("p", { class: "av-class-timer" }, this.timerText(s)));
      if (s.results) box.appendChild(this.resultsBox(s, s.results, s.revealed ? s.truth : null));
      if (s.truth) {
        box.appendChild(el("p", { class: "av-class-note av-class-answer" }, `Answer: ${rightLabel(s.question, s.truth)}. ${s.truth.explain}`));
      }
    }
    if (s.quiz) this.body.appendChild(el("p", { class: "av-class-note" }, `${s.quiz}-test: ${s.quiz_done || 0} of ${s.students} sent`));
    this.root.attnviz = { students: s.students, answered: s.answered ?? null, results: s.results || null, version: s.version };
  }

  /** A button that posts the presenter's `change` to the class. */
  control(label, change, { disabled = false, primary = false } = {}) {
    const button = el("button", { type: "button", class: primary ? "av-class-primary" : "" }, label);
    button.disabled = disabled;
    button.addEventListener("click", () => this.act(change, label));
    return button;
  }

  async act(change, label) {
    try {
      await post(`${this.base}/present`, { secret: this.data.secret, ...change });
      this.error = null;
    } catch (error) {
      this.error = `${label}: ${error.message}`;
      this.show();
    }
  }

  showConsole(s) {
    const here = (s.roster || []).filter((r) => r.present).length;
    this.banner.replaceChildren(el("span", { class: "av-class-count" },
      `Console · class ${s.code} · ${here} here, ${(s.roster || []).length} joined · step ${s.step}`));
    this.body.replaceChildren();
    const asking = this.body.appendChild(el("div", { class: "av-class-controls", role: "group", "aria-label": "This step's questions" }));
    for (const question of this.data.offered || []) {
      const open = s.question && s.question.id === question.id;
      asking.appendChild(this.control(`Ask: ${question.prompt}`, { question }, { primary: open }));
    }
    if (!(this.data.offered || []).length) asking.appendChild(el("p", { class: "av-class-note" }, "This step has no question."));
    if (s.question) this.body.appendChild(this.consoleQuestion(s));
    this.body.appendChild(this.classControls(s));
    if (this.error) this.body.appendChild(el("p", { class: "av-class-error", role: "alert" }, this.error));
    this.root.attnviz = { students: here, answered: s.answered ?? null, results: s.results || null, version: s.version };
  }

  consoleQuestion(s) {
    const q = s.question, box = el("div", { class: "av-class-question" });
    box.appendChild(el("p", { class: "av-class-prompt" }, q.prompt));
    box.appendChild(el("p", { class: "av-class-key" }, `Key (not on the projector): ${rightLabel(q, s.key)}`));
    const phase = s.revealed ? "revealed" : `round ${s.round}${s.locked ? ", locked" : ""}${s.shown ? ", results shown" : ", results hidden"}`;
    box.appendChild(el("p", { class: "av-class-note" }, `${s.answered} answered (${phase}).`));
    if (s.deadline && !s.revealed) box.appendChild(el("p", { class: "av-class-timer" }, this.timerText(s)));
    box.appendChild(this.resultsBox(s, s.results || [], s.key));
    const row = box.appendChild(el("div", { class: "av-class-controls", role: "group", "aria-label": "The open question" }));
    const done = s.revealed;
    row.appendChild(this.control(s.shown ? "Hide the results" : "Show the results", { shown: !s.shown }, { disabled: done }));
    row.appendChild(this.control(s.locked ? "Unlock answers" : "Lock answers", { locked: !s.locked }, { disabled: done }));
    row.appendChild(this.control("Talk to your neighbour, then vote again", { round: 2 }, { disabled: done || s.round === 2 }));
    if (s.deadline) {
      row.appendChild(this.control("30 s more", { extend: 30 }, { disabled: done }));
      row.appendChild(this.control("Stop the timer", { timer: null }, { disabled: done }));
    } else {
      row.appendChild(this.control("Timer: 60 s", { timer: 60 }, { disabled: done }));
    }
    row.appendChild(this.control("Reveal", { revealed: true }, { disabled: done, primary: true }));
    row.appendChild(this.control("Close the question", { question: null }));
    return box;
  }

  classControls(s) {
    const box = el("div", { class: "av-class-controls", role: "group", "aria-label": "The class" });
    box.appendChild(this.control(s.joins ? "Close to new students" : "Open to new students", { joins: !s.joins }));
    box.appendChild(this.control(s.nicknames ? "Stop asking nicknames" : "Ask new students for a nickname", { nicknames: !s.nicknames }));
    const copy = box.appendChild(el("button", { type: "button" }, "Copy the presenter link"));
    copy.addEventListener("click", () => this.copyLink(copy));
    const end = box.appendChild(el("button", { type: "button", class: "av-class-danger" }, "End the class"));
    end.addEventListener("click", async () => {
      if (!window.confirm(`End class ${s.code}? Its code stops working for everyone.`)) return;
      try {
        await post(`${this.base}/end`, { secret: this.data.secret });
      } catch (error) {
        this.error = error.message;
        this.show();
      }
    });
    const roster = s.roster || [];
    const people = el("div", { class: "av-class-people" });
    people.appendChild(el("p", { class: "av-class-note" }, roster.length ? "Students (a pseudonym each, or the nickname asked for):" : "No student has joined yet."));
    const list = people.appendChild(el("ul", { class: "av-class-roster", "aria-label": "Students" }));
    for (const student of roster) {
      const item = list.appendChild(el("li", {}, `${student.nickname || student.id} ${student.present ? "· here" : "· away"} `));
      const remove = item.appendChild(el("button", { type: "button", "aria-label": `Remove ${student.nickname || student.id}` }, "Remove"));
      remove.addEventListener("click", () => post(`${this.base}/remove`, { secret: this.data.secret, student: student.id })
        .catch((error) => { this.error = error.message; this.show(); }));
    }
    const both = el("div");
    both.append(box, people);
    return both;
  }

  /** Copy the presenter link (it holds the secret) without ever showing it: the clipboard where the page may use it,
   * else a text area made, copied and removed at once. */
  async copyLink(button) {
    const link = this.data.presenter_link;
    let done = false;
    try {
      await navigator.clipboard.writeText(link);
      done = true;
    } catch {
      const area = document.body.appendChild(el("textarea", { "aria-hidden": "true", style: "position:fixed;opacity:0" }));
      area.value = link;
      area.select();
      try { done = document.execCommand("copy"); } catch { done = false; }
      area.remove();
    }
    const text = done ? "Copied: open it on your phone to drive the class from there. Keep it private." : "This browser would not copy it.";
    button.textContent = done ? "Copied" : "Copy the presenter link";
    this.speak(text);
  }

  viewChanged(view) {
    clearTimeout(this.viewTimer);
    this.viewTimer = setTimeout(() => post(`${this.base}/present`, { secret: this.data.secret, view }).catch(() => {}), VIEW_POST_MS);
  }
}

/** Mount the class panel in `parentElement` (one per page), or load new data into the one there. */
export function mountClass({ data, parentElement, setStateValue }) {
  let host = parentElement.querySelector(".av-class");
  if (!host) host = parentElement.appendChild(el("div"));
  if (!host.panel) host.panel = new ClassPanel(host);
  host.panel.load(data, setStateValue);
}
