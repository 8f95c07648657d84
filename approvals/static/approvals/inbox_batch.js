// The inbox's batch bar, shown while two or more requests wait: "All shown" selects every card on
// the page, the bar says how many are selected, and its buttons wait for a selection; once
// something is selected the bar follows the reader at the bottom of the screen. Cards the live
// inbox adds or drops are counted as they come and go. Without JavaScript each card's box is
// ticked by hand; the server decides each selected request as it would alone.
(function () {
  "use strict";

  var form = document.getElementById("batch-form");
  var cards = document.getElementById("inbox-cards");
  if (!form || !cards) return;
  var all = document.getElementById("batch-all");
  var count = document.getElementById("batch-count");
  var buttons = form.querySelectorAll("button[name=decision]");
  var hint = count.textContent;
  var filters = document.getElementById("inbox-filters");

  function boxes() {
    return Array.prototype.slice.call(cards.querySelectorAll("input[name=request][form=batch-form]"));
  }

  function update() {
    var shown = boxes();
    var picked = shown.filter(function (box) { return box.checked; }).length;
    var batch = shown.length >= 2;
    form.hidden = !batch;
    cards.setAttribute("data-batch", batch ? "on" : "off");
    if (!batch) shown.forEach(function (box) { box.checked = false; });
    if (!batch) picked = 0;
    form.classList.toggle("is-picking", picked > 0);
    cards.classList.toggle("is-picking", picked > 0);
    if (filters && shown.length) filters.hidden = false; // requests arrived on a page that had none
    count.textContent = picked ? picked + " selected" : hint;
    all.checked = picked > 0 && picked === shown.length;
    all.indeterminate = picked > 0 && picked < shown.length;
    buttons.forEach(function (button) { button.disabled = picked === 0; });
  }

  all.addEventListener("change", function () {
    boxes().forEach(function (box) { box.checked = all.checked; });
    update();
  });
  cards.addEventListener("change", function (event) {
    if (event.target.matches("input[name=request]")) update();
  });
  new MutationObserver(update).observe(cards, { childList: true });
  // A reader quick enough to tick "All shown" before this script ran (it is deferred) keeps the tick.
  if (all.checked) boxes().forEach(function (box) { box.checked = true; });
  update();
})();
