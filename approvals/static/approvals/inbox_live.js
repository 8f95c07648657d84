// The live inbox: the nav's pending count on every page, and on the inbox page the cards
// themselves, refreshed when the server says a request entered or left this user's inbox.
//
// The socket (ws/inbox/) only carries "request X was opened / voted on / settled"; what to show is
// then read over HTTP from /approvals/live/ with the same authorised read as the inbox page. No
// polling: a read happens after a push, and once after a reconnect (changes made while the link was
// down). Cards already on the page are not re-rendered, so a reason being typed is kept: only their
// status lines (a quorum's tally, an escalation) are brought up to date. A card that leaves is
// replaced by what became of it (withdrawn, expired, decided by someone else), in words.
//
// The inbox page's title carries the count ("(2) Inbox"), and an approver who turned notifications
// on (the inbox's button; kept in this browser) is notified of a new request while the tab is in
// the background. A notification's text is set as text, never as markup.
(function () {
  "use strict";

  var nav = document.getElementById("nav-inbox");
  if (!nav || !window.WebSocket) return;
  var liveUrl = nav.getAttribute("data-live-url");
  var list = document.getElementById("inbox-cards");
  var empty = document.getElementById("inbox-empty");
  var lede = document.getElementById("inbox-lede");
  var serverNow = Date.parse((document.querySelector("main") || document.body).getAttribute("data-server-now") || "");
  var skew = isNaN(serverNow) ? 0 : serverNow - Date.now();
  var clocks = [];

  var NOTIFY_KEY = "fimone.inbox.notify";
  var notifying = "Notification" in window;
  var initialBadge = nav.querySelector(".count");
  var lastPending = initialBadge ? parseInt(initialBadge.textContent, 10) || 0 : 0;

  function wantsNotifications() {
    if (!notifying || Notification.permission !== "granted") return false;
    try { return window.localStorage.getItem(NOTIFY_KEY) === "on"; } catch (e) { return false; }
  }

  function notify(title, body, tag, onclick) {
    if (!wantsNotifications() || !document.hidden) return;
    try {
      var note = new Notification(title, { body: body, tag: tag });
      note.onclick = function () { window.focus(); if (onclick) onclick(); note.close(); };
    } catch (e) { /* some browsers only notify from a service worker: the count still shows */ }
  }

  function setTitle(pending) {
    if (!list) return; // the inbox's own page only: other pages keep their titles
    var bare = document.title.replace(/^\(\d+\) /, "");
    document.title = pending ? "(" + pending + ") " + bare : bare;
  }

  function setCount(pending) {
    setTitle(pending);
    if (!list && pending > lastPending) {
      notify("Approval needed", pending + " request" + (pending === 1 ? "" : "s") + " waiting for your decision",
             "fimone-inbox", function () { window.location.href = nav.getAttribute("href"); });
    }
    lastPending = pending;
    var badge = nav.querySelector(".count");
    if (!pending) {
      if (badge) badge.remove();
      return;
    }
    if (!badge) {
      badge = document.createElement("span");
      badge.className = "count";
      nav.appendChild(document.createTextNode(" "));
      nav.appendChild(badge);
    }
    badge.textContent = String(pending);
    badge.setAttribute("aria-label", pending + " waiting");
  }

  // ``shown``: the cards the page's filters keep (all of them on an unfiltered page).
  function setLede(pending, shown) {
    if (!lede) return;
    var waiting = " request" + (pending === 1 ? "" : "s") + " waiting for your decision";
    lede.textContent = !pending ? lede.getAttribute("data-empty")
      : shown !== pending ? shown + " of the " + pending + waiting + " match the filters, soonest deadline first."
      : pending + waiting + ", soonest deadline first.";
    if (empty) empty.hidden = shown > 0;
  }

  function cardNode(html) {
    var holder = document.createElement("div");
    holder.innerHTML = html; // rendered and escaped by the server's template, never model text as markup
    return holder.firstElementChild;
  }

  // Countdowns of cards added after the page loaded (base.html's ticker only knows the first ones).
  function pad(n) { return n < 10 ? "0" + n : String(n); }
  function tick() {
    var now = Date.now() + skew;
    clocks = clocks.filter(function (c) { return c.isConnected; });
    clocks.forEach(function (clock) {
      var left = Math.floor((Date.parse(clock.getAttribute("datetime")) - now) / 1000);
      if (left > 0) {
        var h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
        clock.textContent = (h ? h + "h " + pad(m) + "m " : m ? m + "m " : "") + pad(s) + "s left";
        clock.classList.toggle("is-urgent", left < 60);
      } else {
        clock.textContent = "expired";
        clock.classList.add("is-expired");
        var card = clock.closest(".card");
        if (card) card.querySelectorAll("button[name=decision]").forEach(function (b) { b.disabled = true; });
      }
    });
  }
  setInterval(tick, 1000);

  // The lines of a shown card that change while it waits; nothing else of the card is touched.
  var STATUS_LINES = ["tally", "escalated"];
  function updateStatusLines(node, html) {
    var fresh = cardNode(html);
    if (!fresh) return;
    var after = node.querySelector(":scope > .meta"); // status lines follow it, in STATUS_LINES order
    STATUS_LINES.forEach(function (name) {
      var shown = node.querySelector(":scope > ." + name);
      var wanted = fresh.querySelector(":scope > ." + name);
      if (shown && !wanted) {
        shown.remove();
        shown = null;
      } else if (wanted && !shown) {
        node.insertBefore(wanted, after ? after.nextSibling : node.firstChild);
        shown = wanted;
      } else if (shown && wanted && shown.textContent !== wanted.textContent) {
        shown.textContent = wanted.textContent;
      }
      if (shown) after = shown;
    });
  }

  // In place of a card that left the inbox, what became of it ("alice withdrew Pay a purchase
  // (PO-1002).") until the approver dismisses it; set as text, never as markup.
  function leftNotice(node, text) {
    var notice = document.createElement("div");
    notice.className = "inbox-left";
    notice.setAttribute("role", "status");
    notice.setAttribute("data-left-id", node.getAttribute("data-request-id"));
    var words = document.createElement("span");
    words.textContent = text;
    var dismiss = document.createElement("button");
    dismiss.type = "button";
    dismiss.className = "btn btn-plain";
    dismiss.textContent = "Dismiss";
    dismiss.addEventListener("click", function () { notice.remove(); });
    notice.appendChild(words);
    notice.appendChild(dismiss);
    node.replaceWith(notice);
  }

  function shownIds() {
    return Array.prototype.map.call(list.querySelectorAll(".inbox-card"), function (node) {
      return node.getAttribute("data-request-id");
    });
  }

  function applyCards(cards, left) {
    var wanted = {};
    cards.forEach(function (c) { wanted[c.id] = true; });
    list.querySelectorAll(".inbox-card").forEach(function (node) {
      var id = node.getAttribute("data-request-id");
      if (wanted[id]) return;
      if (left && left[id]) leftNotice(node, left[id]);
      else node.remove();
    });
    var previous = null;
    cards.forEach(function (c) {
      var node = document.getElementById("request-" + c.id);
      if (!node) {
        node = cardNode(c.html);
        if (!node) return;
        node.classList.add("is-new");
        notify("Approval needed: " + (node.getAttribute("data-title") || "a tool call"),
               (node.getAttribute("data-agent") || "") + " · requested by " + (node.getAttribute("data-requester") || ""),
               "fimone-request-" + c.id);
        list.insertBefore(node, previous ? previous.nextSibling : list.firstChild);
        node.querySelectorAll("time[data-countdown]").forEach(function (t) { clocks.push(t); });
      } else {
        updateStatusLines(node, c.html);
      }
      previous = node;
    });
    tick();
  }

  var reading = false, again = false;
  function refresh() {
    if (reading) { again = true; return; }
    reading = true;
    // The inbox's cards are read with the page's own filters (its query), so a filtered page stays filtered.
    var query = list ? "?cards=1" + window.location.search.replace(/^\?/, "&") +
      "&shown=" + encodeURIComponent(shownIds().join(",")) : "";
    fetch(liveUrl + query, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (state) {
        if (!state) return;
        setCount(state.pending);
        if (list && state.cards) { applyCards(state.cards, state.left); setLede(state.pending, state.cards.length); }
      })
      .catch(function () { /* the next push or reconnect reads again */ })
      .then(function () {
        reading = false;
        if (again) { again = false; refresh(); }
      });
  }

  // The inbox's opt-in: a button that asks the browser's permission once and remembers the choice.
  function setUpNotifications() {
    var box = document.getElementById("inbox-notify");
    var button = document.getElementById("inbox-notify-toggle");
    var state = document.getElementById("inbox-notify-state");
    if (!box || !button || !notifying) return;
    function show() {
      box.hidden = false;
      if (Notification.permission === "denied") {
        state.textContent = "Notifications are blocked for this site in your browser's settings.";
        button.hidden = true;
      } else if (wantsNotifications()) {
        state.textContent = "Notifications are on: a new request is announced while this tab is in the background.";
        button.textContent = "Turn off notifications";
      } else {
        state.textContent = "Get a browser notification when a new request arrives while this tab is in the background.";
        button.textContent = "Turn on notifications";
      }
    }
    function remember(on) {
      try { window.localStorage.setItem(NOTIFY_KEY, on ? "on" : "off"); } catch (e) { /* private mode */ }
    }
    button.addEventListener("click", function () {
      if (wantsNotifications()) { remember(false); show(); return; }
      Promise.resolve(Notification.permission === "granted" ? "granted" : Notification.requestPermission())
        .then(function (answer) { remember(answer === "granted"); show(); });
    });
    show();
  }
  setUpNotifications();

  var attempt = 0, connectedOnce = false;
  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + location.host + "/ws/inbox/");
    window.__inboxSocket = socket; // lets the browser tests drop the connection on purpose
    socket.onopen = function () {
      if (connectedOnce) refresh(); // whatever changed while the link was down
      connectedOnce = true;
      attempt = 0;
    };
    socket.onmessage = function () { refresh(); };
    socket.onclose = function (e) {
      if (e.code === 4401) return; // signed out: nothing to follow
      attempt += 1;
      setTimeout(connect, Math.min(30000, 1000 * Math.pow(2, attempt - 1)) * (0.75 + Math.random() * 0.5));
    };
  }
  connect();
})();
