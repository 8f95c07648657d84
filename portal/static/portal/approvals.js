// The approval cards of a turn's steps: what a call is about and exactly what would run, who may
// decide and where the request was sent, the votes so far (a tally), a countdown to its expiry,
// the form to decide for the people who may, and the verdict that names every voter.
//
// A card's methods are a Turn's (turn.js adds them to Turn.prototype): ``this`` is the turn.

import { csrf, live, requestState, root, skew, urlFor, ZERO_UUID } from "./page.js";
import { DATE_AND_CLOCK, contextCurrency, dataView, details, el, moment, sentence, valueNode } from "./values.js";
import { CHANNEL_WORDS, tallyText, verdictText } from "./words.js";
import { current, offerRetry, refreshTitle } from "./controls.js";

export var cardMethods = {};

// --- countdowns --------------------------------------------------------------------------------

var clocks = [];
function pad(n) { return n < 10 ? "0" + n : String(n); }
function countdownText(seconds) {
  var h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
  return (h ? h + "h " + pad(m) + "m " : m ? m + "m " : "") + pad(s) + "s left";
}
function tickClocks() {
  var now = Date.now() + skew;
  clocks = clocks.filter(function (c) { return c.isConnected && !c.dataset.stopped; });
  clocks.forEach(function (c) {
    var left = Math.floor((Date.parse(c.getAttribute("datetime")) - now) / 1000);
    if (left > 0) {
      c.textContent = countdownText(left);
      c.classList.toggle("is-urgent", left < 60);
    } else {
      c.textContent = "expired";
      c.classList.remove("is-urgent");
      c.classList.add("is-expired");
      var card = c.closest(".approval");
      if (card) card.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    }
  });
}
export function startCountdowns() {
  setInterval(tickClocks, 1000);
}

// --- the cards ---------------------------------------------------------------------------------

// Request badges outside the transcript (the run page's list of its requests) follow the verdict.
export function reflectRequest(requestId, status) {
  if (!requestId || !status) return;
  document.querySelectorAll('[data-request-status="' + requestId + '"]').forEach(function (b) {
    b.textContent = sentence(status);
    b.className = "badge badge-" + status;
  });
}

// The votes on a request that waits for more (stream-only: a reload reads them from the page's
// data instead).
cardMethods.onVoted = function (p) {
  var card = this.approvals[p.request_id];
  if (!card || card.classList.contains("is-decided")) return;
  // A staged request that moved on has the next stage's deadline: the countdown follows it.
  var clockNode = p.expires_at ? card.querySelector("time.countdown") : null;
  if (clockNode) {
    clockNode.setAttribute("datetime", p.expires_at);
    clockNode.title = "until " + moment(new Date(p.expires_at), DATE_AND_CLOCK);
  }
  var names = p.approvers ? card.querySelector(".may-decide-names") : null;
  if (names) names.textContent = p.approvers.map(function (a) { return a.name; }).join(", ") || "nobody";
  this.showTally(card, p);
};

cardMethods.showTally = function (card, state) {
  var required = state.approvals_required || Number(card.dataset.required || 1);
  var tally = card.querySelector(".tally");
  if (required <= 1 && !(state.votes && state.votes.length) && !state.stage) return;
  if (!tally) {
    tally = el("p", "tally");
    tally.setAttribute("role", "status");
    var meta = card.querySelector(".meta");
    card.insertBefore(tally, meta ? meta.nextSibling : null);
  }
  var line = tallyText({ votes: state.votes || [], approvals: state.approvals, approvals_required: required });
  var stage = state.stage || card.dataset.stage;
  if (state.stage) card.dataset.stage = state.stage;
  tally.textContent = stage ? stage + ": " + line : line;
};

