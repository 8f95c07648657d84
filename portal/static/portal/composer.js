// The message box of the portal's chat pages: Enter sends, Shift+Enter makes a new line.
//
// Enter sends only what the Send button would send: nothing while Send is disabled or hidden
// (the agent is still working), nothing empty, nothing while an input method is composing a word
// (Enter then picks the word, as people writing Chinese or Japanese expect).
(function () {
  "use strict";

  var form = document.getElementById("composer");
  var box = form && form.querySelector("textarea[name=message]");
  var send = form && form.querySelector("#send");
  if (!form || !box || !send) return;

  box.addEventListener("keydown", function (e) {
    if (e.key !== "Enter" || e.shiftKey || e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.isComposing || e.keyCode === 229) return;
    e.preventDefault();
    if (send.disabled || send.hidden || !box.value.trim()) return;
    form.requestSubmit(send);
  });

  // A message is sent once: a second Enter (or click) while the page loads the answer does nothing.
  form.addEventListener("submit", function (e) {
    var by = e.submitter;
    if (by && by !== send) return;
    if (form.dataset.sending === "1") { e.preventDefault(); return; }
    form.dataset.sending = "1";
  });
  // Back from the next page (the browser's page cache): the form may send again.
  window.addEventListener("pageshow", function () { delete form.dataset.sending; });
})();
