// What the chat page says about itself: the transcript element and its data attributes (where
// the page may fetch and post, whose conversation it is, whether the run streams), and the
// server's clock. Read once, when the modules load: deferred, after the page was parsed.
//
// Both pages that show runs (chat.html, transcript.html) render the same #transcript element;
// chat.js does nothing on a page without it.

export var root = document.getElementById("transcript");
export var dataNode = document.getElementById("turns-data");

var data = root ? root.dataset : {};
export var live = data.live === "1";
export var own = data.own === "1";
export var csrf = data.csrf;
export var ZERO_UUID = "00000000-0000-0000-0000-000000000000";

// Countdowns count against the server's clock, not a viewer's that is a few minutes off.
var clockNode = document.querySelector("main") || root;
var serverNow = Date.parse((clockNode && clockNode.getAttribute("data-server-now")) || "");
export var skew = isNaN(serverNow) ? 0 : serverNow - Date.now();

export function urlFor(template, replacements) {
  var url = template;
  replacements.forEach(function (pair) { url = url.replace(pair[0], encodeURIComponent(pair[1])); });
  return url;
}

export function htmlUrl(runId, seq) {
  // The template is /runs/0/events/0/html/: replace the two zeros in order.
  return root.dataset.htmlUrl.replace("/runs/0/", "/runs/" + runId + "/").replace("/events/0/", "/events/" + seq + "/");
}

// Where approval request ``requestId`` stands now, as the server says it (null when it says
// nothing: the caller keeps what it shows).
export function requestState(requestId) {
  return fetch(urlFor(root.dataset.stateUrl, [[ZERO_UUID, requestId]]), {
    credentials: "same-origin", headers: { Accept: "application/json" },
  })
    .then(function (r) { return r.ok ? r.json() : null; });
}
