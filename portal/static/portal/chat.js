// The chat page: renders a conversation's runs from their events, stored and live, for a person.
//
// One renderer for both: the page embeds each run's stored events (json_script "turns-data"), and
// the unfinished run streams the rest over ws/runs/<id>/?after=<last seq seen>, reconnecting with
// backoff after a drop. The server replays what the page missed, then live events; the page also
// ignores any stored event at or below the last seq it applied, so nothing shows twice.
//
// People read it, not operators: tools by their titles, hook notes as sentences, the outcome of a
// blocked or declined call in words (what the model was told, the tool's internal name and the raw
// JSON stay one click away, in closed "Technical details" toggles), arguments and
// results as small tables with amounts in their currency and moments in the viewer's time zone.
//
// Safety: everything a model or a tool produced is set with textContent. The one exception is the
// formatted text of a message, which the server rendered from Markdown with HTML disabled and
// sanitised with nh3 (portal/markdown.py); only that HTML is ever assigned to innerHTML.
//
// This file is the entry point (a native module, loaded by chat.html and transcript.html), which
// wires the others, all in this folder:
//   page.js       what the page says about itself (its data attributes, the server's clock)
//   values.js     DOM helpers, and arguments and results as tables, money and moments
//   words.js      what happened, in words: hook notes, verdicts, tallies, endings
//   turn.js       one run of the conversation: its events applied once each, as steps and bubbles
//   approvals.js  the approval cards: tally, countdown, the form to decide, the verdict
//   controls.js   the title and notifications, Send and Stop, Retry
//   stream.js     the live stream: the WebSocket, reconnecting, replay from the last seq
//
// The imports are relative ("./turn.js"): they resolve next to this file under STATIC_URL, where
// the static files keep their own names. A storage that hashes the names (ManifestStaticFilesStorage)
// must rewrite these imports too (support_js_module_import_aggregation = True), or a hashed chat.js,
// cached for long, would import whichever unhashed turn.js is newest.

import { dataNode, live, root } from "./page.js";
import { el } from "./values.js";
import { startCountdowns } from "./approvals.js";
import {
  current, offerRetry, refreshTitle, setBusy, setCurrent, watchVisibility, wireNotifyToggle, wireStop,
} from "./controls.js";
import { Turn } from "./turn.js";
import { follow } from "./stream.js";

if (root && dataNode) start();

function start() {
  var turnsData = JSON.parse(dataNode.textContent);
  startCountdowns();
  watchVisibility();
  wireNotifyToggle();
  wireStop();

  // ``current`` stays unset while the stored turns render: only the last one offers Retry and
  // sets the title, once it is known.
  var turns = turnsData.map(function (data) {
    var turn = new Turn(data);
    data.events.forEach(function (event) { turn.apply(event, false); });
    if (turn.terminal) turn.settleOpenCards();
    return turn;
  });
  if (!turns.length) root.appendChild(el("p", "muted", "No messages yet."));
  setCurrent(turns[turns.length - 1] || null);
  if (current && current.terminal) {
    // The page was rendered while the run was finishing: its stored events say it ended.
    offerRetry(current);
    setBusy(false);
  }
  refreshTitle();
  if (live && current && !current.terminal) follow(current);
  if (current) current.el.scrollIntoView({ block: "end" });
}
