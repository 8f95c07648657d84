// What happened, in words: a run's events as sentences people read. Text written for the model
// loses its instructions to the model, hook notes become sentences (or nothing, when another line
// already says it), and an approval request's votes and verdict name every voter.

import { own } from "./page.js";
import { clock, formatWait, period, readableName, sentence } from "./values.js";

export var STATUS_WORDS = { succeeded: "done", failed: "failed", unknown: "outcome unknown" };
export var CHANNEL_WORDS = { web: "the web inbox", feishu: "Feishu", slack: "Slack", wecom: "WeCom" };

export var TOOL_NAME = /\b[A-Za-z0-9][A-Za-z0-9_-]*__[A-Za-z0-9_]+\b/g;
var FOR_THE_MODEL = /[:;,]?\s*(the call was not executed\.|it was not executed\.|do not retry it(?: unless the user asks)?\.)/gi;
var NO_DECISION = /^No decision within (\d+) s\b/;

// Text written for the model (a block's observation) as people read it: without the
// instructions to the model, with tools by their titles.
export function forPeople(text, title) {
  var t = String(text || "").replace(FOR_THE_MODEL, "");
  t = t.replace(NO_DECISION, function (_, seconds) { return "Nobody decided within " + formatWait(seconds * 1000); });
  t = t.replace(TOOL_NAME, function (name) { return title || readableName(name); });
  return sentence(t.trim().replace(/[:;,]$/, ""));
}

// A hook's note on a call as a sentence, or null when another line already says it.
var EFFECTS = [
  [/^approved by (.+)$/, function (m) { return "Approved by " + m[1]; }],
  [/^approval \w+$/, null],
  [/^arguments changed by (.+) before approval$/, function (m) { return m[1] + " changed the input before approving"; }],
  [/^arguments differ from approval request/, function () { return "Refused: the input changed after approval was asked"; }],
  [/^denied \S+$/, null],
  [/^blocked \S+: .*\(organisation is read-only\)$/, null],
  [/^set (.+) on \S+$/, function (m) { return "A rule of this agent changed " + m[1] + " before the call"; }],
  [/^redacted (\d+) match\(es\) in \S+$/, function (m) { return "Hid " + m[1] + " sensitive value" + (m[1] === "1" ? "" : "s") + " in the result"; }],
  [/^truncated \S+ result by (\d+) characters$/, function (m) { return "The result was shortened by " + Number(m[1]).toLocaleString() + " characters"; }],
  [/^rate limited \S+ \((\d+) calls in the window\)$/, function () { return "Held back: too many calls in a short time"; }],
  [/^result withheld: (.+)$/, function (m) { return "The result was withheld: " + m[1]; }],
  // A prompt hook's note: the block or the approval card already says its reason to people.
  [/^model answered \w+ (in \d+ ms|from the cache)/, null],
];

export function effectForPeople(p, title) {
  if (p.failure) {
    return p.point === "PostToolUse"
      ? "A check on the result failed, so the result was withheld."
      : "A safety check failed, so the call was stopped.";
  }
  var message = String(p.message || "");
  for (var i = 0; i < EFFECTS.length; i++) {
    var m = EFFECTS[i][0].exec(message);
    if (m) return EFFECTS[i][1] ? EFFECTS[i][1](m) : null;
  }
  return forPeople(message, title) || null;
}

export function names(list) {
  if (list.length < 2) return list.join("");
  return list.slice(0, -1).join(", ") + " and " + list[list.length - 1];
}

function voter(v, withChoice) {
  var text = v.by || "someone";
  if (withChoice) text += v.approve ? " approved" : " rejected";
  if (v.at) text += " at " + clock(v.at);
  if (v.reason) text += " (“" + v.reason + "”)";
  return text;
}

