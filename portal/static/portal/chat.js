// The chat page: renders a conversation's runs from their events, stored and live, for a person.
//
// One renderer for both: the page embeds each run's stored events (json_script "turns-data"), and
// the unfinished run streams the rest over ws/runs/<id>/?after=<last seq seen>, reconnecting with
// backoff after a drop. The server replays what the page missed, then live events; the page also
// ignores any stored event at or below the last seq it applied, so nothing shows twice.
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
  var csrf = root.dataset.csrf;
  var ZERO_UUID = "00000000-0000-0000-0000-000000000000";
  var RESULT_PREVIEW_CHARS = 600;
  var STATUS_WORDS = { succeeded: "done", failed: "failed", unknown: "outcome unknown" };
  var CHANNEL_WORDS = { web: "the web inbox", feishu: "Feishu", slack: "Slack" };
  var serverNow = Date.parse((document.querySelector("main") || root).getAttribute("data-server-now") || "");
  var skew = isNaN(serverNow) ? 0 : serverNow - Date.now();

  // --- small DOM helpers ------------------------------------------------------------------------

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
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

  function formatTime(iso) {
    var when = new Date(iso);
    if (isNaN(when.getTime())) return "";
    return when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
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

  // A long text, cut to a preview with a "Show all" button that reveals the rest.
  function collapsibleText(text) {
    var wrap = el("div");
    var pre = el("pre", "", text.length > RESULT_PREVIEW_CHARS ? text.slice(0, RESULT_PREVIEW_CHARS) + " …" : text);
    wrap.appendChild(pre);
    if (text.length > RESULT_PREVIEW_CHARS) {
      var more = el("button", "show-all", "Show all (" + text.length.toLocaleString() + " characters)");
      more.type = "button";
      more.addEventListener("click", function () { pre.textContent = text; more.remove(); });
      wrap.appendChild(more);
    }
    return wrap;
  }

  function details(summary, body, open) {
    var d = el("details");
    if (open) d.open = true;
    d.appendChild(el("summary", "", summary));
    d.appendChild(body);
    return d;
  }

  // --- countdowns -------------------------------------------------------------------------------

  var clocks = [];
  function pad(n) { return n < 10 ? "0" + n : String(n); }
  function countdownText(seconds) {
    var h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    return (h ? h + "h " + pad(m) + "m " : m ? m + "m " : "") + pad(s) + "s left";
  }
  function tickClocks() {
    var now = Date.now() + skew;
    clocks = clocks.filter(function (clock) { return clock.isConnected && !clock.dataset.stopped; });
    clocks.forEach(function (clock) {
      var left = Math.floor((Date.parse(clock.getAttribute("datetime")) - now) / 1000);
      if (left > 0) {
        clock.textContent = countdownText(left);
        clock.classList.toggle("is-urgent", left < 60);
      } else {
        clock.textContent = "expired";
        clock.classList.remove("is-urgent");
        clock.classList.add("is-expired");
        var card = clock.closest(".approval");
        if (card) card.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      }
    });
  }
  setInterval(tickClocks, 1000);

  // --- one run of the conversation --------------------------------------------------------------

  function Turn(data) {
    this.id = data.id;
    this.lastSeq = 0;
    this.terminal = data.terminal;
    this.html = data.html || {};
    this.decidable = data.decidable || [];
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

  // Apply one event. Stored events at or below the last seq applied are ignored: a replay that
  // overlaps what the page already shows changes nothing.
  Turn.prototype.apply = function (event) {
    if (event.type === "llm.delta") {
      if (event.seq < this.lastSeq) return; // text of a message already stored
      return this.onDelta(event.payload || {});
    }
    if (event.seq <= this.lastSeq) return;
    this.lastSeq = event.seq;
    this.el.dataset.lastSeq = String(event.seq);
    if (this.pendingNotice) { this.pendingNotice.remove(); this.pendingNotice = null; }
    var p = event.payload || {};
    var handler = this.handlers[event.type];
    if (handler) handler.call(this, p, event);
    reflectStatus(event, p);
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
    if (event.type === "approval.decided" && p.request_id && p.status) {
      document.querySelectorAll('[data-request-status="' + p.request_id + '"]').forEach(function (b) {
        b.textContent = p.status.charAt(0).toUpperCase() + p.status.slice(1);
        b.className = "badge badge-" + p.status;
      });
    }
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

  Turn.prototype.step = function (p) {
    var id = p.tool_call_id;
    if (id && this.steps[id]) return this.steps[id];
    var node = el("article", "step");
    node.dataset.status = "proposed";
    var head = el("div", "step-head");
    var tool = el("code", "step-tool", p.tool || "tool");
    var status = el("span", "step-status", "proposed");
    var duration = el("span", "step-duration");
    head.appendChild(tool);
    head.appendChild(status);
    head.appendChild(duration);
    node.appendChild(head);
    var argsPre = el("pre", "", pretty(p.arguments || {}));
    node.appendChild(details("Arguments", argsPre, false));
    var effects = el("ul", "effects");
    node.appendChild(effects);
    this.el.appendChild(node);
    var step = { node: node, status: status, duration: duration, argsPre: argsPre, effects: effects,
                 proposed: pretty(p.arguments || {}) };
    if (id) {
      node.id = "step-" + this.id + "-" + id;
      this.steps[id] = step;
    }
    return step;
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
      var text = (p.hook || "a hook") + ": " + (p.message || "");
      if (p.failure) text = (p.hook || "a hook") + " failed: " + (p.message || "");
      if (p.tool_call_id && this.steps[p.tool_call_id]) {
        this.effect(this.steps[p.tool_call_id], text, p.failure ? "is-failure" : "");
      } else {
        this.notice(p.failure ? "failed" : "context", (p.point === "session_start" ? "Before the first answer — " : "") + text);
      }
    },

    "tool.blocked": function (p) {
      var step = this.step(p);
      this.setStatus(step, "blocked");
      this.effect(step, "blocked by " + (p.blocked_by || "a hook") + ": " + (p.error || ""), "is-block");
      this.closeApproval(p.tool_call_id);
    },

    "tool.started": function (p) {
      var step = this.step(p);
      this.setStatus(step, "running");
      var running = pretty(p.arguments || {});
      if (running !== step.proposed) {
        step.argsPre.textContent = running;
        this.effect(step, "arguments rewritten by hooks before running (shown: what ran)");
      }
    },

    "tool.finished": function (p) {
      var step = this.step(p);
      this.setStatus(step, STATUS_WORDS[p.status] || p.status || "done");
      step.duration.textContent = formatDuration(p.duration_ms);
      var text = typeof p.observation === "string" ? p.observation : pretty(p.observation);
      var label = p.status === "unknown" ? "What is known" : "Result";
      step.node.appendChild(details(label, collapsibleText(text || "(empty)"), false));
    },

    "approval.pending": function (p) {
      var step = this.step(p);
      this.setStatus(step, "awaiting approval");
      this.approvalCard(step, p);
    },

    "approval.decided": function (p) {
      var card = this.approvals[p.request_id];
      var step = this.steps[p.tool_call_id];
      var words = {
        approved: "Approved", rejected: "Rejected", expired: "Expired — nobody decided in time",
        cancelled: "Cancelled",
      };
      var text = words[p.status] || p.status;
      if (p.by) text += " by " + p.by;
      if (p.at) text += " at " + formatTime(p.at);
      if (p.reason) text += " — “" + p.reason + "”";
      if (p.delivery_problem) text += " (the request could not be delivered: " + p.delivery_problem + ")";
      var verdict = el("p", "verdict " + (p.status || ""), text);
      if (card) {
        card.classList.add("is-decided");
        card.querySelectorAll("form, .decide-outcome").forEach(function (n) { n.remove(); });
        var clock = card.querySelector("time.countdown");
        if (clock) { clock.dataset.stopped = "1"; clock.remove(); }
        var title = card.querySelector(".approval-title");
        if (title) title.textContent = "Approval request";
        card.appendChild(verdict);
      } else if (step) {
        step.node.appendChild(verdict);
      } else {
        this.el.appendChild(verdict);
      }
      if (step) {
        if (p.status === "approved") this.setStatus(step, "running");
        else this.setStatus(step, "blocked");
      }
      if (this.waitingNotice) { this.waitingNotice.remove(); this.waitingNotice = null; }
    },

    "run.suspended": function (p) {
      var forApproval = (p.detail && p.detail.request_id) || /approval/i.test(p.reason || "");
      var words = forApproval
        ? "Waiting for approval — you can close this page, the run will continue once someone decides."
        : "Paused: " + (p.reason || "waiting") + " — the run will continue by itself.";
      if (this.waitingNotice) this.waitingNotice.remove();
      this.waitingNotice = this.notice("waiting", words);
    },

    "run.resumed": function (p) {
      if (this.waitingNotice) { this.waitingNotice.remove(); this.waitingNotice = null; }
      this.notice("", "Resumed" + (p.reason ? ": " + p.reason : "") + ".");
    },

    "run.completed": function (p, event) {
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
      this.finish();
    },

    "run.failed": function (p) {
      this.terminal = true;
      if (this.streaming) { this.streaming.classList.remove("streaming"); this.streaming = null; }
      if (this.waitingNotice) { this.waitingNotice.remove(); this.waitingNotice = null; }
      var text = p.stage === "cancelled"
        ? "The run was " + (p.error || "cancelled") + "."
        : p.stage === "max_iterations"
          ? "The agent stopped: it took too many steps without finishing. " + (p.error || "")
          : "The run failed" + (p.stage ? " (" + p.stage + ")" : "") + ": " + (p.error || "unknown error");
      this.notice("failed", text);
      this.finish();
    },
  };

  Turn.prototype.finish = function () {
    var self = this;
    Object.keys(this.approvals).forEach(function (id) {
      var card = self.approvals[id];
      card.querySelectorAll("form").forEach(function (n) { n.remove(); });
      var clock = card.querySelector("time.countdown");
      if (clock) clock.dataset.stopped = "1";
    });
    if (this.onFinish) this.onFinish();
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
    var card = el("div", "approval");
    card.id = "approval-" + p.request_id;
    card.dataset.toolCallId = p.tool_call_id || "";
    var head = el("div", "approval-head");
    head.appendChild(el("span", "approval-title", "Waiting for approval"));
    if (p.expires_at) {
      var clock = el("time", "countdown", "until " + new Date(p.expires_at).toLocaleString());
      clock.setAttribute("datetime", p.expires_at);
      head.appendChild(clock);
      clocks.push(clock);
    }
    card.appendChild(head);
    var meta = el("div", "meta");
    var names = (p.approvers || []).map(function (a) { return a.name; }).join(", ") || "nobody";
    var who = el("span", "", "Who may decide: ");
    who.appendChild(el("b", "", names));
    meta.appendChild(who);
    var where = el("span", "", "Sent to: ");
    where.appendChild(el("b", "", CHANNEL_WORDS[p.channel] || p.channel || "the web inbox"));
    meta.appendChild(where);
    if (p.approvals_required > 1) {
      meta.appendChild(el("span", "tally", "Needs " + p.approvals_required + " approvals"));
    }
    card.appendChild(meta);
    card.appendChild(el("div", "caption", "Arguments — exactly what will run if approved"));
    var args = el("pre", "args", pretty(p.arguments || {}));
    args.setAttribute("aria-label", "Arguments");
    card.appendChild(args);
    step.node.appendChild(card);
    this.approvals[p.request_id] = card;
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
    var form = el("form", "decide");
    form.method = "post";
    form.action = urlFor(root.dataset.decideUrl, [[ZERO_UUID, p.request_id]]);
    var token = el("input");
    token.type = "hidden"; token.name = "csrfmiddlewaretoken"; token.value = csrf;
    var next = el("input");
    next.type = "hidden"; next.name = "next"; next.value = root.dataset.back || "/";
    var reasonId = "reason-" + p.request_id;
    var label = el("label", "", "Reason ");
    label.htmlFor = reasonId;
    label.appendChild(el("span", "hint", "— optional, but tell the agent why when you reject"));
    var reason = el("textarea");
    reason.id = reasonId; reason.name = "reason"; reason.rows = 2; reason.maxLength = 2000;
    var actions = el("div", "actions");
    ["approve", "reject"].forEach(function (choice) {
      var b = el("button", "btn " + (choice === "approve" ? "btn-approve" : "btn-reject"), choice === "approve" ? "Approve" : "Reject");
      b.type = "submit"; b.name = "decision"; b.value = choice;
      actions.appendChild(b);
    });
    [token, next, label, reason, actions].forEach(function (n) { form.appendChild(n); });
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
    turn.onFinish = function () {
      closedForGood = true;
      showLink("");
      if (socket) socket.close(1000);
      var composer = document.getElementById("composer");
      if (composer) {
        composer.querySelectorAll("textarea, button").forEach(function (n) { n.disabled = false; });
        var hint = document.getElementById("composer-hint");
        if (hint) hint.textContent = "";
      }
    };
    function connect() {
      var scheme = location.protocol === "https:" ? "wss://" : "ws://";
      socket = new WebSocket(scheme + location.host + "/ws/runs/" + turn.id + "/?after=" + turn.lastSeq);
      window.__portalSocket = socket; // lets the browser tests drop the connection on purpose
      socket.onopen = function () { attempt = 0; showLink(""); };
      socket.onmessage = function (message) {
        var event;
        try { event = JSON.parse(message.data); } catch (e) { return; }
        if (event && event.run_id === turn.id) turn.apply(event);
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

  var turns = turnsData.map(function (data) {
    var turn = new Turn(data);
    data.events.forEach(function (event) { turn.apply(event); });
    return turn;
  });
  if (!turns.length) root.appendChild(el("p", "muted", "No messages yet."));
  var current = turns[turns.length - 1];
  if (live && current && !current.terminal) follow(current);
  if (current) current.el.scrollIntoView({ block: "end" });
})();
