// A live class in the page (appkit/classroom.py; attnviz.classroom.http is the server's side). A student's panel
// opens the class's event stream, follows the presenter (the view is applied to the page's heatmaps here, in the
// browser; a new step or sentence asks the host for one rerun), and answers the open question or the quiz by posting
// to the class's endpoints: no rerun per answer. The presenter's panel counts the class and its answers live and
// sends each change of its page's heatmaps to the class. Every text from the server is set as textContent.

import { el } from "./draw.mjs";

const VIEW_POST_MS = 150; // the presenter's heatmap changes are sent at most this often

/** POST `body` as JSON to `url`: the answer's JSON, or an Error with the server's sentence. */
export async function post(url, body) {
  const answer = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body), credentials: "same-origin" });
  const sent = await answer.json().catch(() => ({}));
  if (!answer.ok) throw new Error(sent.error || `The server answered ${answer.status}.`);
  return sent;
}

/** The bars of a tally: one per option (counts), or the numbers given, binned (values). */
export function tallyBars(question, tally) {
  if (!tally) return [];
  if (tally.counts) return question.options.map((label, i) => ({ label, count: tally.counts[i] || 0 }));
  const values = tally.values || [];
  if (!values.length) return [];
  const low = values[0], high = values[values.length - 1];
  const bins = low === high ? 1 : Math.min(8, values.length);
  const width = (high - low) / bins || 1;
  const bars = Array.from({ length: bins }, (_, i) => ({
    label: bins === 1 ? `${low}` : `${(low + i * width).toPrecision(3)} to ${(low + (i + 1) * width).toPrecision(3)}`, count: 0 }));
  for (const v of values) bars[Math.min(bins - 1, Math.floor((v - low) / width))].count += 1;
  return bars;
}

/** Whether the page shows the class's step and lesson values (the names both have). */
export function inStep(page, state) {
  if (page.step !== state.step) return false;
  return Object.entries(state.params || {}).every(([name, value]) => !(name in page.params) || page.params[name] === value);
}

export class ClassPanel {
  constructor(root) {
    this.root = root;
    root.classList.add("av-class");
    this.banner = root.appendChild(el("div", { class: "av-class-banner", role: "status" }));
    this.body = root.appendChild(el("div", { class: "av-class-body" }));
    this.source = null;
    this.state = null;
    this.following = true;
    this.asked = null; // the version a rerun was asked for
    this.mine = {}; // question id → this student's answer
    this.sentQuiz = {};
    this.viewTimer = null;
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
    if (this.data.role === "presenter") document.addEventListener("attnviz:view", this.onView);
    else await this.join();
    this.source = new EventSource(`${this.base}/events${this.data.role === "presenter" ? "?tally=1" : ""}`);
    this.source.onmessage = (event) => this.heard(JSON.parse(event.data));
    this.source.addEventListener("ended", () => this.ended());
    this.source.onerror = () => this.say(this.state ? "Reconnecting to the class…" : "Connecting to the class…");
  }

  async join() {
    const key = `attnviz-class-${this.data.code}`;
    try { this.student = window.localStorage.getItem(key); } catch { this.student = null; }
    if (this.student) return;
    try {
      this.student = (await post(`${this.base}/join`, {})).student;
      try { window.localStorage.setItem(key, this.student); } catch { /* a private window keeps it for this page */ }
    } catch (error) {
      this.say(error.message);
    }
  }

  heard(state) {
    this.state = state;
    if (this.data.role === "student" && this.following) {
      if (!inStep(this.data, state) && this.asked !== state.version) {
        this.asked = state.version;
        this.setStateValue("follow", { step: state.step, params: state.params, version: state.version });
      }
      this.applyView(state.view);
    }
    this.show();
  }

  applyView(view) {
    if (!view || !Object.keys(view).length) return;
    for (const node of document.querySelectorAll(".av-host, .av-root, .av-compare")) {
      if (typeof node.attnvizFollow === "function") node.attnvizFollow(view);
    }
  }

  ended() {
    this.source.close();
    this.say("This class has ended.");
    this.body.replaceChildren();
  }

  say(text) {
    this.banner.replaceChildren(el("span", {}, text));
  }

