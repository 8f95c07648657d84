// The chat page: renders a conversation's runs from their events, stored and live, for a person.
//
// One renderer for both: the page embeds each run's stored events (json_script "turns-data"), and
// the unfinished run streams the rest over ws/runs/<id>/?after=<last seq seen>, reconnecting with
// backoff after a drop. The server replays what the page missed, then live events; the page also
// ignores any stored event at or below the last seq it applied, so nothing shows twice.
//
// People read it, not operators: tools by their titles, hook notes as sentences, the outcome of a
// blocked or declined call in words (what the model was told, the tool's internal name and the raw
// JSON stay one click away, in closed "Technical details" and "Show JSON" toggles), arguments and
// results as small tables with amounts in their currency and moments in the viewer's time zone.
//
// Safety: everything a model or a tool produced is set with textContent. The one exception is the
// formatted text of a message, which the server rendered from Markdown with HTML disabled and
// sanitised with nh3 (portal/markdown.py); only that HTML is ever assigned to innerHTML.
(function () {
  "use strict";

  var root = document.getElementById("transcript");
  var dataNode = document.getElementById("turns-data");
  if (!root || !dataNode) return;

  var turnsData = JSON.parse(dataNode.textContent);
  var live = root.dataset.live === "1";
  var own = root.dataset.own === "1";
  var csrf = root.dataset.csrf;
  var ZERO_UUID = "00000000-0000-0000-0000-000000000000";
  var LONG_TEXT = 280;
  var MAX_ROWS = 20;
  var MAX_COLUMNS = 8;
  var MAX_DEPTH = 4;
  var STATUS_WORDS = { succeeded: "done", failed: "failed", unknown: "outcome unknown" };
  var CHANNEL_WORDS = { web: "the web inbox", feishu: "Feishu", slack: "Slack", wecom: "WeCom" };
  var serverNow = Date.parse((document.querySelector("main") || root).getAttribute("data-server-now") || "");
  var skew = isNaN(serverNow) ? 0 : serverNow - Date.now();

  // --- small DOM helpers ------------------------------------------------------------------------

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function button(className, text) {
    var b = el("button", className, text);
    b.type = "button";
    return b;
  }

  function pretty(value) {
    if (typeof value === "string") return value;
    try {
      return JSON.stringify(sortKeys(value), null, 2);
    } catch (e) {
      return String(value);
    }
  }

  function sortKeys(value) {
    if (Array.isArray(value)) return value.map(sortKeys);
    if (value && typeof value === "object") {
      var out = {};
      Object.keys(value).sort().forEach(function (k) { out[k] = sortKeys(value[k]); });
      return out;
    }
    return value;
  }

  function sentence(text) {
    var t = String(text || "").trim();
    return t ? t.charAt(0).toUpperCase() + t.slice(1) : t;
  }

  // Ends ``text`` with one full stop, unless it already ends a sentence.
  function period(text) {
    var t = String(text || "").trim();
    return /[.!?…”"]$/.test(t) ? t : t + ".";
  }

  // "oa__purchase_pay" → "Purchase pay": the name made readable when a tool carries no title.
  function readableName(name) {
    var words = String(name || "").split("__").pop().replace(/[_-]+/g, " ").trim();
    return sentence(words || String(name || "tool"));
  }

  // "paid_at" → "Paid at": a key of a tool's JSON as a label.
  function label(key) {
    return sentence(String(key).replace(/([a-z])([A-Z])/g, "$1 $2").replace(/[_-]+/g, " ").toLowerCase());
  }

  function clock(iso) {
    var when = new Date(iso);
    if (isNaN(when.getTime())) return "";
    return when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  function formatDuration(ms) {
    if (typeof ms !== "number") return "";
    return ms < 1000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + " s";
  }

  function urlFor(template, replacements) {
    var url = template;
    replacements.forEach(function (pair) { url = url.replace(pair[0], encodeURIComponent(pair[1])); });
    return url;
  }

  function htmlUrl(runId, seq) {
    // The template is /runs/0/events/0/html/: replace the two zeros in order.
    return root.dataset.htmlUrl.replace("/runs/0/", "/runs/" + runId + "/").replace("/events/0/", "/events/" + seq + "/");
  }

  function details(summary, body, className) {
    var d = el("details", className || "");
    d.appendChild(el("summary", "", summary));
    d.appendChild(body);
    return d;
  }

  // A long text, cut to a preview with a "Show all" button that reveals the rest.
  function collapsibleText(text, className) {
    var wrap = el("div", className || "long-text");
    var body = el("span", "", text.length > LONG_TEXT ? text.slice(0, LONG_TEXT) + " …" : text);
    wrap.appendChild(body);
    if (text.length > LONG_TEXT) {
      var more = button("show-all", "Show all (" + text.length.toLocaleString() + " characters)");
      more.addEventListener("click", function () { body.textContent = text; more.remove(); });
      wrap.appendChild(more);
    }
    return wrap;
  }

  // --- values as people read them ---------------------------------------------------------------

  var ISO_MOMENT = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/;
  var ISO_DAY = /^(\d{4})-(\d{2})-(\d{2})$/;
  var AMOUNT_KEY = /(^|[_\s-])(amount|price|total|subtotal|cost|sum|balance|fee|tax|value)([_\s-]|$)/i;
  var CURRENCY = /^[A-Z]{3}$/;

  function currencyOf(siblings) {
    if (!siblings || typeof siblings !== "object") return null;
    var found = null;
    Object.keys(siblings).forEach(function (k) {
      if (/^(currency|currency_code)$/i.test(k) && typeof siblings[k] === "string" && CURRENCY.test(siblings[k].trim())) {
        found = siblings[k].trim();
      }
    });
    return found;
  }

  function money(amount, currency) {
    var text = amount.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
    return text + " " + currency;
  }

  // A scalar as text, or null when it is not a scalar. ``key`` and ``siblings`` give it meaning:
  // an amount next to a currency reads "1,200.00 USD".
  function scalarText(value, key, siblings) {
    if (value === null || value === undefined) return "—";
    if (typeof value === "boolean") return value ? "yes" : "no";
    var currency = key !== undefined && AMOUNT_KEY.test(String(key)) ? currencyOf(siblings) : null;
    if (typeof value === "number") {
      if (currency) return money(value, currency);
      return value.toLocaleString(undefined, { maximumFractionDigits: 6 });
    }
    if (typeof value === "string") {
      var trimmed = value.trim();
      if (currency && trimmed !== "" && !isNaN(Number(trimmed))) return money(Number(trimmed), currency);
      var day = ISO_DAY.exec(trimmed);
      if (day) {
        var d = new Date(Number(day[1]), Number(day[2]) - 1, Number(day[3]));
        return d.toLocaleDateString([], { year: "numeric", month: "short", day: "numeric" });
      }
      if (ISO_MOMENT.test(trimmed)) {
        var when = new Date(trimmed);
        if (!isNaN(when.getTime())) {
          return when.toLocaleString([], { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
        }
      }
      return value;
    }
    return null;
  }

  function isPlainObject(value) {
    return value !== null && typeof value === "object" && !Array.isArray(value);
  }

  function valueNode(value, key, siblings, depth) {
    var text = scalarText(value, key, siblings);
    if (text !== null) {
      if (typeof value === "string" && text.length > LONG_TEXT) return collapsibleText(text);
      var span = el("span", value === null || value === undefined ? "muted" : "", text);
      if (typeof value === "string" && text !== value) span.title = value; // the moment as sent
      return span;
    }
    if (depth >= MAX_DEPTH) return el("span", "muted", Array.isArray(value) ? value.length + " items" : "…");
    if (Array.isArray(value)) {
      if (!value.length) return el("span", "muted", "none");
      if (value.every(isPlainObject)) return rowsTable(value, depth + 1);
      if (value.every(function (v) { return scalarText(v) !== null && typeof v !== "object"; })) {
        return el("span", "", value.map(function (v) { return scalarText(v, key, siblings); }).join(", "));
      }
      var list = el("ul", "data-list");
      value.forEach(function (v) {
        var li = el("li");
        li.appendChild(valueNode(v, key, siblings, depth + 1));
        list.appendChild(li);
      });
      return list;
    }
    if (isPlainObject(value)) {
      if (!Object.keys(value).length) return el("span", "muted", "nothing");
      return kvTable(value, depth + 1);
    }
    return el("span", "", String(value));
  }

  // An object as a two-column table: label, value.
  function kvTable(obj, depth) {
    var table = el("table", "kv");
    var body = el("tbody");
    // A currency that an amount beside it already shows ("1,200.00 USD") needs no row of its own.
    var currency = currencyOf(obj);
    var shown = currency && Object.keys(obj).some(function (k) {
      return AMOUNT_KEY.test(k) && obj[k] !== null && obj[k] !== "" && !isNaN(Number(obj[k]));
    });
    Object.keys(obj).forEach(function (k) {
      if (shown && /^(currency|currency_code)$/i.test(k)) return;
      var tr = el("tr");
      tr.appendChild(el("th", "", label(k)));
      var td = el("td");
      td.appendChild(valueNode(obj[k], k, obj, depth || 0));
      tr.appendChild(td);
      body.appendChild(tr);
    });
    table.appendChild(body);
    return table;
  }

  // A list of objects as a compact table: a column per key (the first ones met), a row per item.
  function rowsTable(items, depth) {
    var columns = [];
    items.forEach(function (item) {
      Object.keys(item).forEach(function (k) { if (columns.indexOf(k) < 0) columns.push(k); });
    });
    var hidden = columns.length - MAX_COLUMNS;
    columns = columns.slice(0, MAX_COLUMNS);
    var wrap = el("div", "rows-wrap");
    var table = el("table", "rows");
    var head = el("thead");
    var hr = el("tr");
    columns.forEach(function (k) { hr.appendChild(el("th", "", label(k))); });
    head.appendChild(hr);
    table.appendChild(head);
    var body = el("tbody");
    items.forEach(function (item, i) {
      var tr = el("tr");
      if (i >= MAX_ROWS) tr.hidden = true;
      columns.forEach(function (k) {
        var td = el("td");
        td.appendChild(valueNode(item[k], k, item, depth + 1));
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.appendChild(body);
    wrap.appendChild(table);
    if (items.length > MAX_ROWS) {
      var more = button("show-all", "Show all " + items.length + " rows");
      more.addEventListener("click", function () {
        body.querySelectorAll("tr[hidden]").forEach(function (tr) { tr.hidden = false; });
        more.remove();
      });
      wrap.appendChild(more);
    }
    if (hidden > 0) wrap.appendChild(el("p", "hint", hidden + " more field" + (hidden > 1 ? "s" : "") + " in the JSON"));
    return wrap;
  }

  function parseJson(text) {
    var t = text.trim();
    if (!/^[[{]/.test(t)) return undefined;
    try { return JSON.parse(t); } catch (e) { return undefined; }
  }

  // A tool's arguments or result for people: a table (text stays text), with the JSON one click away.
  function dataView(value) {
    var wrap = el("div", "data");
    if (typeof value === "string") {
      var parsed = parseJson(value);
      if (parsed === undefined) {
        // An approver's note before a JSON result ("Note: … \nResult: {…}"): the note, then the table.
        var cut = value.indexOf("\nResult: ");
        var rest = cut >= 0 ? parseJson(value.slice(cut + 9)) : undefined;
        if (rest === undefined) {
          wrap.appendChild(collapsibleText(value || "(empty)", "long-text plain"));
          return wrap;
        }
        wrap.appendChild(el("p", "note", value.slice(0, cut)));
        value = rest;
      } else {
        value = parsed;
      }
    }
    wrap.appendChild(isPlainObject(value) || Array.isArray(value) ? valueNode(value, undefined, undefined, 0) : valueNode(value));
    var toggle = button("show-json", "Show JSON");
    var pre = el("pre", "json", pretty(value));
    pre.hidden = true;
    toggle.setAttribute("aria-expanded", "false");
    toggle.addEventListener("click", function () {
      pre.hidden = !pre.hidden;
      toggle.textContent = pre.hidden ? "Show JSON" : "Hide JSON";
      toggle.setAttribute("aria-expanded", String(!pre.hidden));
    });
    wrap.appendChild(toggle);
    wrap.appendChild(pre);
    return wrap;
  }

  // --- what happened, in words ------------------------------------------------------------------

  var TOOL_NAME = /\b[A-Za-z0-9][A-Za-z0-9_-]*__[A-Za-z0-9_]+\b/g;
  var FOR_THE_MODEL = /\s*(The call was not executed\.|It was not executed\.|Do not retry it(?: unless the user asks)?\.)/g;

  // Text written for the model (a block's observation) as people read it: without the
  // instructions to the model, with tools by their titles.
  function forPeople(text, title) {
    var t = String(text || "").replace(FOR_THE_MODEL, "");
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
    [/^set (.+) on \S+$/, function (m) { return "A rule of this agent set " + m[1] + " before the call (the input shows what ran)"; }],
    [/^redacted (\d+) match\(es\) in \S+$/, function (m) { return "Hid " + m[1] + " sensitive value" + (m[1] === "1" ? "" : "s") + " in the result"; }],
    [/^truncated \S+ result by (\d+) characters$/, function (m) { return "The result was shortened by " + Number(m[1]).toLocaleString() + " characters"; }],
    [/^rate limited \S+ \((\d+) calls in the window\)$/, function () { return "Held back: too many calls in a short time"; }],
    [/^result withheld: (.+)$/, function (m) { return "The result was withheld: " + m[1]; }],
  ];

  function effectForPeople(p, title) {
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

  function names(list) {
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
  function tallyText(state) {
    var votes = state.votes || [];
    var required = state.approvals_required || 1;
    var approvals = typeof state.approvals === "number" ? state.approvals : votes.filter(function (v) { return v.approve; }).length;
    var line = approvals + " of " + required + " approval" + (required === 1 ? "" : "s");
    if (votes.length) line += " — " + votes.map(function (v) { return voter(v, true); }).join(", ");
    else line += " so far";
    return line;
  }

  // The final line of an approval card: the outcome and every voter.
  function verdictText(p) {
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

  function stopText(error) {
    var e = String(error || "");
    if (/^cancelled by the user$/i.test(e)) return own ? "You stopped the run." : "Its user stopped the run.";
    return period("The run was stopped: " + e.replace(/^cancelled by /i, "stopped by "));
  }

  var STAGE_WORDS = {
    hooks: "a safety rule", tools: "its tools", llm: "the model", engine: "the platform",
    plan: "its plan", steps: "one of its steps",
  };

  // --- countdowns -------------------------------------------------------------------------------

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
  setInterval(tickClocks, 1000);

  // --- the page's title and notifications -------------------------------------------------------

  var baseTitle = document.title;
  var doneWhileHidden = false;
  var current = null;

  function refreshTitle() {
    var waiting = current && !current.terminal ? current.waitingCount() : 0;
    if (waiting) document.title = "(" + waiting + ") Waiting for approval — " + baseTitle;
    else if (doneWhileHidden) document.title = "Done — " + baseTitle;
    else document.title = baseTitle;
  }
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) { doneWhileHidden = false; refreshTitle(); }
  });

  var notifyToggle = document.getElementById("notify-toggle");
  function showNotifyToggle() {
    if (!notifyToggle || !("Notification" in window)) return;
    var permission = Notification.permission;
    notifyToggle.hidden = permission === "denied";
    notifyToggle.disabled = permission === "granted";
    notifyToggle.textContent = permission === "granted" ? "Notifications on" : "Notify me";
    notifyToggle.title = permission === "granted"
      ? "You are told when the run needs someone or finishes while this tab is hidden."
      : "Be told when the run needs someone or finishes while this tab is hidden.";
  }
  if (notifyToggle) {
    notifyToggle.addEventListener("click", function () {
      if (!("Notification" in window)) return;
      var asked = Notification.requestPermission(showNotifyToggle);
      if (asked && asked.then) asked.then(showNotifyToggle);
    });
    showNotifyToggle();
  }

  function notify(title, body) {
    if (!document.hidden || !("Notification" in window) || Notification.permission !== "granted") return;
    try {
      new Notification(title, { body: body, tag: "fimone-run" });
    } catch (e) { /* a browser that refuses page notifications: the title still says it */ }
  }

  // --- one run of the conversation --------------------------------------------------------------

  function Turn(data) {
    this.id = data.id;
    this.lastSeq = 0;
    this.terminal = data.terminal;
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
    var you = el("div", "bubble user", data.input);
    you.setAttribute("aria-label", "Your message");
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
    "run.started": "Running", "run.resumed": "Running", "run.suspended": "Awaiting Approval",
    "run.completed": "Completed", "run.failed": "Failed",
  };
  function reflectStatus(event, p) {
    var word = RUN_STATUS[event.type];
    if (word) {
      if (event.type === "run.failed" && p.stage === "cancelled") word = "Cancelled";
      document.querySelectorAll('[data-run-status="' + event.run_id + '"]').forEach(function (b) { b.textContent = word; });
    }
    if (event.type === "approval.decided") reflectRequest(p.request_id, p.status);
  }
  function reflectRequest(requestId, status) {
    if (!requestId || !status) return;
    document.querySelectorAll('[data-request-status="' + requestId + '"]').forEach(function (b) {
      b.textContent = sentence(status);
      b.className = "badge badge-" + status;
    });
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
    var status = el("span", "step-status", "proposed");
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

  Turn.prototype.setStatus = function (step, status) {
    step.node.dataset.status = status;
    step.status.textContent = status;
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
      if (step) {
        this.techLine(step, "Hook note", raw);
        if (/^set .+ on \S+$/.test(String(p.message || ""))) step.adjusted = true;
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
      step.duration.textContent = formatDuration(p.duration_ms);
      var label = p.status === "unknown" ? "What is known" : "Result";
      var observation = p.observation === undefined || p.observation === null ? "(empty)" : p.observation;
      step.node.insertBefore(details(label, dataView(observation), "step-result"), step.techToggle);
    },

    "approval.pending": function (p) {
      var step = this.step(p);
      this.setStatus(step, "awaiting approval");
      this.approvalCard(step, p);
    },

    "approval.decided": function (p) {
      this.showVerdict(p.request_id, p, this.steps[p.tool_call_id]);
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
      var reason = String(p.reason || "");
      var decided = /approval request (\w+)/.exec(reason);
      var text = decided
        ? "Resumed: the approval request was " + decided[1] + "."
        : "Resumed" + (reason ? ": " + reason.replace(TOOL_NAME, readableName) : "") + ".";
      this.notice("", text);
    },

    "run.completed": function (p, event, fresh) {
      this.terminal = true;
      var output = typeof p.output === "string" ? p.output : "";
      if (output.trim() && !(this.lastMessage && this.lastMessage.content === output)) {
        var node = el("div", "bubble assistant final");
        this.el.appendChild(node);
        this.showMarkdown(node, event.seq, output);
      } else if (this.lastMessage) {
        this.lastMessage.node.classList.add("final");
      }
      if (this.waitingNotice) { this.waitingNotice.remove(); this.waitingNotice = null; }
      if (fresh) { doneWhileHidden = document.hidden; notify("The answer is ready", baseTitle); }
      this.finish();
    },

    "run.failed": function (p, event, fresh) {
      this.terminal = true;
      if (this.streaming) { this.streaming.classList.remove("streaming"); this.streaming = null; }
      if (this.waitingNotice) { this.waitingNotice.remove(); this.waitingNotice = null; }
      var text;
      if (p.stage === "cancelled") text = stopText(p.error);
      else if (p.stage === "max_iterations") text = "The agent stopped: it took too many steps without finishing.";
      else text = period("The run failed because of " + (STAGE_WORDS[p.stage] || "a problem") + ": " + forPeople(p.error || "unknown error"));
      var node = this.notice(p.stage === "cancelled" ? "stopped" : "failed", text);
      node.classList.add("run-end");
      if (fresh) { doneWhileHidden = document.hidden; notify("The run stopped", text); }
      this.finish();
    },
  };

  // The votes on a request that waits for more (stream-only: a reload reads them from the page's
  // data instead).
  Turn.prototype.onVoted = function (p) {
    var card = this.approvals[p.request_id];
    if (!card || card.classList.contains("is-decided")) return;
    this.showTally(card, p);
  };

  Turn.prototype.showTally = function (card, state) {
    var required = state.approvals_required || Number(card.dataset.required || 1);
    var tally = card.querySelector(".tally");
    if (required <= 1 && !(state.votes && state.votes.length)) return;
    if (!tally) {
      tally = el("p", "tally");
      tally.setAttribute("role", "status");
      var meta = card.querySelector(".meta");
      card.insertBefore(tally, meta ? meta.nextSibling : null);
    }
    tally.textContent = tallyText({ votes: state.votes || [], approvals: state.approvals, approvals_required: required });
  };

  // The verdict on request ``requestId`` (an ``approval.decided`` payload, or the request's state
  // when the run recorded none, as when it was stopped while waiting).
  Turn.prototype.showVerdict = function (requestId, p, step) {
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
      card.querySelectorAll("form, .decide-outcome, .tally").forEach(function (n) { n.remove(); });
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
    if (this === current) refreshTitle();
    var required = Number(merged.approvals_required || (card && card.dataset.required) || 1);
    if (!Array.isArray(p.votes) && required > 1 && merged.status !== "cancelled") {
      // A verdict recorded without its votes (older runs): read them, so the line names every voter.
      fetch(urlFor(root.dataset.stateUrl, [[ZERO_UUID, requestId]]), {
        credentials: "same-origin", headers: { Accept: "application/json" },
      })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (state) {
          if (state && Array.isArray(state.votes) && state.votes.length) {
            merged.votes = state.votes;
            verdict.textContent = verdictText(merged);
          }
        })
        .catch(function () {});
    }
  };

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

  // Cards still open once the run ended: their requests were withdrawn or decided without the run
  // recording it (a run stopped while it waited). Ask where they stand and say it.
  Turn.prototype.settleOpenCards = function () {
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
      fetch(urlFor(root.dataset.stateUrl, [[ZERO_UUID, id]]), {
        credentials: "same-origin", headers: { Accept: "application/json" },
      })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (state) {
          if (!state || !state.status || state.status === "pending") return;
          self.states[id] = state;
          self.showVerdict(id, { request_id: id }, step);
        })
        .catch(function () {});
    });
  };

  Turn.prototype.closeApproval = function (toolCallId) {
    var self = this;
    Object.keys(this.approvals).forEach(function (id) {
      var card = self.approvals[id];
      if (card.dataset.toolCallId === toolCallId) card.querySelectorAll("form").forEach(function (n) { n.remove(); });
    });
  };

  Turn.prototype.approvalCard = function (step, p) {
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
    if (p.expires_at) {
      var clockNode = el("time", "countdown", "until " + new Date(p.expires_at).toLocaleString());
      clockNode.setAttribute("datetime", p.expires_at);
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
    var args = dataView(p.arguments || {});
    args.classList.add("args");
    args.setAttribute("aria-label", "Arguments");
    if (context.length) {
      // What it is about says it for people; the exact input is one click away (open for deciders).
      card.appendChild(details("Exactly what will run if approved", args, "exact-args"));
    } else {
      card.appendChild(el("div", "caption", "Exactly what will run if approved"));
      card.appendChild(args);
    }
    var meta = el("div", "meta");
    var approverNames = (p.approvers || []).map(function (a) { return a.name; }).join(", ") || "nobody";
    var who = el("span", "", "Who may decide: ");
    who.appendChild(el("b", "", approverNames));
    meta.appendChild(who);
    var where = el("span", "", "Sent to: ");
    where.appendChild(el("b", "", CHANNEL_WORDS[p.channel] || p.channel || "the web inbox"));
    meta.appendChild(where);
    card.appendChild(meta);
    step.node.insertBefore(card, step.techToggle);
    this.approvals[p.request_id] = card;
    this.showTally(card, {
      votes: known.votes || [], approvals: known.approvals,
      approvals_required: p.approvals_required || known.approvals_required,
    });
    tickClocks();
    var self = this;
    if (this.decidable.indexOf(p.request_id) >= 0) {
      this.decideForm(card, p);
    } else if (live && !this.terminal) {
      fetch(urlFor(root.dataset.stateUrl, [[ZERO_UUID, p.request_id]]), {
        credentials: "same-origin", headers: { Accept: "application/json" },
      })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (state) {
          if (state && state.may_decide && !card.classList.contains("is-decided") && !self.terminal) self.decideForm(card, p);
        })
        .catch(function () {});
    }
  };

  Turn.prototype.decideForm = function (card, p) {
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

  // --- the composer: Send while idle, Stop while the agent works, Retry after ------------------

  var composer = document.getElementById("composer");
  var sendButton = document.getElementById("send");
  var stopButton = document.getElementById("stop");
  var hint = document.getElementById("composer-hint");
  var archiveForm = document.getElementById("archive-form");

  function setBusy(busy) {
    if (sendButton) { sendButton.hidden = busy; sendButton.disabled = busy; }
    if (stopButton) {
      stopButton.hidden = !busy;
      stopButton.disabled = false;
      stopButton.textContent = "Stop";
    }
    if (hint) {
      hint.textContent = busy
        ? "The agent is working: stop it, or write your next message and send it when it has finished."
        : "Enter sends · Shift+Enter for a new line";
    }
    if (archiveForm) archiveForm.querySelectorAll("button").forEach(function (b) { b.disabled = busy; b.title = busy ? "Stop the run first" : ""; });
  }

  if (stopButton) {
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
          if (hint) hint.textContent = answer.message || "";
          if (!answer.ok) { stopButton.disabled = false; stopButton.textContent = "Stop"; }
        })
        .catch(function () {
          if (hint) hint.textContent = "The run could not be stopped: check your connection and try again.";
          stopButton.disabled = false;
          stopButton.textContent = "Stop";
        });
    });
  }

  // "Retry": the last message again, as a new run of this conversation (a plain form post).
  function offerRetry(turn) {
    var url = root.dataset.retryUrl;
    if (!url || !turn.terminal || turn.el.querySelector(".turn-actions")) return;
    var form = el("form", "turn-actions");
    form.method = "post";
    form.action = url;
    var token = el("input");
    token.type = "hidden"; token.name = "csrfmiddlewaretoken"; token.value = csrf;
    var retry = el("button", "btn-small", "Retry");
    retry.type = "submit";
    retry.title = "Send your last message again";
    form.appendChild(token);
    form.appendChild(retry);
    turn.el.appendChild(form);
  }

  // --- the live stream --------------------------------------------------------------------------

  var linkState = document.getElementById("link-state");
  function showLink(text) {
    if (!linkState) return;
    linkState.hidden = !text;
    linkState.textContent = text || "";
  }

  function follow(turn) {
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

  // ``current`` stays unset while the stored turns render: only the last one offers Retry and
  // sets the title, once it is known.
  var turns = turnsData.map(function (data) {
    var turn = new Turn(data);
    data.events.forEach(function (event) { turn.apply(event, false); });
    if (turn.terminal) turn.settleOpenCards();
    return turn;
  });
  if (!turns.length) root.appendChild(el("p", "muted", "No messages yet."));
  current = turns[turns.length - 1] || null;
  if (current && current.terminal) {
    // The page was rendered while the run was finishing: its stored events say it ended.
    offerRetry(current);
    setBusy(false);
  }
  refreshTitle();
  if (live && current && !current.terminal) follow(current);
  if (current) current.el.scrollIntoView({ block: "end" });
})();
