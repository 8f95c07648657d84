// One run of the conversation, a turn: the person's message, then what the run did, built from its
// events (apply takes each once, stored or streamed): messages as bubbles (the server's sanitised
// Markdown, see showMarkdown), tool calls as step cards, notices for pauses and endings. The
// approval cards on its steps are in approvals.js; their methods are the turn's too.

import { htmlUrl, own, root } from "./page.js";
import {
  dataView, details, el, formatDuration, formatWait, label, period, pretty, readableName, scalarText, sentence,
} from "./values.js";
import { STATUS_WORDS, effectForPeople, failedText, forPeople, names, resumedText, stopText } from "./words.js";
import { cardMethods, reflectRequest } from "./approvals.js";
import { baseTitle, current, offerRetry, refreshTitle, tellEnded } from "./controls.js";

export function Turn(data) {
  this.id = data.id;
  this.lastSeq = 0;
  this.terminal = data.terminal;
  // How the run ended ("completed", "failed", "cancelled"): its ending event says it, else the
  // run's status as the page was rendered.
  this.ending = data.terminal ? data.status : null;
  this.html = data.html || {};
  this.decidable = data.decidable || [];
  this.states = data.requests || {};
  this.steps = {};
  this.approvals = {};
  this.streaming = null;
  this.lastMessage = null;
  this.waitingNotice = null;
  this.el = el("section", "turn");
  this.el.id = "run-" + data.id;
  this.el.setAttribute("aria-label", "Turn " + data.id);
  // A call an MCP client made (Claude Code, Cursor …) was not typed here: it reads as where it
  // came from, not as the person's own message.
  this.fromClient = data.path === "mcp";
  var you = this.fromClient
    ? el("div", "notice context from-client", "From an MCP client: " + data.input)
    : el("div", "bubble user", data.input);
  you.setAttribute("aria-label", this.fromClient ? "The call" : "Your message");
  this.el.appendChild(you);
  root.appendChild(this.el);
  if (!data.events.length && !data.terminal) {
    this.pendingNotice = this.notice("", "Waiting for the agent to start…");
  }
}

Turn.prototype.notice = function (kind, text) {
  var node = el("div", "notice" + (kind ? " " + kind : ""), text);
  node.setAttribute("role", "status");
  this.el.appendChild(node);
  return node;
};

Turn.prototype.waitingCount = function () {
  var self = this;
  return Object.keys(this.approvals).filter(function (id) {
    return !self.approvals[id].classList.contains("is-decided");
  }).length;
};

// Apply one event. Stored events at or below the last seq applied are ignored: a replay that
// overlaps what the page already shows changes nothing. ``fresh``: it arrived over the stream.
Turn.prototype.apply = function (event, fresh) {
  var p = event.payload || {};
  if (event.type === "llm.delta") {
    if (event.seq < this.lastSeq) return; // text of a message already stored
    return this.onDelta(p);
  }
  if (event.type === "approval.voted") return this.onVoted(p); // never stored: no seq of its own
  if (event.seq <= this.lastSeq) return;
  this.lastSeq = event.seq;
  this.el.dataset.lastSeq = String(event.seq);
  if (this.pendingNotice) { this.pendingNotice.remove(); this.pendingNotice = null; }
  var handler = this.handlers[event.type];
  if (handler) handler.call(this, p, event, fresh);
  reflectStatus(event, p);
  if (this === current) refreshTitle();
};

// Status badges outside the transcript (the run page's header) follow the events too, so a page
// left open never says "Awaiting approval" about a finished run.
var RUN_STATUS = {
  "run.started": "Running", "run.resumed": "Running", "run.suspended": "Awaiting approval",
  "run.completed": "Completed", "run.failed": "Failed",
};
// A run that ended on a refused call (an MCP client's or a workflow's one call) is labelled by
// what became of the call, not "Failed": nothing broke.
var ENDED_ON = { rejected: "Rejected", expired: "Not decided in time", cancelled: "Withdrawn" };
var lastVerdict = {};
function reflectStatus(event, p) {
  if (event.type === "approval.decided") lastVerdict[event.run_id] = p.status;
  var word = RUN_STATUS[event.type];
  if (word) {
    if (event.type === "run.failed" && p.stage === "cancelled") word = "Stopped";
    else if (event.type === "run.failed" && p.stage === "blocked") word = ENDED_ON[lastVerdict[event.run_id]] || "Blocked";
    document.querySelectorAll('[data-run-status="' + event.run_id + '"]').forEach(function (b) { b.textContent = word; });
  }
  if (event.type === "approval.decided") reflectRequest(p.request_id, p.status);
}
Turn.prototype.onDelta = function (p) {
  if (!this.streaming) {
    this.streaming = el("div", "bubble assistant streaming");
    this.streaming.setAttribute("aria-live", "polite");
    this.el.appendChild(this.streaming);
  }
  this.streaming.textContent += typeof p.text === "string" ? p.text : "";
};

