// Condition rows (approvals/condition_rows.py) said back in words as they are edited: "When
// Amount is at most 4,800.00 USD and Vendor is Northwind Cloud." — under the rows, and in a
// standing approval's sentence ("Approve later calls of Pay a purchase where …, in this
// conversation, for 8 hours."). The server says the same when the page is drawn; this keeps it
// true while the approver types.
(function () {
  "use strict";

  var MONEY = /(^|_|\b)(amount|price|total|cost|fee|sum|balance)($|_|\b)/i;

  // A number as the server reads a typed one (approvals.condition_rows._NUMBER_TYPED): commas only
  // between groups of three digits; anything else is said as typed, never guessed at.
  var NUMBER_TYPED = /^-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?$/;

  function valueWords(key, text, currency) {
    var number = NUMBER_TYPED.test(text) ? Number(text.replace(/,/g, "")) : NaN;
    if (currency && MONEY.test(key) && isFinite(number)) {
      return number.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 }) + " " + currency;
    }
    return text;
  }

  // A typed field name as the server writes it (approvals.presentation.humanized_key):
  // "purchase_id" → "Purchase ID".
  var ACRONYMS = { id: "ID", url: "URL", po: "PO", iban: "IBAN", vat: "VAT", sku: "SKU", api: "API" };
  function humanized(key) {
    var said = key.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[_\-.]+/g, " ").trim().split(/\s+/)
      .map(function (w) { return ACRONYMS[w.toLowerCase()] || w.toLowerCase(); }).join(" ");
    return said.charAt(0).toUpperCase() + said.slice(1);
  }

  function words(box) {
    var currency = box.dataset.currency || "";
    var said = [];
    box.querySelectorAll(".condition-row").forEach(function (row) {
      var field = row.querySelector("[name$='-field']");
      var op = row.querySelector("[name$='-op']");
      var value = row.querySelector("[name$='-value']");
      var key = field.value.trim();
      var text = value.value.trim();
      if (!key || !text) return;
      var label = field.tagName === "SELECT" ? field.options[field.selectedIndex].text : humanized(key);
      said.push(label + " " + op.options[op.selectedIndex].text + " " + valueWords(key, text, currency));
    });
    return said.join(" and ");
  }

  function grantSentence(box) {
    var form = box.closest("form");
    var where = form && form.querySelector("[data-grant-where]");
    if (!where) return;
    var said = words(box);
    where.textContent = said ? "where " + said : "whatever their arguments";
    var scope = form.querySelector("input[name=grant_scope]:checked");
    var scopeNode = form.querySelector("[data-grant-scope]");
    if (scope && scopeNode) {
      scopeNode.textContent = scope.value === "agent" ? "in every conversation of this agent" : "in this conversation";
    }
    var hours = form.querySelector("input[name=grant_hours]");
    var forever = form.querySelector("input[name=grant_until_revoked]");
    var timeNode = form.querySelector("[data-grant-time]");
    if (timeNode && hours) {
      var n = Number(hours.value);
      timeNode.textContent = forever && forever.checked
        ? "until revoked"
        : n >= 1 ? "for " + n + " hour" + (n === 1 ? "" : "s") : "for how many hours? (give a number)";
    }
  }

  function refresh(box) {
    var line = box.querySelector(".condition-words");
    if (line) {
      var said = words(box);
      line.textContent = said ? "When " + said + "." : "No condition: it always applies.";
    }
    grantSentence(box);
  }

  // Listened for on the whole page: rows added later (the admin's "Add another stage") follow
  // too, and the script may load before the rows (in the admin's head).
  function follow(e) {
    var target = e.target;
    if (!target || !target.closest) return;
    var box = target.closest(".condition-rows");
    if (box) { refresh(box); return; }
    var form = target.closest("form");
    var rows = form && form.querySelector(".condition-rows");
    if (rows) grantSentence(rows);
  }
  document.addEventListener("input", follow);
  document.addEventListener("change", follow);
})();