// The verdict on request ``requestId`` (an ``approval.decided`` payload, or the request's state
// when the run recorded none, as when it was stopped while waiting).
cardMethods.showVerdict = function (requestId, p, step) {
  var card = this.approvals[requestId];
  if (card && card.classList.contains("is-decided")) return;
  var known = this.states[requestId] || {};
  var merged = {};
  [known, p].forEach(function (source) {
    Object.keys(source).forEach(function (k) {
      if (source[k] !== undefined && source[k] !== null && source[k] !== "") merged[k] = source[k];
    });
  });
  if (!Array.isArray(p.votes) && Array.isArray(known.votes)) merged.votes = known.votes;
  var verdict = el("p", "verdict " + (merged.status || ""), verdictText(merged));
  if (card) {
    card.classList.add("is-decided");
    // Decided: who may decide no longer matters, and the arguments are no longer a prospect.
    card.querySelectorAll("form, .decide-outcome, .tally, .may-decide").forEach(function (n) { n.remove(); });
    var caption = card.querySelector(".args-caption");
    if (caption) caption.textContent = merged.status === "approved" ? ARGS_CAPTION.approved : ARGS_CAPTION.other;
    var clockNode = card.querySelector("time.countdown");
    if (clockNode) { clockNode.dataset.stopped = "1"; clockNode.remove(); }
    var title = card.querySelector(".approval-title");
    if (title) title.textContent = "Approval request";
    card.appendChild(verdict);
  } else if (step) {
    step.node.appendChild(verdict);
  } else {
    this.el.appendChild(verdict);
  }
  if (step) {
    step.verdict = merged.status;
    if (merged.status === "approved") this.setStatus(step, "approved");
    else this.setStatus(step, merged.status || "blocked");
  }
  reflectRequest(requestId, merged.status);
  if (this === current) {
    refreshTitle();
    offerRetry(this); // a verdict read after the run ended (withdrawn, expired) may call for it
  }
  var required = Number(merged.approvals_required || (card && card.dataset.required) || 1);
  if (!Array.isArray(p.votes) && required > 1 && merged.status !== "cancelled") {
    // A verdict recorded without its votes (older runs): read them, so the line names every voter.
    requestState(requestId)
      .then(function (state) {
        if (state && Array.isArray(state.votes) && state.votes.length) {
          merged.votes = state.votes;
          verdict.textContent = verdictText(merged);
        }
      })
      .catch(function () {});
  }
};

// Cards still open once the run ended: their requests were withdrawn or decided without the run
// recording it (a run stopped while it waited). Ask where they stand and say it.
cardMethods.settleOpenCards = function () {
  var self = this;
  Object.keys(this.approvals).forEach(function (id) {
    var card = self.approvals[id];
    if (card.classList.contains("is-decided")) return;
    var step = self.steps[card.dataset.toolCallId];
    var known = self.states[id];
    if (known && known.status && known.status !== "pending") {
      self.showVerdict(id, { request_id: id }, step);
      return;
    }
    requestState(id)
      .then(function (state) {
        if (!state || !state.status || state.status === "pending") return;
        self.states[id] = state;
        self.showVerdict(id, { request_id: id }, step);
      })
      .catch(function () {});
  });
};

cardMethods.closeApproval = function (toolCallId) {
  var self = this;
  Object.keys(this.approvals).forEach(function (id) {
    var card = self.approvals[id];
    if (card.dataset.toolCallId === toolCallId) card.querySelectorAll("form").forEach(function (n) { n.remove(); });
  });
};

// What the arguments of an approval card are, as its request stands: what would run while it
// waits, what was approved once approved, what was only asked once it came to nothing.
var ARGS_CAPTION = {
  pending: "Exactly what will run if approved", approved: "What was approved", other: "What was asked",
};