// Model text: shown as plain text at once, then replaced by the server's sanitised rendering.
Turn.prototype.showMarkdown = function (node, seq, text) {
  node.textContent = text;
  var html = this.html[String(seq)];
  if (typeof html === "string") {
    node.innerHTML = html; // sanitised server-side (portal/markdown.py)
    return;
  }
  fetch(htmlUrl(this.id, seq), { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then(function (r) { return r.ok ? r.json() : null; })
    .then(function (body) { if (body && typeof body.html === "string") node.innerHTML = body.html; })
    .catch(function () { /* the plain text stays */ });
};

// The card of one tool call: its title and status; its input and result as tables in closed
// toggles; what hooks did, in sentences; the technical record in a last closed toggle.
Turn.prototype.step = function (p) {
  var id = p.tool_call_id;
  if (id && this.steps[id]) {
    var known = this.steps[id];
    if (p.title && !known.titled) { known.title = p.title; known.titleNode.textContent = p.title; known.titled = true; }
    return known;
  }
  var title = p.title || p.tool_title || readableName(p.tool);
  var node = el("article", "step");
  node.dataset.status = "proposed";
  var head = el("div", "step-head");
  var titleNode = el("span", "step-title", title);
  var status = el("span", "step-status", sentence("proposed"));
  var duration = el("span", "step-duration");
  head.appendChild(titleNode);
  head.appendChild(status);
  head.appendChild(duration);
  node.appendChild(head);
  var effects = el("ul", "effects");
  var argsBox = el("div");
  argsBox.appendChild(dataView(p.arguments || {}));
  var argsToggle = details("Input", argsBox, "step-args");
  node.appendChild(argsToggle);
  node.appendChild(effects);
  var tech = el("dl", "tech");
  var techToggle = details("Technical details", tech, "step-tech");
  node.appendChild(techToggle);
  this.el.appendChild(node);
  var step = {
    node: node, title: title, titled: Boolean(p.title || p.tool_title), titleNode: titleNode, status: status,
    duration: duration, argsBox: argsBox, effects: effects, tech: tech, techToggle: techToggle,
    proposed: pretty(p.arguments || {}), verdict: null,
  };
  this.techLine(step, "Tool", p.tool || "");
  if (id) {
    node.id = "step-" + this.id + "-" + id;
    this.steps[id] = step;
  }
  return step;
};

Turn.prototype.techLine = function (step, term, text) {
  step.tech.appendChild(el("dt", "", term));
  var dd = el("dd");
  dd.appendChild(el("code", "", text));
  step.tech.appendChild(dd);
};

// ``status`` stays lowercase in data-status (the styles key on it); people read it capitalised,
// as the badges of the inbox and the history write a status.
Turn.prototype.setStatus = function (step, status) {
  step.node.dataset.status = status;
  step.status.textContent = sentence(status);
};

// "A rule of this agent changed status to “pending” before the call." (``args``: the arguments
// that run; without them, only which arguments changed.)
var SET_BY_RULE = /^set (.+) on \S+$/;
Turn.prototype.describeSet = function (step, args) {
  if (!step.setNote) return;
  if (args) step.setArgs = args;
  var known = step.setArgs;
  var changes = step.setKeys.map(function (key) {
    var name = label(key).toLowerCase();
    if (!known || !Object.prototype.hasOwnProperty.call(known, key)) return name;
    var value = known[key];
    var text = scalarText(value, key, known);
    return name + " to “" + (text === null ? JSON.stringify(value) : text) + "”";
  });
  step.setNote.textContent = "A rule of this agent changed " + names(changes) + " before the call.";
};

Turn.prototype.effect = function (step, text, className) {
  step.effects.appendChild(el("li", className || "", text));
};

Turn.prototype.handlers = {
  "run.started": function () {},

  "llm.message": function (p, event) {
    var content = typeof p.content === "string" ? p.content : "";
    var node = this.streaming;
    this.streaming = null;
    if (!content.trim()) {
      if (node) node.remove();
      return;
    }
    if (!node) {
      node = el("div", "bubble assistant");
      this.el.appendChild(node);
    }
    node.classList.remove("streaming");
    node.removeAttribute("aria-live");
    this.lastMessage = { node: node, content: content };
    this.showMarkdown(node, event.seq, content);
  },

  "tool.proposed": function (p) { this.step(p); },

  "hook.side_effect": function (p) {
    var step = p.tool_call_id ? this.steps[p.tool_call_id] : null;
    var raw = (p.hook || "hook") + (p.failure ? " failed: " : ": ") + (p.message || "");
    var text = effectForPeople(p, step ? step.title : null);
    if (p.shadow) {
      // A hook in shadow mode changed nothing: what it would have done is for the trace only.
      if (step) this.techLine(step, "Hook note (shadow, changed nothing)", raw);
      return;
    }
    var set = SET_BY_RULE.exec(String(p.message || ""));
    if (step && set) {
      // The note names the arguments, not their values: the arguments that run (the approval
      // card's, the call's start) say them, and the line is completed when they arrive.
      this.techLine(step, "Hook note", raw);
      step.adjusted = true;
      step.setKeys = (step.setKeys || []).concat(set[1].split(/\s*,\s*/));
      if (!step.setNote) step.setNote = el("li", "set-by-rule");
      step.effects.appendChild(step.setNote);
      this.describeSet(step, null);
    } else if (step) {
      this.techLine(step, "Hook note", raw);
      // The approval card already says who approved.
      if (text && !(step.verdict && /^Approved by /.test(text))) {
        this.effect(step, text, p.failure ? "is-failure" : "");
      }
    } else if (text) {
      var node = this.notice(p.failure ? "failed" : "context", (p.point === "session_start" || p.point === "SessionStart" ? "Before the first answer: " : "") + text);
      node.title = raw;
    }
  },

  "tool.blocked": function (p) {
    var step = this.step(p);
    this.techLine(step, "What the agent was told", p.error || "");
    if (step.verdict && step.verdict !== "approved") {
      this.setStatus(step, step.verdict); // the card's verdict says who and why
    } else {
      this.setStatus(step, "blocked");
      this.effect(step, period("Blocked: " + (forPeople(p.error, step.title) || "a safety rule stopped this call")), "is-block");
    }
    this.closeApproval(p.tool_call_id);
  },

  "tool.started": function (p) {
    var step = this.step(p);
    this.setStatus(step, "running");
    this.describeSet(step, p.arguments || null);
    var running = pretty(p.arguments || {});
    if (running !== step.proposed) {
      step.argsBox.textContent = "";
      step.argsBox.appendChild(dataView(p.arguments || {}));
      if (!step.adjusted) this.effect(step, "The input was adjusted by a rule before the call (shown: what ran).");
    }
  },

  "tool.finished": function (p) {
    var step = this.step(p);
    this.setStatus(step, STATUS_WORDS[p.status] || p.status || "done");
    this.showTimes(step, p.duration_ms);
    var label = p.status === "unknown" ? "What is known" : "Result";
    var observation = p.observation === undefined || p.observation === null ? "(empty)" : p.observation;
    step.node.insertBefore(details(label, dataView(observation), "step-result"), step.techToggle);
  },

  "approval.pending": function (p, event) {
    var step = this.step(p);
    step.askedAt = event.created_at;
    if (p.arguments) this.describeSet(step, p.arguments);
    this.setStatus(step, "awaiting approval");
    this.approvalCard(step, p);
  },

  "approval.decided": function (p) {
    var step = this.steps[p.tool_call_id];
    if (step && step.askedAt && p.at) {
      step.waitedMs = Date.parse(p.at) - Date.parse(step.askedAt);
      this.showTimes(step);
    }
    this.showVerdict(p.request_id, p, step);
    if (this.waitingNotice) { this.waitingNotice.remove(); this.waitingNotice = null; }
  },

  "run.suspended": function (p) {
    var forApproval = (p.detail && p.detail.request_id) || /approval/i.test(p.reason || "");
    var words = forApproval
      ? (own ? "Waiting for approval — you can close this page; the run goes on once someone decides."
             : "Waiting for approval — the run goes on once someone decides.")
      : "Paused: " + (p.reason || "waiting") + " — the run will continue by itself.";
    if (this.waitingNotice) this.waitingNotice.remove();
    this.waitingNotice = this.notice("waiting", words);
  },

  "run.resumed": function (p) {
    if (this.waitingNotice) { this.waitingNotice.remove(); this.waitingNotice = null; }
    this.notice("resumed", resumedText(p.reason));
  },

  "run.completed": function (p, event, fresh) {
    this.terminal = true;
    this.ending = "completed";
    var output = typeof p.output === "string" ? p.output : "";
    if (output.trim() && !(this.lastMessage && this.lastMessage.content === output)) {
      var node = el("div", "bubble assistant final");
      this.el.appendChild(node);
      // An answer that is data (a tool's result handed back as it is, an MCP call's) reads as
      // the step's result does: a table, with the JSON one click away.
      if (/^\s*[[{]/.test(output) && isData(output)) node.appendChild(dataView(output));
      else this.showMarkdown(node, event.seq, output);
    } else if (this.lastMessage) {
      this.lastMessage.node.classList.add("final");
    }
    if (this.waitingNotice) { this.waitingNotice.remove(); this.waitingNotice = null; }
    if (fresh) tellEnded("The answer is ready", baseTitle);
    this.finish();
  },

  "run.failed": function (p, event, fresh) {
    this.terminal = true;
    this.ending = p.stage === "cancelled" ? "cancelled" : "failed";
    if (this.streaming) { this.streaming.classList.remove("streaming"); this.streaming = null; }
    if (this.waitingNotice) { this.waitingNotice.remove(); this.waitingNotice = null; }
    var text = p.stage === "cancelled" ? stopText(p.error) : failedText(p.stage, p.error);
    var node = this.notice(p.stage === "cancelled" ? "stopped" : "failed", text);
    node.classList.add("run-end");
    if (fresh) tellEnded("The run stopped", text);
    this.finish();
  },
};

// A step's times: how long the call took and, for one a person decided first, how long it waited
// for them (a minute's wait and a 150 ms call are not "Done 154 ms").
Turn.prototype.showTimes = function (step, ranMs) {
  if (ranMs !== undefined) step.ranMs = ranMs;
  var parts = [];
  if (typeof step.waitedMs === "number") parts.push("waited " + formatWait(step.waitedMs) + " for a decision");
  if (typeof step.ranMs === "number") parts.push((parts.length ? "ran " : "") + formatDuration(step.ranMs));
  step.duration.textContent = parts.join(" · ");
};

function isData(text) {
  try { var value = JSON.parse(text); return value !== null && typeof value === "object"; } catch (e) { return false; }
}

// The run ended: no card can be decided any more, and the stream, if any, closes (onFinish).
Turn.prototype.finish = function () {
  var self = this;
  Object.keys(this.approvals).forEach(function (id) {
    var card = self.approvals[id];
    card.querySelectorAll("form").forEach(function (n) { n.remove(); });
    var clockNode = card.querySelector("time.countdown");
    if (clockNode) clockNode.dataset.stopped = "1";
  });
  this.settleOpenCards();
  if (this.onFinish) this.onFinish();
  if (this === current) { refreshTitle(); offerRetry(this); }
};

// Step statuses after which sending the message again makes sense: the call did not happen.
// ("outcome unknown" is not one: the call may have gone through, and a retry could repeat it.)
var WENT_WRONG = ["failed", "blocked", "rejected", "expired", "cancelled"];

// Whether the run did not finish well: it failed or was stopped, or one of its calls was
// blocked, rejected, withdrawn or timed out. Only then is Retry offered: under an answer that
// went through (a payment made) it would read as "do it again".
Turn.prototype.wentWrong = function () {
  if (this.ending && this.ending !== "completed") return true;
  var steps = this.steps;
  return Object.keys(steps).some(function (id) { return WENT_WRONG.indexOf(steps[id].node.dataset.status) >= 0; });
};

// The approval cards of its steps (approvals.js).
Object.assign(Turn.prototype, cardMethods);
