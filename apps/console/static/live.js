// Live updates: one Server-Sent Event per office change (Ward's WatchConsents for the pending
// consents, the Orchestrator's WatchTransitions for the transitions, each through the person's
// own session) refetches the list. The pages work without this script: reloading shows the same
// list.
(function () {
  "use strict";
  if (!window.EventSource || !window.fetch) return;
  function live(list, src, events, kind) {
    var busy = false, again = false, last = null;
    // Keyboard focus survives a refresh: the same button of the same row is focused again.
    function focused() {
      var a = document.activeElement;
      if (!a || !list.contains(a) || a.tagName !== "BUTTON") return null;
      var row = a.closest("article, tr");
      return row && row.id ? "#" + row.id + " button." + a.className : null;
    }
    function refresh() {
      if (busy) { again = true; return; }
      busy = true;
      fetch(src, { credentials: "same-origin" })
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
            var back = document.querySelector(keep);
            if (back) back.focus();
          }
        })
        .catch(function () {})
        .then(function () {
          busy = false;
          if (again) { again = false; refresh(); }
        });
    }
    var source = new EventSource(events);
    source.addEventListener(kind, refresh);
    source.addEventListener("end", function () { source.close(); window.location.reload(); });
    source.addEventListener("open", function () { list.setAttribute("data-live", "open"); });
  }
  var pending = document.getElementById("pending");
  if (pending) live(pending, "/consents/pending", "/events", "consent");
  var transitions = document.getElementById("transition-list");
  if (transitions) live(transitions, "/transitions/list", "/transitions/events", "transition");
})();