  show() {
    const s = this.state;
    if (this.data.role === "presenter") return this.showPresenter(s);
    const where = this.following ? `following the presenter, step ${s.step}` : `exploring on your own (the class is on step ${s.step})`;
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

  questionBox(s) {
    const q = s.question, truth = s.revealed ? s.truth : null, mine = this.mine[q.id];
    const box = el("div", { class: "av-class-question" });
    box.appendChild(el("p", { class: "av-class-prompt" }, q.prompt));
    if (q.kind === "number") {
      const row = box.appendChild(el("div", { class: "av-class-row" }));
      const input = row.appendChild(el("input", { type: "number", step: "any", "aria-label": "Your answer" }));
      if (mine !== undefined) input.value = String(mine);
      input.disabled = Boolean(truth);
      const send = row.appendChild(el("button", { type: "button" }, "Answer"));
      send.disabled = Boolean(truth);
      send.addEventListener("click", () => input.value.trim() !== "" && this.answer(q, Number(input.value)));
    } else {
      const row = box.appendChild(el("div", { class: "av-class-options", role: "group" }));
      q.options.forEach((label, i) => {
        const button = row.appendChild(el("button", { type: "button", class: "av-class-option", "aria-pressed": String(mine === i) }, label));
        if (truth && i === truth.answer) button.classList.add("av-class-right");
        button.disabled = Boolean(truth);
        button.addEventListener("click", () => this.answer(q, i));
      });
    }
    const note = box.appendChild(el("p", { class: "av-class-note", role: "status" }));
    if (truth) {
      const right = q.kind === "number" ? `${truth.answer} (± ${truth.tolerance})` : q.options[truth.answer];
      const share = truth.share === null ? "nobody answered" : `${Math.round(100 * truth.share)}% of the class got it`;
      const you = mine === undefined ? "" : (q.kind === "number" ? Math.abs(mine - truth.answer) <= truth.tolerance : mine === truth.answer)
        ? " You got it." : " Not this time.";
      note.textContent = `Answer: ${right}. ${share}.${you} ${truth.explain}`;
    } else {
      note.textContent = mine === undefined ? "Answer before the reveal." : "Answer sent: you can change it until the reveal.";
    }
    if (this.error) box.appendChild(el("p", { class: "av-class-error", role: "alert" }, this.error));
    return box;
  }

  async answer(question, value) {
    try {
      await post(`${this.base}/answer`, { student: this.student, question: question.id, value });
      this.mine[question.id] = value;
      this.error = null;
    } catch (error) {
      this.error = error.message;
    }
    this.show();
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

  showPresenter(s) {
    this.banner.replaceChildren(el("span", { class: "av-class-count" },
      `${s.students} ${s.students === 1 ? "student" : "students"} in class ${s.code}`));
    this.body.replaceChildren();
    if (s.question) {
      const box = this.body.appendChild(el("div", { class: "av-class-tally" }));
      box.appendChild(el("p", { class: "av-class-prompt" }, `${s.question.prompt} (${s.tally.answered} answered)`));
      const bars = tallyBars(s.question, s.tally);
      const most = Math.max(1, ...bars.map((b) => b.count));
      bars.forEach((bar, i) => {
        const row = box.appendChild(el("div", { class: "av-class-bar" }));
        const right = s.truth && s.question.kind !== "number" && i === s.truth.answer;
        row.appendChild(el("span", { class: "av-class-label" }, right ? `✓ ${bar.label}` : bar.label));
        const fill = row.appendChild(el("span", { class: "av-class-fill" }));
        fill.style.width = `${(100 * bar.count) / most}%`;
        if (right) fill.classList.add("av-class-right");
        row.appendChild(el("span", { class: "av-class-n" }, String(bar.count)));
      });
      if (s.truth) {
        const share = s.truth.share === null ? "nobody answered" : `${Math.round(100 * s.truth.share)}% got it`;
        box.appendChild(el("p", { class: "av-class-note" }, `Revealed: ${share}. ${s.truth.explain}`));
      }
    }
    if (s.quiz) this.body.appendChild(el("p", { class: "av-class-note" }, `${s.quiz}-test: ${s.quiz_done || 0} of ${s.students} sent`));
    this.root.attnviz = { students: s.students, tally: s.tally || null, version: s.version };
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
