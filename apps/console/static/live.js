// Live updates of the pending consents: one Server-Sent Event per consent change (Ward's
// WatchConsents, through the person's own session) refetches the list. The page works without
// this script: reloading shows the same list.
(function () {
  "use strict";
  var list = document.getElementById("pending");
  if (!list || !window.EventSource || !window.fetch) return;
  var busy = false, again = false, last = null;
  // Keyboard focus survives a refresh: the same button of the same consent is focused again.
  function focused() {
    var a = document.activeElement;
    if (!a || !list.contains(a) || a.tagName !== "BUTTON") return null;
    var article = a.closest("article");
    return article ? "#" + article.id + " button." + a.className : null;
  }
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch("/consents/pending", { credentials: "same-origin" })
      .then(function (r) {
        if (r.status === 401) { window.location.assign("/signin"); throw new Error("signed out"); }
        if (!r.ok) throw new Error("status " + r.status);
        return r.text();
      })
      .then(function (html) {
        if (html === last) return;
        last = html;
        var keep = focused();
        list.innerHTML = html;
        list.setAttribute("data-refreshed", String(Date.now()));
        if (keep) {
          var again = document.querySelector(keep);
          if (again) again.focus();
        }
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }
  var source = new EventSource("/events");
  source.addEventListener("consent", refresh);
  source.addEventListener("end", function () { source.close(); window.location.reload(); });
  source.addEventListener("open", function () { list.setAttribute("data-live", "open"); });
})();
