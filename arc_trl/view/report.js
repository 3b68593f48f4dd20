// The report's one script (allowed by its hash in the page's Content-Security-Policy): sort, filter, open a task.
(function () {
  "use strict";
  var table = document.getElementById("tasks");
  var tbody = table.tBodies[0];
  var rows = Array.prototype.slice.call(tbody.rows);
  var detail = document.getElementById("detail");
  var query = document.getElementById("filter");
  var kind = document.getElementById("kind");
  var solved = document.getElementById("solved");
  var shown = document.getElementById("shown");

  function sortBy(th) {
    var key = th.getAttribute("data-sort");
    var numeric = th.hasAttribute("data-numeric");
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var sorted = rows.slice().sort(function (a, b) {
      var x = a.getAttribute("data-" + key), y = b.getAttribute("data-" + key);
      var order;
      if (numeric) {
        var p = x === "" ? -Infinity : parseFloat(x), q = y === "" ? -Infinity : parseFloat(y);
        order = p - q;
      } else {
        order = x < y ? -1 : (x > y ? 1 : 0);
      }
      return ascending ? order : -order;
    });
    sorted.forEach(function (r) { tbody.appendChild(r); });
  }

  function filter() {
    var text = query.value.trim().toLowerCase();
    var n = 0;
    rows.forEach(function (r) {
      var ok = (!text || r.getAttribute("data-search").indexOf(text) >= 0)
        && (!kind.value || (" " + r.getAttribute("data-kinds") + " ").indexOf(" " + kind.value + " ") >= 0)
        && (!solved.value || r.getAttribute("data-solved") === solved.value);
      r.hidden = !ok;
      if (ok) { n += 1; }
    });
    shown.textContent = n + " of " + rows.length + " tasks";
  }

  function open(row) {
    var template = document.getElementById("task-" + row.getAttribute("data-index"));
    detail.replaceChildren(template.content.cloneNode(true));
    detail.scrollTop = 0;
    rows.forEach(function (r) { r.classList.toggle("selected", r === row); });
    if (history.replaceState) {
      history.replaceState(null, "", "#" + encodeURIComponent(row.getAttribute("data-task-id")));
    }
  }

  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
    if (th.hasAttribute("data-sort")) { th.addEventListener("click", function () { sortBy(th); }); }
  });
  [query, kind, solved].forEach(function (el) { el.addEventListener("input", filter); });
  tbody.addEventListener("click", function (e) {
    var row = e.target.closest("tr");
    if (row) { open(row); }
  });
  filter();
  var wanted = decodeURIComponent(location.hash.slice(1));
  var first = rows.filter(function (r) { return r.getAttribute("data-task-id") === wanted; })[0];
  if (first || rows.length) { open(first || rows[0]); }
  document.documentElement.setAttribute("data-ready", "1");
})();
