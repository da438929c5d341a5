// Behaviour of the harness's report pages: the paginated instance table, sortable and
// filterable tables, and the test-output search. Everything shown comes from the page's
// own data and is inserted as text (textContent), never as markup; links are relative
// paths checked against a strict pattern, so no data can become a script or a URL scheme.
(function () {
  "use strict";

  var SAFE_HREF = /^[A-Za-z0-9._~%\-\/]+$/;

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function safeHref(path) {
    return typeof path === "string" && SAFE_HREF.test(path) && path.indexOf("..") === -1 ? path : null;
  }

  function compare(a, b) {
    var an = a === null || a === undefined || a === "", bn = b === null || b === undefined || b === "";
    if (an || bn) return an === bn ? 0 : (an ? 1 : -1);  // empty values last
    if (typeof a === "number" && typeof b === "number") return a - b;
    return String(a).localeCompare(String(b), undefined, {numeric: true});
  }

  // ------------------------------------------------------------------ instance table
  function instanceTable() {
    var table = document.getElementById("instance-table");
    var source = document.getElementById("instance-data");
    if (!table || !source) return;
    var rows = JSON.parse(source.textContent);
    var body = table.tBodies[0];
    var text = document.getElementById("filter-text");
    var status = document.getElementById("filter-status");
    var repo = document.getElementById("filter-repo");
    var flagged = document.getElementById("filter-flags");
    var size = document.getElementById("page-size");
    var info = document.getElementById("page-info");
    var prev = document.getElementById("page-prev");
    var next = document.getElementById("page-next");
    var state = {key: "instance_id", dir: 1, page: 0, shown: rows};

    function matches(row) {
      var needle = text.value.trim().toLowerCase();
      if (status.value && row.status !== status.value) return false;
      if (repo.value && row.repo !== repo.value) return false;
      if (flagged.checked && !row.flags.length) return false;
      if (!needle) return true;
      return (row.instance_id + " " + row.repo + " " + row.status + " " + row.reason + " " + row.flags.join(" ") + " " + (row.notes || []).join(" "))
        .toLowerCase().indexOf(needle) !== -1;
    }

    function cell(row, key) {
      var td;
      if (key === "instance_id") {
        td = el("td", null, "id");
        var href = safeHref(row.page);
        var link = el(href ? "a" : "span", row.instance_id);
        if (href) link.setAttribute("href", href);
        td.appendChild(link);
        if (row.attempts > 1) td.appendChild(el("span", " (" + row.attempts_resolved + "/" + row.attempts + " attempts)", "note"));
      } else if (key === "status") {
        td = el("td");
        td.appendChild(el("span", row.status, "badge " + row.status.replace(/[^A-Z_]/g, "")));
      } else if (key === "f2p" || key === "p2p") {
        td = el("td", row[key + "_passed"] + "/" + row[key + "_total"], "num");
      } else if (key === "flags") {
        td = el("td");
        row.flags.forEach(function (flag) { td.appendChild(el("span", flag, "badge flag")); td.appendChild(document.createTextNode(" ")); });
        (row.notes || []).forEach(function (note) { td.appendChild(el("span", note, "badge note")); td.appendChild(document.createTextNode(" ")); });
      } else if (key === "seconds") {
        td = el("td", row.seconds === null ? "" : row.seconds.toFixed(2), "num");
      } else if (key === "missing") {
        td = el("td", row.missing || "", "num");
      } else {
        td = el("td", row[key], key === "reason" ? "reason" : null);
      }
      return td;
    }

    var keys = Array.prototype.map.call(table.tHead.rows[0].cells, function (th) { return th.getAttribute("data-key"); });

    function sortValue(row, key) {
      if (key === "f2p" || key === "p2p") return row[key + "_total"] ? row[key + "_passed"] / row[key + "_total"] : null;
      if (key === "flags") return row.flags.length || null;
      return row[key];
    }

    function render() {
      var per = parseInt(size.value, 10);
      var pages = Math.max(1, Math.ceil(state.shown.length / per));
      state.page = Math.min(state.page, pages - 1);
      var start = state.page * per;
      var slice = state.shown.slice(start, start + per);
      var fragment = document.createDocumentFragment();
      slice.forEach(function (row) {
        var tr = el("tr");
        tr.setAttribute("data-status", row.status);
        keys.forEach(function (key) { tr.appendChild(cell(row, key)); });
        fragment.appendChild(tr);
      });
      body.textContent = "";
      body.appendChild(fragment);
      info.textContent = state.shown.length
        ? "rows " + (start + 1) + "–" + (start + slice.length) + " of " + state.shown.length
          + (state.shown.length !== rows.length ? " (filtered from " + rows.length + ")" : "")
          + " · page " + (state.page + 1) + " of " + pages
        : "no instance matches (of " + rows.length + ")";
      prev.disabled = state.page === 0;
      next.disabled = state.page >= pages - 1;
    }

    function apply() {
      state.shown = rows.filter(matches);
      state.shown.sort(function (a, b) { return state.dir * compare(sortValue(a, state.key), sortValue(b, state.key)); });
      state.page = 0;
      render();
    }

    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.addEventListener("click", function () {
        var key = th.getAttribute("data-key");
        state.dir = state.key === key ? -state.dir : 1;
        state.key = key;
        Array.prototype.forEach.call(table.tHead.rows[0].cells, function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
        apply();
      });
    });
    [text, status, repo, flagged, size].forEach(function (input) {
      input.addEventListener(input === text ? "input" : "change", apply);
    });
    prev.addEventListener("click", function () { state.page -= 1; render(); });
    next.addEventListener("click", function () { state.page += 1; render(); });
    Array.prototype.forEach.call(document.querySelectorAll("a[data-set-status]"), function (link) {
      link.addEventListener("click", function () {
        status.value = link.getAttribute("data-set-status");
        apply();
      });
    });
    apply();
  }

  // ------------------------------------------------------------------ static tables
  function sortableTables() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
      var headers = table.tHead ? table.tHead.rows[0].cells : [];
      Array.prototype.forEach.call(headers, function (th, index) {
        var type = th.getAttribute("data-type");
        if (!type) return;
        th.addEventListener("click", function () {
          var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
          Array.prototype.forEach.call(headers, function (other) { other.removeAttribute("aria-sort"); });
          th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
          var body = table.tBodies[0];
          var rows = Array.prototype.slice.call(body.rows);
          rows.sort(function (a, b) {
            var x = a.cells[index].getAttribute("data-value") || a.cells[index].textContent;
            var y = b.cells[index].getAttribute("data-value") || b.cells[index].textContent;
            if (type === "number") { x = parseFloat(x); y = parseFloat(y); x = isNaN(x) ? null : x; y = isNaN(y) ? null : y; }
            return dir * compare(x, y);
          });
          rows.forEach(function (row) { body.appendChild(row); });
        });
      });
    });
    Array.prototype.forEach.call(document.querySelectorAll("input[data-filter-table]"), function (input) {
      var table = document.getElementById(input.getAttribute("data-filter-table"));
      var select = document.querySelector("select[data-filter-table='" + input.getAttribute("data-filter-table") + "']");
      var counter = document.getElementById(input.getAttribute("data-filter-table") + "-count");
      function apply() {
        var needle = input.value.trim().toLowerCase();
        var wanted = select ? select.value : "";
        var shown = 0;
        Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
          var ok = (!needle || row.textContent.toLowerCase().indexOf(needle) !== -1)
            && (!wanted || row.getAttribute("data-kind") === wanted);
          row.classList.toggle("hidden", !ok);
          shown += ok ? 1 : 0;
        });
        if (counter) counter.textContent = shown + " of " + table.tBodies[0].rows.length + " shown";
      }
      input.addEventListener("input", apply);
      if (select) select.addEventListener("change", apply);
      apply();
    });
  }

  // ------------------------------------------------------------------ output search
  function outputSearch() {
    Array.prototype.forEach.call(document.querySelectorAll("input[data-search-in]"), function (input) {
      var pre = document.getElementById(input.getAttribute("data-search-in"));
      var counter = document.getElementById(input.getAttribute("data-search-in") + "-count");
      var parts = Array.prototype.map.call(pre.querySelectorAll("[data-text]"), function (node) {
        return {node: node, text: node.textContent};
      });
      var marks = [], current = -1, timer = null;
      var LIMIT = 5000;

      function focus(index) {
        if (!marks.length) return;
        if (current >= 0) marks[current].classList.remove("current");
        current = (index + marks.length) % marks.length;
        marks[current].classList.add("current");
        marks[current].scrollIntoView({block: "center"});
        counter.textContent = (current + 1) + " of " + marks.length + (marks.length >= LIMIT ? "+" : "") + " matches";
      }

      function search() {
        var needle = input.value;
        marks = []; current = -1;
        parts.forEach(function (part) {
          part.node.textContent = "";
          if (!needle) { part.node.textContent = part.text; return; }
          var haystack = part.text.toLowerCase(), lower = needle.toLowerCase();
          var at = 0, found;
          var fragment = document.createDocumentFragment();
          while ((found = haystack.indexOf(lower, at)) !== -1 && marks.length < LIMIT) {
            fragment.appendChild(document.createTextNode(part.text.slice(at, found)));
            var mark = el("mark", part.text.slice(found, found + needle.length));
            fragment.appendChild(mark);
            marks.push(mark);
            at = found + needle.length;
          }
          fragment.appendChild(document.createTextNode(part.text.slice(at)));
          part.node.appendChild(fragment);
        });
        if (!needle) counter.textContent = "";
        else if (!marks.length) counter.textContent = "no match";
        else { var details = pre.closest("details"); if (details) details.open = true; focus(0); }
      }

      input.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(search, 200); });
      input.addEventListener("keydown", function (event) {
        if (event.key === "Enter") { event.preventDefault(); if (marks.length) focus(current + (event.shiftKey ? -1 : 1)); else search(); }
      });
      var nextButton = document.getElementById(input.getAttribute("data-search-in") + "-next");
      var prevButton = document.getElementById(input.getAttribute("data-search-in") + "-prev");
      if (nextButton) nextButton.addEventListener("click", function () { focus(current + 1); });
      if (prevButton) prevButton.addEventListener("click", function () { focus(current - 1); });
    });
  }

  instanceTable();
  sortableTables();
  outputSearch();
})();
