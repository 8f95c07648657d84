// Copy buttons: a button[data-copy="<id>"] copies the text of the element with that id (a token,
// a link, a line to paste). Hidden until this script runs, since without it they would do
// nothing. Where the browser refuses the clipboard (a page not served over HTTPS), the text is
// selected instead and the button says how to copy it.
(function () {
  "use strict";

  // The button says what happened until it is pressed again (no timer to miss it by).
  function label(button, text) {
    button.textContent = text;
  }

  function select(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  document.querySelectorAll("button[data-copy]").forEach(function (button) { button.hidden = false; });
  document.addEventListener("click", function (e) {
    var button = e.target.closest ? e.target.closest("button[data-copy]") : null;
    if (!button) return;
    e.preventDefault();
    var source = document.getElementById(button.dataset.copy);
    if (!source) return;
    var text = source.textContent.trim();
    var fallback = function () { select(source); label(button, "Selected: press Ctrl+C"); };
    if (!navigator.clipboard || !window.isSecureContext) { fallback(); return; }
    navigator.clipboard.writeText(text).then(function () { label(button, "Copied"); }, fallback);
  });
})();
