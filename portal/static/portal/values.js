// The values of a run as people read them: small DOM helpers, tool names and JSON keys made
// readable, moments in the viewer's time zone, and a tool's arguments and results as small tables
// (dataView) with amounts in their currency, the JSON one click away.
//
// Safety: all of it is set with textContent; a model's or a tool's text never becomes HTML here.

var LONG_TEXT = 280;
var MAX_ROWS = 20;
var MAX_COLUMNS = 8;
var MAX_DEPTH = 4;

// --- small DOM helpers -------------------------------------------------------------------------

export function el(tag, className, text) {
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

export function pretty(value) {
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

export function sentence(text) {
  var t = String(text || "").trim();
  return t ? t.charAt(0).toUpperCase() + t.slice(1) : t;
}

// Ends ``text`` with one full stop, unless it already ends a sentence.
export function period(text) {
  var t = String(text || "").trim();
  return /[.!?…”"]$/.test(t) ? t : t + ".";
}

// "oa__purchase_pay" → "Purchase pay": the name made readable when a tool carries no title.
export function readableName(name) {
  var words = String(name || "").split("__").pop().replace(/[_-]+/g, " ").trim();
  return sentence(words || String(name || "tool"));
}

// "paid_at" → "Paid at": a key of a tool's JSON as a label.
// A JSON key as a label, as the server's pages write it (approvals.presentation.humanized_key):
// ``purchase_id`` → "Purchase ID", ``vendorName`` → "Vendor name".
var ACRONYMS = { id: "ID", url: "URL", po: "PO", iban: "IBAN", vat: "VAT", sku: "SKU", api: "API" };
export function label(key) {
  var words = String(key).replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[_\-.]+/g, " ").trim().split(/\s+/);
  words = words.map(function (w) { return ACRONYMS[w.toLowerCase()] || w.toLowerCase(); });
  return sentence(words.join(" "));
}

// Moments as the server's pages write them: a 24-hour clock with its zone ("13:37 UTC"), here
// in the viewer's own zone ("22:37 GMT+9"); whatever the locale's habit (12-hour "01:35 PM").
var CLOCK = { hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZoneName: "short" };
export var DATE_AND_CLOCK = {
  year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", hourCycle: "h23",
  timeZoneName: "short",
};

export function moment(when, options) {
  try {
    return new Intl.DateTimeFormat([], options).format(when);
  } catch (e) {
    return when.toISOString().replace("T", " ").slice(0, 16) + " UTC"; // an engine without Intl options
  }
}

export function clock(iso) {
  var when = new Date(iso);
  if (isNaN(when.getTime())) return "";
  return moment(when, CLOCK);
}

export function formatDuration(ms) {
  if (typeof ms !== "number") return "";
  return ms < 1000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + " s";
}

// How long someone waited, in words: "40 s", "1 min 3 s", "2 h 5 min".
export function formatWait(ms) {
  if (typeof ms !== "number" || !isFinite(ms)) return "";
  var seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return seconds + " s";
  var minutes = Math.floor(seconds / 60);
  if (minutes < 60) return minutes + " min" + (seconds % 60 ? " " + (seconds % 60) + " s" : "");
  return Math.floor(minutes / 60) + " h" + (minutes % 60 ? " " + (minutes % 60) + " min" : "");
}

export function details(summary, body, className) {
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

// --- values as people read them ----------------------------------------------------------------

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

// The currency of a call as its context (what approvers read about it) says it: a "Currency"
// item, or an amount written with its currency ("1,200.00 USD"). Arguments that are amounts then
// read in it too, as on the inbox's card.
export function contextCurrency(context) {
  var found = null;
  (context || []).forEach(function (item) {
    if (found || !item || typeof item.value !== "string") return;
    var value = item.value.trim();
    var labelText = String(item.label || "");
    if (/^currency( code)?$/i.test(labelText) && CURRENCY.test(value)) found = value;
    var written = /^-?[\d.,\s]+\s([A-Z]{3})$/.exec(value);
    if (written && AMOUNT_KEY.test(labelText)) found = written[1];
  });
  return found;
}

function money(amount, currency) {
  var text = amount.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  return text + " " + currency;
}

// A scalar as text, or null when it is not a scalar. ``key`` and ``siblings`` give it meaning:
// an amount next to a currency reads "1,200.00 USD"; ``fallback`` is the currency to use when
// no sibling names one (the call's, from its context).
export function scalarText(value, key, siblings, fallback) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "boolean") return value ? "yes" : "no";
  var currency = key !== undefined && AMOUNT_KEY.test(String(key)) ? currencyOf(siblings) || fallback || null : null;
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
        return moment(when, DATE_AND_CLOCK);
      }
    }
    return value;
  }
  return null;
}

function isPlainObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

export function valueNode(value, key, siblings, depth, fallback) {
  var text = scalarText(value, key, siblings, fallback);
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
    return kvTable(value, depth + 1, depth === 0 ? fallback : undefined);
  }
  return el("span", "", String(value));
}

var CURRENCY_KEY = /^(currency|currency_code)$/i;

// Whether an amount of ``obj`` already shows its currency ("1,200.00 USD"): then the currency
// needs no row or column of its own.
function currencyShown(obj) {
  return Boolean(currencyOf(obj)) && Object.keys(obj).some(function (k) {
    return AMOUNT_KEY.test(k) && obj[k] !== null && obj[k] !== "" && !isNaN(Number(obj[k]));
  });
}

// An object as a two-column table: label, value (amounts in ``fallback`` when it names no currency).
function kvTable(obj, depth, fallback) {
  var table = el("table", "kv");
  var body = el("tbody");
  var shown = currencyShown(obj);
  Object.keys(obj).forEach(function (k) {
    if (shown && CURRENCY_KEY.test(k)) return;
    var tr = el("tr");
    tr.appendChild(el("th", "", label(k)));
    var td = el("td");
    td.appendChild(valueNode(obj[k], k, obj, depth || 0, fallback));
    tr.appendChild(td);
    body.appendChild(tr);
  });
  table.appendChild(body);
  return table;
}

// A list of objects as a compact table: a column per key (the first ones met), a row per item;
// no currency column where every row's amount shows its currency. Each cell carries its column's
// name (``data-label``), which a phone's narrow screen shows beside it, a row becoming a block.
function rowsTable(items, depth) {
  var columns = [];
  var currencyInAmounts = items.every(function (item) {
    return currencyShown(item) || !Object.keys(item).some(function (k) { return CURRENCY_KEY.test(k); });
  });
  items.forEach(function (item) {
    Object.keys(item).forEach(function (k) {
      if (currencyInAmounts && CURRENCY_KEY.test(k)) return;
      if (columns.indexOf(k) < 0) columns.push(k);
    });
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
      td.dataset.label = label(k);
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
// ``currency``: the call's currency, for amounts that do not name theirs.
export function dataView(value, currency) {
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
  wrap.appendChild(isPlainObject(value) || Array.isArray(value) ? valueNode(value, undefined, undefined, 0, currency) : valueNode(value));
  var toggle = button("show-json", "Technical details (JSON)");
  var pre = el("pre", "json", pretty(value));
  pre.hidden = true;
  toggle.setAttribute("aria-expanded", "false");
  toggle.addEventListener("click", function () {
    pre.hidden = !pre.hidden;
    toggle.textContent = pre.hidden ? "Technical details (JSON)" : "Hide technical details (JSON)";
    toggle.setAttribute("aria-expanded", String(!pre.hidden));
  });
  wrap.appendChild(toggle);
  wrap.appendChild(pre);
  return wrap;
}
