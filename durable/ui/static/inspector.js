// little ui: live updates without reloading. The server sends an SSE "change" event when
// what the page shows changed; the page then fetches its own fragment and swaps it in.
(function () {
  "use strict";
  var live = document.body.getAttribute("data-live");
  var dot = document.getElementById("live-state");
  if (!live || !window.EventSource) return;
  var busy = false, again = false, held = false;

  function editing(el) {
    var a = document.activeElement;
    if (a && el.contains(a) && /^(TEXTAREA|INPUT|SELECT)$/.test(a.tagName)) return true;
    // A field typed into and left is still someone's unsent answer.
    return Array.prototype.some.call(el.querySelectorAll("textarea, input"), function (f) {
      return f.type !== "hidden" && f.value !== f.defaultValue;
    });
  }

  function refresh() {
    var el = document.getElementById("live");
    if (!el) return;
    if (busy) { again = true; return; }
    if (editing(el)) { held = true; return; }  // never throw away what someone is typing
    busy = true;
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    url.searchParams.delete("flash");
    var open = Array.prototype.map.call(el.querySelectorAll("details[open]"), function (d) {
      return d.className;
    });
    fetch(url.toString(), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        if (editing(el)) { held = true; return; }  // typed into while the fragment was on its way
        el.innerHTML = html;
        open.forEach(function (c) {
          var d = el.querySelector("details." + c);
          if (d) d.open = true;
        });
        document.body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  document.addEventListener("focusout", function () {
    if (held) { held = false; setTimeout(refresh, 0); }
  });

  var src = new EventSource(live);
  src.addEventListener("change", refresh);
  src.onopen = function () { if (dot) dot.className = "live-state on"; };
  src.onerror = function () { if (dot) dot.className = "live-state"; };
})();
