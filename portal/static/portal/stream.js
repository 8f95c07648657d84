// The live stream of the unfinished run: ws/runs/<id>/?after=<last seq seen>, reconnecting with
// backoff after a drop. The server replays what the page missed, then live events; Turn.apply
// (turn.js) ignores any event at or below the last seq it applied, so nothing shows twice.
//
// While it streams, the composer offers Stop instead of Send; the link state says when the
// connection is lost.

import { baseTitle, notify, setBusy } from "./controls.js";

var linkState = document.getElementById("link-state");
function showLink(text) {
  if (!linkState) return;
  linkState.hidden = !text;
  linkState.textContent = text || "";
}

// Follows ``turn`` until it ends. A drop reconnects after a growing, jittered delay (many pages
// do not come back at once after a restart); a refusal (signed out, a run it cannot follow) is
// final, as asking again would be refused again.
export function follow(turn) {
  var attempt = 0;
  var socket = null;
  var closedForGood = false;
  setBusy(true);
  turn.onFinish = function () {
    closedForGood = true;
    showLink("");
    if (socket) socket.close(1000);
    setBusy(false);
  };
  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + "/ws/runs/" + turn.id + "/?after=" + turn.lastSeq);
    window.__portalSocket = socket; // lets the browser tests drop the connection on purpose
    socket.onopen = function () { attempt = 0; showLink(""); };
    socket.onmessage = function (message) {
      var event;
      try { event = JSON.parse(message.data); } catch (e) { return; }
      if (!event || event.run_id !== turn.id) return;
      var waitingBefore = turn.waitingCount();
      turn.apply(event, true);
      if (turn.waitingCount() > waitingBefore) notify("Waiting for approval", baseTitle);
    };
    socket.onclose = function (e) {
      if (closedForGood || turn.terminal) return;
      if (e.code === 4401 || e.code === 4404 || e.code === 4400) {
        showLink(e.code === 4401 ? "Signed out — sign in again to follow this run" : "This run cannot be followed");
        return;
      }
      attempt += 1;
      var delay = Math.min(15000, 500 * Math.pow(2, attempt - 1)) * (0.75 + Math.random() * 0.5);
      showLink("Connection lost — reconnecting…");
      setTimeout(connect, delay);
    };
  }
  connect();
}
