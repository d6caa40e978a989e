// Live updates of the pending consents: one Server-Sent Event per consent change (Ward's
// WatchConsents, through the person's own session) refetches the list. The page works without
// this script: reloading shows the same list.
(function () {
  "use strict";
  var list = document.getElementById("pending");
  if (!list || !window.EventSource || !window.fetch) return;
  var busy = false, again = false;
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
        list.innerHTML = html;
        list.setAttribute("data-refreshed", String(Date.now()));
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
