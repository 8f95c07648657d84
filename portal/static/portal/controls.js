// The conversation's controls around the transcript: the page's title and notifications (how
// many requests wait, "Done" once the run ends in a hidden tab), the composer's Send and Stop, and
// Retry under a turn that went wrong. Rename and archive are plain forms; while a run works,
// Archive waits.

import { csrf, root } from "./page.js";
import { el } from "./values.js";

// --- the page's title and notifications --------------------------------------------------------

export var baseTitle = document.title;
var doneWhileHidden = false;
export var current = null;

// The turn the page follows, the conversation's last: chat.js names it once the stored turns are
// rendered.
export function setCurrent(turn) {
  current = turn;
}

export function refreshTitle() {
  var waiting = current && !current.terminal ? current.waitingCount() : 0;
  if (waiting) document.title = "(" + waiting + ") Waiting for approval — " + baseTitle;
  else if (doneWhileHidden) document.title = "Done — " + baseTitle;
  else document.title = baseTitle;
}

export function watchVisibility() {
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) { doneWhileHidden = false; refreshTitle(); }
  });
}

var notifyToggle = document.getElementById("notify-toggle");
function showNotifyToggle() {
  if (!notifyToggle || !("Notification" in window)) return;
  var permission = Notification.permission;
  // Blocked by the browser: say so, rather than let the button vanish without a word.
  notifyToggle.hidden = false;
  notifyToggle.disabled = permission !== "default";
  notifyToggle.textContent = permission === "granted" ? "Notifications on"
    : permission === "denied" ? "Notifications blocked" : "Notify me";
  notifyToggle.title = permission === "granted"
    ? "You are told when the run needs someone or finishes while this tab is hidden."
    : permission === "denied"
      ? "Notifications are blocked for this site in your browser's settings: allow them there to be told."
      : "Be told when the run needs someone or finishes while this tab is hidden.";
}
export function wireNotifyToggle() {
  if (!notifyToggle) return;
  notifyToggle.addEventListener("click", function () {
    if (!("Notification" in window)) return;
    var asked = Notification.requestPermission(showNotifyToggle);
    if (asked && asked.then) asked.then(showNotifyToggle);
  });
  showNotifyToggle();
}

export function notify(title, body) {
  if (!document.hidden || !("Notification" in window) || Notification.permission !== "granted") return;
  try {
    new Notification(title, { body: body, tag: "fimone-run" });
  } catch (e) { /* a browser that refuses page notifications: the title still says it */ }
}

// The run ended while the page streamed it: a tab left hidden says "Done" in its title until it is
// looked at again, and a notification says it, when the person asked for them.
export function tellEnded(title, body) {
  doneWhileHidden = document.hidden;
  notify(title, body);
}

// --- the composer: Send while idle, Stop while the agent works, Retry after --------------------

var sendButton = document.getElementById("send");
var stopButton = document.getElementById("stop");
var hint = document.getElementById("composer-hint");
var archiveForm = document.getElementById("archive-form");

export function setBusy(busy) {
  if (sendButton) { sendButton.hidden = busy; sendButton.disabled = busy; }
  if (stopButton) {
    stopButton.hidden = !busy;
    stopButton.disabled = false;
    stopButton.textContent = "Stop";
  }
  if (hint) {
    hint.dataset.kind = "help";
    hint.textContent = busy
      ? "The agent is working: stop it, or write your next message and send it when it has finished."
      : "Enter sends · Shift+Enter for a new line";
  }
  if (archiveForm) archiveForm.querySelectorAll("button").forEach(function (b) { b.disabled = busy; b.title = busy ? "Stop the run first" : ""; });
}

export function wireStop() {
  if (!stopButton) return;
  stopButton.addEventListener("click", function (e) {
    e.preventDefault();
    stopButton.disabled = true;
    stopButton.textContent = "Stopping…";
    var body = new FormData();
    body.set("csrfmiddlewaretoken", csrf);
    fetch(stopButton.formAction, {
      method: "POST", body: body, credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRFToken": csrf },
    })
      .then(function (r) { return r.json().catch(function () { return { ok: false, message: "The run could not be stopped (" + r.status + ")." }; }); })
      .then(function (answer) {
        if (hint) { hint.dataset.kind = "message"; hint.textContent = answer.message || ""; }
        if (!answer.ok) { stopButton.disabled = false; stopButton.textContent = "Stop"; }
      })
      .catch(function () {
        if (hint) {
          hint.dataset.kind = "message";
          hint.textContent = "The run could not be stopped: check your connection and try again.";
        }
        stopButton.disabled = false;
        stopButton.textContent = "Stop";
      });
  });
}

// "Retry": the last message again, as a new run of this conversation (a plain form post).
export function offerRetry(turn) {
  var url = root.dataset.retryUrl;
  if (!url || !turn.terminal || turn.el.querySelector(".turn-actions") || !turn.wentWrong()) return;
  var form = el("form", "turn-actions");
  form.method = "post";
  form.action = url;
  var token = el("input");
  token.type = "hidden"; token.name = "csrfmiddlewaretoken"; token.value = csrf;
  var retry = el("button", "btn-small", "Retry");
  retry.type = "submit";
  retry.title = "Send your last message again, as a new request to the agent";
  form.appendChild(token);
  form.appendChild(retry);
  turn.el.appendChild(form);
}
