// PinLog operator console: live refresh of the overview (polls /console/api/overview).
// Small vanilla script, no dependencies; text goes in with textContent (never innerHTML),
// except the chart, an SVG the server renders from numbers and escaped labels.
(function () {
  "use strict";
  var counts = document.getElementById("counts");
  if (!counts) { return; }
  var every = Math.max(200, 1000 * parseFloat(document.body.dataset.refresh || "5"));

  function age(seconds) {
    if (seconds === null || seconds === undefined) { return "-"; }
    seconds = Math.max(0, seconds);
    if (seconds < 120) { return seconds.toFixed(0) + " s"; }
    if (seconds < 7200) { return (seconds / 60).toFixed(1) + " min"; }
    return (seconds / 3600).toFixed(1) + " h";
  }

  function cell(row, text, href) {
    var td = document.createElement("td");
    if (href) {
      var a = document.createElement("a");
      a.href = href; a.textContent = text; td.appendChild(a);
    } else { td.textContent = text; }
    row.appendChild(td);
    return td;
  }

  function fill(tbody, items, columns, empty) {
    var rows = [];
    items.forEach(function (item) {
      var tr = document.createElement("tr");
      columns(tr, item);
      rows.push(tr);
    });
    if (!rows.length) {
      var tr = document.createElement("tr");
      cell(tr, empty).colSpan = tbody.parentNode.tHead.rows[0].cells.length;
      rows.push(tr);
    }
    tbody.replaceChildren.apply(tbody, rows);
  }

  function render(data) {
    Object.keys(data.rows).forEach(function (stage) {
      Object.keys(data.rows[stage]).forEach(function (status) {
        var td = counts.querySelector('[data-count="' + stage + "." + status + '"]');
        if (td) { td.textContent = String(data.rows[stage][status]); }
      });
    });
    var facts = { total: data.total, unfinished: data.unfinished, oldest: age(data.oldest_unfinished_seconds),
                  exhausted_unfinished: data.exhausted_unfinished, dead_ends: data.dead_ends };
    Object.keys(facts).forEach(function (key) {
      var dd = document.querySelector('[data-fact="' + key + '"]');
      if (dd) { dd.textContent = String(facts[key]); }
    });
    document.getElementById("chart").innerHTML = data.chart;
    fill(document.querySelector("#reasons tbody"), data.reasons, function (tr, r) {
      cell(tr, r.reason, "/console/failures?reason=" + encodeURIComponent(r.reason));
      cell(tr, String(r.n)); cell(tr, r.last_at || "");
    }, "no failures");
    fill(document.querySelector("#recent tbody"), data.recent, function (tr, c) {
      tr.dataset.context = String(c.context_id);
      var td = cell(tr, String(c.context_id), "/console/contexts/" + c.context_id);
      if (c.deleted) { td.appendChild(document.createTextNode(" (deleted)")); }
      cell(tr, c.member_id === null ? "" : String(c.member_id));
      cell(tr, c.record_id === null ? "" : String(c.record_id));
      cell(tr, c.embedding_status); cell(tr, c.keyword_status);
      cell(tr, String(c.retry_count)); cell(tr, c.updated_at || "");
    }, "no contexts yet");
    var updated = document.getElementById("updated");
    updated.textContent = "updated " + new Date(data.generated_at * 1000).toLocaleTimeString();
    updated.dataset.generation = String((parseInt(updated.dataset.generation || "0", 10)) + 1);
  }

  function tick() {
    fetch("/console/api/overview", { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) {
        if (r.status === 401) { window.location.href = "/console/login"; throw new Error("logged out"); }
        return r.json();
      })
      .then(render)
      .catch(function () { /* next tick tries again */ })
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
}());
