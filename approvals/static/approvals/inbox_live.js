// The live inbox: the nav's pending count on every page, and on the inbox page the cards
// themselves, refreshed when the server says a request entered or left this user's inbox.
//
// The socket (ws/inbox/) only carries "request X was opened / voted on / settled"; what to show is
// then read over HTTP from /approvals/live/ with the same authorised read as the inbox page. No
// polling: a read happens after a push, and once after a reconnect (changes made while the link was
// down). Cards already on the page are not re-rendered, so a reason being typed is kept: only their
// status lines (a quorum's tally, an escalation) are brought up to date.
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

  function setCount(pending) {
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

  function setLede(pending) {
    if (!lede) return;
    lede.textContent = pending
      ? pending + " tool call" + (pending === 1 ? "" : "s") + " waiting for your decision, soonest deadline first."
      : lede.getAttribute("data-empty");
    if (empty) empty.hidden = pending > 0;
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

  function applyCards(cards) {
    var wanted = {};
    cards.forEach(function (c) { wanted[c.id] = true; });
    list.querySelectorAll(".inbox-card").forEach(function (node) {
      if (!wanted[node.getAttribute("data-request-id")]) node.remove();
    });
    var previous = null;
    cards.forEach(function (c) {
      var node = document.getElementById("request-" + c.id);
      if (!node) {
        node = cardNode(c.html);
        if (!node) return;
        node.classList.add("is-new");
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
    fetch(liveUrl + (list ? "?cards=1" : ""), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (state) {
        if (!state) return;
        setCount(state.pending);
        if (list && state.cards) { applyCards(state.cards); setLede(state.pending); }
      })
      .catch(function () { /* the next push or reconnect reads again */ })
      .then(function () {
        reading = false;
        if (again) { again = false; refresh(); }
      });
  }

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
