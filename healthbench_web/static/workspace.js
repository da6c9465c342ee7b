// The site's small first-party script: keyboard shortcuts and their `?` overlay, focus and
// announcements after htmx swaps, drafts kept on the server as people type, and a warning
// before leaving text that is not saved. Pages work without it; it only spares clicks.
(function () {
  "use strict";

  // --- Tables that scroll sideways can be reached and scrolled by keyboard ---------------------
  function labelScrollers(root) {
    (root.querySelectorAll ? root : document).querySelectorAll(".table-scroll:not([tabindex])").forEach(function (box) {
      var table = box.querySelector("table");
      var section = box.closest("section, article, .card");
      var heading = section ? section.querySelector("h1, h2, h3") : null;
      var caption = table ? table.querySelector("caption") : null;
      box.setAttribute("tabindex", "0");
      box.setAttribute("role", "region");
      box.setAttribute("aria-label", (caption || heading || document.querySelector("h1") || { textContent: "Table" }).textContent.trim() + " (table)");
    });
  }
  labelScrollers(document);
  document.body.addEventListener("htmx:afterSettle", function (event) { labelScrollers(event.detail.target || document); });

  // --- Announcements and focus after htmx swaps ---------------------------------------------
  var announcer = document.getElementById("announce");

  var lastSaid = "";
  function announce(text) {
    // A poll that brings back the same words says nothing new.
    if (!announcer || !text || text === lastSaid) return;
    lastSaid = text;
    // Emptied first, so the same words said twice are read twice.
    announcer.textContent = "";
    window.setTimeout(function () { announcer.textContent = text; }, 50);
  }

  function focusable(element) {
    if (!element) return null;
    if (!element.matches("a[href], button, input, select, textarea, [tabindex]")) element.setAttribute("tabindex", "-1");
    return element;
  }

  function answered(row) {
    return !!row.querySelector("button.chosen") || row.classList.contains("cant");
  }

  function nextBallotRow(row) {
    var rows = Array.prototype.slice.call(document.querySelectorAll(".ballot-row"));
    var after = rows.slice(rows.indexOf(row) + 1).concat(rows.slice(0, rows.indexOf(row)));
    for (var i = 0; i < after.length; i++) {
      if (!answered(after[i])) return after[i].querySelector("button.choice");
    }
    return document.querySelector("[data-next-task]");
  }

  var focusedId = null;
  document.body.addEventListener("htmx:beforeSwap", function () {
    var active = document.activeElement;
    focusedId = active && active.id ? active.id : null;
  });

  // htmx fires afterSettle on every element it swapped in: out-of-band pieces (a summary, a
  // progress line) first, then the request's own target. Their words are gathered and said with
  // the target's; the focus follows the target only.
  var pending = [];
  document.body.addEventListener("htmx:afterSettle", function (event) {
    var settled = event.target;
    var wantedTarget = event.detail.target;
    var main = settled === wantedTarget || (wantedTarget && settled.id && settled.id === wantedTarget.id);
    if (!main) {
      if (settled.getAttribute && settled.getAttribute("data-announce")) pending.push(settled.getAttribute("data-announce"));
      return;
    }
    var target = settled;
    var titled = target.matches("[data-title]") ? target : target.querySelector("[data-title]");
    if (titled) document.title = titled.getAttribute("data-title");
    var spoken = [];
    if (target.getAttribute("data-announce")) spoken.push(target.getAttribute("data-announce"));
    target.querySelectorAll("[data-announce]").forEach(function (node) { spoken.push(node.getAttribute("data-announce")); });
    spoken = spoken.concat(pending);
    pending = [];
    if (spoken.length) announce(spoken.join(" "));
    // Focus where the work goes on, unless the person already moved it somewhere else. A poll
    // (hx-trigger "every …") never takes the focus: it refreshes what someone is only watching.
    var active = document.activeElement;
    if (active && active !== document.body && active.isConnected) return;
    if ((target.getAttribute("hx-trigger") || "").indexOf("every") !== -1) {
      var kept = focusedId && document.getElementById(focusedId);
      if (kept) kept.focus();
      return;
    }
    var wanted = null;
    if (target.classList.contains("ballot-row")) wanted = nextBallotRow(target);
    wanted = wanted || target.querySelector("[aria-invalid=true]") || target.querySelector("[data-autofocus]");
    wanted = wanted || (focusedId && document.getElementById(focusedId));
    if (!wanted) wanted = focusable(target);
    if (wanted) wanted.focus();
  });

  // A page that opens on a result or a question (a confirmation, an import's outcome) starts there.
  var opening = document.querySelector("main [data-autofocus]");
  if (opening && (!document.activeElement || document.activeElement === document.body) && !document.querySelector("[autofocus]")) {
    focusable(opening).focus();
  }

  // --- Keyboard shortcuts ----------------------------------------------------------------------
  // Single keys act only while shortcuts are on (the `?` overlay switches them), never while
  // typing, and never while a link has the focus: a key pressed on "Skip" must not label the item.
  var STORE = "keys-off";
  function keysOn() {
    try { return window.localStorage.getItem(STORE) !== "1"; } catch (e) { return true; }
  }

  function currentRow() {
    var active = document.activeElement;
    var row = active && active.closest ? active.closest("[data-key-row]") : null;
    return row || null;
  }

  function moveRow(step) {
    var rows = Array.prototype.slice.call(document.querySelectorAll("[data-key-row]"));
    if (!rows.length) return;
    var index = rows.indexOf(currentRow());
    var next = rows[Math.min(rows.length - 1, Math.max(0, index + step))] || rows[0];
    var button = next.querySelector("button");
    if (button) button.focus();
  }

  function busy() {
    return document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling");
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
    var target = event.target;
    if (target.closest("textarea, input, select, [contenteditable], dialog")) return;
    if (event.key === "?") { event.preventDefault(); openHelp(); return; }
    if (!keysOn() || busy()) return;
    var focusedLink = target.closest("a[href]");
    if (focusedLink) {
      // A link's own key still works on it (`t` on "Next task", where a ballot leaves the focus);
      // any other single key does nothing there.
      var own = focusedLink.getAttribute("data-key");
      if (own && own === (event.key.length === 1 ? event.key.toLowerCase() : event.key)) {
        event.preventDefault();
        focusedLink.click();
      }
      return;
    }
    if (event.key === "ArrowDown" && document.querySelector("[data-key-row]")) { event.preventDefault(); moveRow(1); return; }
    if (event.key === "ArrowUp" && document.querySelector("[data-key-row]")) { event.preventDefault(); moveRow(-1); return; }
    var key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    var selector = '[data-key="' + key + '"]';
    var row = currentRow();
    var control = (row && row.querySelector(selector)) || document.querySelector("main " + selector + ":not([data-key-row] *)");
    if (!control && !row) {
      // No criterion has the focus: the key answers the first one still open.
      var open = Array.prototype.filter.call(document.querySelectorAll("main [data-key-row]"), function (r) {
        return !answered(r);
      })[0];
      control = open ? open.querySelector(selector) : null;
    }
    if (!control) return;
    event.preventDefault();
    if (control.tagName === "DETAILS") {
      control.open = true;
      var first = control.querySelector("input, select, textarea, button");
      if (first) first.focus();
    } else {
      control.click();
    }
  });

  // --- The `?` overlay: the keys of this page ---------------------------------------------------
  function describe(node) {
    return node.getAttribute("data-key-label") || node.getAttribute("aria-label") || node.textContent.trim();
  }

  function openHelp() {
    var dialog = document.getElementById("key-help");
    if (!dialog) return;
    var list = dialog.querySelector("dl");
    list.textContent = "";
    var seen = {};
    var rows = [["?", "Show this list of keys"]];
    if (document.querySelector("[data-key-row]")) rows.push(["↓ / ↑", "Next / previous criterion"]);
    document.querySelectorAll("main [data-key]").forEach(function (node) {
      var key = node.getAttribute("data-key");
      if (seen[key]) return;
      seen[key] = true;
      var shown = { ArrowRight: "→", ArrowLeft: "←" }[key] || key;
      rows.push([shown, describe(node).replace(/\s+/g, " ")]);
    });
    rows.forEach(function (row) {
      var dt = document.createElement("dt"), dd = document.createElement("dd"), kbd = document.createElement("kbd");
      kbd.textContent = row[0];
      dt.appendChild(kbd);
      dd.textContent = row[1];
      list.appendChild(dt);
      list.appendChild(dd);
    });
    var toggle = dialog.querySelector("#keys-enabled");
    toggle.checked = keysOn();
    dialog.showModal();
  }

  var help = document.getElementById("key-help");
  if (help) {
    help.querySelector("#keys-enabled").addEventListener("change", function (event) {
      try { window.localStorage.setItem(STORE, event.target.checked ? "0" : "1"); } catch (e) { /* private mode */ }
    });
  }
  document.addEventListener("click", function (event) {
    if (event.target.closest("[data-open-key-help]")) { event.preventDefault(); openHelp(); }
  });

  // --- Drafts kept on the server ----------------------------------------------------------------
  // A field with data-draft="KEY" is saved a moment after each change. While the session has
  // ended, the unsaved text is held in this browser and sent again once the person is back.
  var body = document.body;
  var draftUrl = body.getAttribute("data-draft-url");
  var who = body.getAttribute("data-user") || "";
  var timers = {};
  var saved = {};

  function csrf() {
    try { return JSON.parse(body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; } catch (e) { return ""; }
  }

  function localKey(key) { return "draft:" + who + ":" + key; }

  function statusOf(field) {
    var id = field.getAttribute("data-draft-status");
    return id ? document.getElementById(id) : null;
  }

  function setStatus(field, text, failed) {
    var status = statusOf(field);
    if (!status) return;
    status.textContent = text;
    status.classList.toggle("failed", !!failed);
  }

  function saveDraft(field) {
    var key = field.getAttribute("data-draft"), text = field.value;
    if (!draftUrl || saved[key] === text) return;
    try { window.localStorage.setItem(localKey(key), text); } catch (e) { /* private mode */ }
    var data = new FormData();
    data.append("key", key);
    data.append("text", text);
    fetch(draftUrl, { method: "POST", body: data, credentials: "same-origin", headers: { "X-CSRFToken": csrf(), "Accept": "application/json" }, redirect: "manual" })
      .then(function (response) {
        // A refusal (too long, too many drafts) says why; the text stays in this browser.
        if (response.status === 400) return response.json().then(function (answer) { throw new Error(answer.error); });
        if (!response.ok) throw new Error("");
        return response.json();
      })
      .then(function (answer) {
        if (field.value === text) {
          saved[key] = text;
          try { window.localStorage.removeItem(localKey(key)); } catch (e) { /* private mode */ }
        }
        setStatus(field, "Draft saved " + answer.saved + ".", false);
      })
      .catch(function (error) {
        setStatus(field, error && error.message ? "Not saved: " + error.message : "Not saved: you may be signed out. The text is kept in this browser; log in again and it comes back.", true);
      });
  }

  function watch(field) {
    if (field.getAttribute("data-draft-watched")) return;
    field.setAttribute("data-draft-watched", "1");
    var key = field.getAttribute("data-draft");
    saved[key] = field.value;
    var held = null;
    try { held = window.localStorage.getItem(localKey(key)); } catch (e) { /* private mode */ }
    if (held !== null && held !== field.value && !field.hasAttribute("data-draft-submitted")) {
      // Typed while signed out: put it back and send it now.
      field.value = held;
      setStatus(field, "Restored text that was not yet saved.", false);
      saveDraft(field);
    } else if (held !== null) {
      try { window.localStorage.removeItem(localKey(key)); } catch (e) { /* private mode */ }
    }
  }

  function watchAll(root) {
    (root.querySelectorAll ? root : document).querySelectorAll("[data-draft]").forEach(watch);
  }
  watchAll(document);
  body.addEventListener("htmx:afterSettle", function (event) { watchAll(event.detail.target || document); });

  document.addEventListener("input", function (event) {
    var field = event.target;
    if (field.matches && field.matches("[data-draft]")) {
      var key = field.getAttribute("data-draft");
      window.clearTimeout(timers[key]);
      setStatus(field, "Saving…", false);
      timers[key] = window.setTimeout(function () { saveDraft(field); }, 700);
    }
    var form = field.form || (field.closest && field.closest("form"));
    if (form && form.hasAttribute("data-warn-unsaved")) form.setAttribute("data-dirty", "1");
  });

  // --- Warn before leaving text that is not saved -----------------------------------------------
  var leaving = false;
  document.addEventListener("submit", function (event) {
    leaving = true;
    event.target.removeAttribute("data-dirty");
    window.setTimeout(function () { leaving = false; }, 1000);
  });

  function unsaved() {
    var pending = false;
    document.querySelectorAll("[data-draft]").forEach(function (field) {
      if (saved[field.getAttribute("data-draft")] !== field.value) pending = true;
    });
    return pending || !!document.querySelector("form[data-dirty]");
  }

  window.addEventListener("beforeunload", function (event) {
    if (leaving || !unsaved()) return;
    event.preventDefault();
    event.returnValue = "";
  });
})();