cardMethods.approvalCard = function (step, p) {
  if (this.approvals[p.request_id]) return;
  var known = this.states[p.request_id] || {};
  if (!step.titled && (p.tool_title || known.tool_title)) {
    step.title = p.tool_title || known.tool_title;
    step.titleNode.textContent = step.title;
  }
  var card = el("div", "approval");
  card.id = "approval-" + p.request_id;
  card.dataset.toolCallId = p.tool_call_id || "";
  card.dataset.required = String(p.approvals_required || known.approvals_required || 1);
  var head = el("div", "approval-head");
  head.appendChild(el("span", "approval-title", "Waiting for approval"));
  var deadline = known.expires_at || p.expires_at; // a staged request's current stage's, once known
  if (deadline) {
    var clockNode = el("time", "countdown", "until " + moment(new Date(deadline), DATE_AND_CLOCK));
    clockNode.setAttribute("datetime", deadline);
    head.appendChild(clockNode);
    clocks.push(clockNode);
  }
  card.appendChild(head);
  var context = Array.isArray(p.context) && p.context.length ? p.context : Array.isArray(known.context) ? known.context : [];
  if (context.length) {
    card.appendChild(el("div", "caption", "What it is about"));
    var facts = {};
    var rows = el("table", "kv context");
    var body = el("tbody");
    context.forEach(function (item) { if (item && item.label !== undefined) facts[item.label] = item.value; });
    context.forEach(function (item) {
      if (!item || item.label === undefined) return;
      var tr = el("tr");
      tr.appendChild(el("th", "", item.label));
      var td = el("td");
      td.appendChild(valueNode(item.value, item.label, facts, 1));
      tr.appendChild(td);
      body.appendChild(tr);
    });
    rows.appendChild(body);
    card.appendChild(rows);
  }
  var args = dataView(p.arguments || {}, contextCurrency(context));
  args.classList.add("args");
  args.setAttribute("aria-label", "Arguments");
  if (context.length) {
    // What it is about says it for people; the exact input is one click away (open for deciders).
    var exact = details(ARGS_CAPTION.pending, args, "exact-args");
    exact.querySelector("summary").classList.add("args-caption");
    card.appendChild(exact);
  } else {
    card.appendChild(el("div", "caption args-caption", ARGS_CAPTION.pending));
    card.appendChild(args);
  }
  var meta = el("div", "meta");
  var approverNames = (known.approvers || p.approvers || []).map(function (a) { return a.name; }).join(", ") || "nobody";
  var who = el("span", "may-decide", "Who may decide: ");
  who.appendChild(el("b", "may-decide-names", approverNames));
  meta.appendChild(who);
  var where = el("span", "", "Sent to: ");
  where.appendChild(el("b", "", CHANNEL_WORDS[p.channel] || p.channel || "the web inbox"));
  meta.appendChild(where);
  card.appendChild(meta);
  step.node.insertBefore(card, step.techToggle);
  this.approvals[p.request_id] = card;
  this.showTally(card, {
    votes: known.votes || [], approvals: known.approvals,
    approvals_required: known.stage ? known.approvals_required : p.approvals_required || known.approvals_required,
    stage: known.stage || p.stage,
  });
  tickClocks();
  var self = this;
  if (this.decidable.indexOf(p.request_id) >= 0) {
    this.decideForm(card, p);
  } else if (live && !this.terminal) {
    requestState(p.request_id)
      .then(function (state) {
        if (state && state.may_decide && !card.classList.contains("is-decided") && !self.terminal) self.decideForm(card, p);
      })
      .catch(function () {});
  }
};

cardMethods.decideForm = function (card, p) {
  if (card.querySelector("form")) return;
  var exact = card.querySelector("details.exact-args");
  if (exact) exact.open = true; // a decider reads exactly what they approve
  var form = el("form", "decide");
  form.method = "post";
  form.action = urlFor(root.dataset.decideUrl, [[ZERO_UUID, p.request_id]]);
  var token = el("input");
  token.type = "hidden"; token.name = "csrfmiddlewaretoken"; token.value = csrf;
  var next = el("input");
  next.type = "hidden"; next.name = "next"; next.value = root.dataset.back || "/";
  var reasonId = "reason-" + p.request_id;
  var reasonLabel = el("label", "", "Reason ");
  reasonLabel.htmlFor = reasonId;
  reasonLabel.appendChild(el("span", "hint", "— optional, but tell the agent why when you reject"));
  var reason = el("textarea");
  reason.id = reasonId; reason.name = "reason"; reason.rows = 2; reason.maxLength = 2000;
  var actions = el("div", "actions");
  ["approve", "reject"].forEach(function (choice) {
    var b = el("button", "btn " + (choice === "approve" ? "btn-approve" : "btn-reject"), choice === "approve" ? "Approve" : "Reject");
    b.type = "submit"; b.name = "decision"; b.value = choice;
    actions.appendChild(b);
  });
  [token, next, reasonLabel, reason, actions].forEach(function (n) { form.appendChild(n); });
  var outcome = el("p", "decide-outcome");
  outcome.setAttribute("role", "status");
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var choice = e.submitter && e.submitter.value ? e.submitter.value : "approve";
    var body = new FormData(form);
    body.set("decision", choice);
    form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    fetch(form.action, {
      method: "POST", body: body, credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRFToken": csrf },
    })
      .then(function (r) { return r.json().catch(function () { return { message: "The decision could not be sent (" + r.status + ")." }; }); })
      .then(function (answer) {
        outcome.textContent = answer.message || "";
        if (answer.accepted) form.remove();
        else form.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
        if (!outcome.isConnected) card.appendChild(outcome);
      })
      .catch(function () {
        outcome.textContent = "The decision could not be sent: check your connection and try again.";
        card.appendChild(outcome);
        form.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
      });
  });
  card.appendChild(form);
};