// "1 of 2 approvals — april approved at 10:02"
export function tallyText(state) {
  var votes = state.votes || [];
  var required = state.approvals_required || 1;
  var approvals = typeof state.approvals === "number" ? state.approvals : votes.filter(function (v) { return v.approve; }).length;
  var line = approvals + " of " + required + " approval" + (required === 1 ? "" : "s");
  if (votes.length) line += " — " + votes.map(function (v) { return voter(v, true); }).join(", ");
  else line += " so far";
  return line;
}

// The final line of an approval card: the outcome and every voter.
export function verdictText(p) {
  var votes = Array.isArray(p.votes) ? p.votes : [];
  var status = p.status;
  var text;
  if ((status === "approved" || status === "rejected") && votes.length) {
    var approve = status === "approved";
    var deciding = votes.filter(function (v) { return v.approve === approve; });
    var others = votes.filter(function (v) { return v.approve !== approve; });
    text = (approve ? "Approved by " : "Rejected by ") + names(deciding.map(function (v) { return voter(v, false); }));
    if (others.length) text += "; " + names(others.map(function (v) { return voter(v, true); }));
  } else if (status === "approved" || status === "rejected") {
    text = (status === "approved" ? "Approved" : "Rejected") + (p.by ? " by " + p.by : "");
    if (p.at) text += " at " + clock(p.at);
    if (p.reason) text += " — “" + p.reason + "”";
  } else if (status === "expired") {
    text = "Expired — nobody decided in time";
    if (votes.length) text += " (" + tallyText({ votes: votes, approvals: p.approvals, approvals_required: p.approvals_required }) + ")";
    if (p.delivery_problem) text += ". The request could not be delivered: " + p.delivery_problem;
  } else if (status === "cancelled") {
    text = /stopped|cancel/i.test(p.reason || "") || !p.reason ? "Cancelled — the run was stopped" : "Cancelled — " + p.reason;
  } else {
    text = sentence(status || "decided");
  }
  if (p.edited_by) text += ". " + p.edited_by + " changed the input before approving";
  return text;
}

export function stopText(error) {
  var e = String(error || "");
  if (/^cancelled by the user$/i.test(e)) return own ? "You stopped the run." : "Its user stopped the run.";
  return period("The run was stopped: " + e.replace(/^cancelled by /i, "stopped by "));
}

// Why a run went on after a pause, in words: the approval's outcome, not "Resumed: …".
var RESUMED = [
  [/^approval request approved$/, "Approved — the agent goes on."],
  [/^approval request rejected$/, "Rejected — the agent goes on without that call."],
  [/^approval request expired$/, "Nobody decided in time — the agent goes on without that call."],
  [/^approval request cancelled$/, "The request was withdrawn — the agent goes on without that call."],
  [/^its approval was settled$/, "The approval was settled — the agent goes on."],
  [/^its child run \d+ ended/, "The agent it asked has finished — it goes on."],
  [/^the previous worker stopped$/, "Picked up again after an interruption — the agent goes on."],
];
export function resumedText(reason) {
  var r = String(reason || "");
  for (var i = 0; i < RESUMED.length; i++) if (RESUMED[i][0].test(r)) return RESUMED[i][1];
  return r ? period("The agent goes on (" + forPeople(r).replace(/\.$/, "") + ")") : "The agent goes on.";
}

// How a run that did not finish ended, in words: what stopped it and why.
export function failedText(stage, error) {
  var why = forPeople(error || "");
  if (stage === "max_iterations") return "The agent stopped: it took too many steps without finishing.";
  if (stage === "blocked") return period("Not done: " + (why || "a safety rule refused the call"));
  if (stage === "tool") return period("The call did not go through: " + (why || "no reason given"));
  var what = STAGE_WORDS[stage];
  return period("The run stopped" + (what ? " (a problem with " + what + ")" : "") + (why ? ": " + why : ""));
}

export var STAGE_WORDS = {
  hooks: "a safety rule", tools: "its tools", llm: "the model", engine: "the platform",
  plan: "its plan", steps: "one of its steps",
};
