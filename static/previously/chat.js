// The chat page's little JavaScript (no inline script: a CSP with nonces comes later).
// Sends go through htmx's websocket extension (ws-send); this file only adds the message id,
// the local clock, Enter-to-send, an optimistic line, and keeps the list scrolled.
(function () {
  "use strict";

  function newMid() {
    // SPEC A2: the browser makes the user message id, c_<16 hex>.
    var bytes = new Uint8Array(8);
    crypto.getRandomValues(bytes);
    return "c_" + Array.from(bytes, function (b) { return b.toString(16).padStart(2, "0"); }).join("");
  }

  function localIso(d) {
    // ISO 8601 local time with the UTC offset, e.g. 2026-03-02T21:15:04+08:00 (SPEC R7).
    function pad(n) { return String(n).padStart(2, "0"); }
    var off = -d.getTimezoneOffset();
    var sign = off >= 0 ? "+" : "-";
    off = Math.abs(off);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) +
      "T" + pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) +
      sign + pad(Math.floor(off / 60)) + ":" + pad(off % 60);
  }

  // P5: while the page is off the record its lines go to their own list, never #messages.
  function offRecord() { return document.querySelector("#off-record.on"); }
  function messages() { return document.getElementById(offRecord() ? "off-messages" : "messages"); }

  function nearBottom(el) { return el.scrollHeight - el.scrollTop - el.clientHeight < 120; }

  function scrollDown(force) {
    var el = messages();
    if (el && (force || nearBottom(el))) { el.scrollTop = el.scrollHeight; }
  }

  function pendingLine(mid, text) {
    // Shown at once; the server's rendering of the archived line replaces it by id.
    var article = document.createElement("article");
    article.id = "msg-" + mid;
    article.className = "msg user pending";
    var bubble = document.createElement("div");
    bubble.className = "bubble";
    var content = document.createElement("div");
    content.className = "content";
    content.textContent = text;  // never innerHTML: user text is data
    bubble.appendChild(content);
    article.appendChild(bubble);
    return article;
  }

  // Issue 25 point 1: a reply is streaming (or a line already waits behind it), so a line sent
  // now waits; the server answers it when the reply ends, in order. Send says so meanwhile.
  function replyUnderWay() {
    var list = messages();
    return !!(list && list.querySelector(".msg.streaming, .msg.user.queued"));
  }

  function syncWaiting() {
    var form = document.getElementById("composer");
    if (!form) { return; }
    var waiting = replyUnderWay();
    form.classList.toggle("waiting", waiting);
    var button = form.querySelector(".send-button");
    var later = form.querySelector(".send-later");
    if (button && later) {
      if (waiting) { button.setAttribute("aria-label", later.textContent); } else { button.removeAttribute("aria-label"); }
    }
    // Waiting lines stay at the end of the list, after the reply that streams before them.
    var list = messages();
    if (list) {
      list.querySelectorAll(".msg.user.queued").forEach(function (line) {
        var next = line.nextElementSibling;
        if (next && !next.classList.contains("queued")) { list.appendChild(line); }
      });
    }
  }
  document.addEventListener("htmx:wsAfterMessage", syncWaiting);
  document.addEventListener("htmx:oobAfterSwap", syncWaiting);
  if (document.readyState !== "loading") { syncWaiting(); } else { document.addEventListener("DOMContentLoaded", syncWaiting); }

  document.addEventListener("htmx:wsConfigSend", function (evt) {
    var form = evt.target.closest ? evt.target.closest("form") : null;
    if (!form || form.id !== "composer") { return; }
    var params = evt.detail.parameters;
    var text = (params.text || "").trim() ? params.text : "";
    if (!text) { evt.preventDefault(); return; }
    var mid = newMid();
    params.mid = mid;
    if (offRecord()) {
      params.action = "off_send";  // said off the record: the server keeps it nowhere (P5)
      delete form.dataset.edits;
      form.classList.remove("editing");
    } else if (form.dataset.edits) {
      // U2: edit and resend — the edited text is a new line; the server hides the old one.
      params.action = "edit";
      params.edits = form.dataset.edits;
      delete form.dataset.edits;
      form.classList.remove("editing");
    }
    params.local_time = localIso(new Date());
    params.tz = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    var line = pendingLine(mid, text);
    if (replyUnderWay()) {
      line.classList.add("queued");
      var note = document.createElement("p");
      note.className = "queued-note";
      note.setAttribute("role", "status");
      note.textContent = form.dataset.queuedNote || "";
      line.querySelector(".bubble").appendChild(note);
    }
    messages().appendChild(line);
    form.reset();
    syncWaiting();
    scrollDown(true);
  });

  document.addEventListener("keydown", function (evt) {
    var el = evt.target;
    if (el.id !== "composer-text" || evt.key !== "Enter") { return; }
    if (evt.shiftKey || evt.isComposing || evt.keyCode === 229) { return; }  // newline / IME
    evt.preventDefault();
    if (el.value.trim()) { el.form.requestSubmit(); }
  });

  // A line whose target is not on the page (another tab, a resend after a reconnect): append it.
  document.body.addEventListener("htmx:oobErrorNoTarget", function (evt) {
    var el = evt.detail.content;
    if (!el || !el.id || el.id.indexOf("msg-") !== 0 || document.getElementById(el.id)) { return; }
    messages().appendChild(el);
    htmx.process(el);
    scrollDown(false);
  });

  // P5: the socket closed (a dropped connection, a server restart) while off the record: the
  // conversation lived on that socket only, so it ended; the page says so (in its language).
  function endOffRecordHere() {
    var region = offRecord();
    if (!region) { return; }
    var said = region.dataset.lost || "";
    region.classList.remove("on");
    region.textContent = "";
    var box = document.getElementById("notices");
    if (box && said) {
      var p = document.createElement("p");
      p.className = "notice info";
      p.setAttribute("role", "alert");
      p.textContent = said;
      box.appendChild(p);
    }
  }
  document.addEventListener("htmx:wsClose", endOffRecordHere);
  // Once it has begun, its explanation folds away and the composer is ready.
  document.addEventListener("htmx:wsAfterMessage", function () {
    var start = document.getElementById("off-start");
    if (offRecord() && start && start.open) {
      start.open = false;
      var box = document.getElementById("composer-text");
      if (box) { box.focus(); }
    }
  });

  // On every (re)connect — after a network blip, a server restart or a Redis restart — ask for
  // the lines archived after the last one shown; they swap in by id (never doubled).
  var socket = null;  // the open socket's wrapper, for the typing signal below
  document.addEventListener("htmx:wsOpen", function (evt) {
    socket = evt.detail && evt.detail.socketWrapper;
    endOffRecordHere();  // a reconnect: the server holds no off-the-record conversation any more
    var shown = document.querySelectorAll("#messages article[data-mid]");
    var last = shown.length ? shown[shown.length - 1].getAttribute("data-mid") : "";
    if (!last || !evt.detail || !evt.detail.socketWrapper) { return; }
    evt.detail.socketWrapper.send(JSON.stringify({ action: "resync", after: last }));
  });

  // Issue 26: keystrokes tell the server a line is coming (at most one frame every 2 s), so
  // background model work — a welcome-back being written — gives way while the person types;
  // a local model reads that prompt then, not after Send.
  var typingSent = 0;
  document.addEventListener("input", function (evt) {
    if (!socket || !evt.target || evt.target.id !== "composer-text") { return; }
    var now = Date.now();
    if (now - typingSent < 2000) { return; }
    typingSent = now;
    socket.send(JSON.stringify({ action: "typing" }));
  });

  // --- Image messages (SPEC A7): button, paste or drop → a multipart POST (htmx, CSRF header
  // from <body hx-headers>) → the archived line comes back → the socket is asked for the reply.
  function notice(text) {
    var box = document.getElementById("notices");
    if (!box) { return; }
    var p = document.createElement("p");
    p.className = "notice error";
    p.setAttribute("role", "alert");
    p.textContent = text;
    box.appendChild(p);
  }

  function sendImage(file) {
    var form = document.getElementById("image-form");
    if (!form || !file) { return; }
    var max = parseInt(form.dataset.maxBytes || "0", 10);
    if (max && file.size > max) {
      // The sentence comes translated from the page (chat.html's data-too-large).
      notice((form.dataset.tooLarge || "").replace("{limit}", String(Math.round(max / 1048576))));
      return;
    }
    var input = document.getElementById("image-input");
    if (input.files[0] !== file) {
      var dt = new DataTransfer();
      dt.items.add(file);
      input.files = dt.files;
    }
    var composer = document.getElementById("composer-text");
    form.elements.mid.value = newMid();
    form.elements.text.value = composer ? composer.value : "";
    form.elements.local_time.value = localIso(new Date());
    form.elements.tz.value = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    form.requestSubmit();
  }

  function imageIn(list) {
    for (var i = 0; list && i < list.length; i++) {
      if (list[i].type && list[i].type.indexOf("image/") === 0) { return list[i]; }
    }
    return null;
  }

  document.addEventListener("change", function (evt) {
    if (evt.target.id === "image-input" && evt.target.files.length) { sendImage(evt.target.files[0]); }
  });

  document.addEventListener("paste", function (evt) {
    if (!evt.target.closest || !evt.target.closest("#composer")) { return; }
    var file = imageIn(evt.clipboardData && evt.clipboardData.files);
    if (file) { evt.preventDefault(); sendImage(file); }
  });

  document.addEventListener("dragover", function (evt) {
    if (evt.target.closest && evt.target.closest(".chat")) { evt.preventDefault(); }
  });

  document.addEventListener("drop", function (evt) {
    if (!evt.target.closest || !evt.target.closest(".chat")) { return; }
    var file = imageIn(evt.dataTransfer && evt.dataTransfer.files);
    if (file) { evt.preventDefault(); sendImage(file); }
  });

  document.addEventListener("htmx:afterRequest", function (evt) {
    var form = evt.detail.elt;
    if (!form || form.id !== "image-form") { return; }
    var xhr = evt.detail.xhr;
    if (evt.detail.successful) {
      var reply = document.getElementById("image-reply");
      reply.elements.mid.value = xhr.getResponseHeader("X-Message-Mid") || form.elements.mid.value;
      reply.elements.local_time.value = form.elements.local_time.value;
      var composer = document.getElementById("composer-text");
      if (composer) { composer.value = ""; }
      reply.requestSubmit();
      scrollDown(true);
    } else if (xhr) {
      notice(xhr.responseText || (form.dataset.uploadFailed || "").replace("{status}", String(xhr.status)));
    }
    form.elements.image.value = "";
  });

  document.addEventListener("htmx:wsAfterMessage", function () { scrollDown(false); });
  document.addEventListener("DOMContentLoaded", function () { scrollDown(true); });
  if (document.readyState !== "loading") { scrollDown(true); }
  // C2: favourite the words selected in a line. The selection is remembered as it is made
  // (a click on the button may collapse it) and put into the form's excerpt on submit.
  var picked = null;
  document.addEventListener("selectionchange", function () {
    var sel = window.getSelection();
    if (!sel || sel.isCollapsed || !sel.rangeCount) { return; }
    var node = sel.getRangeAt(0).commonAncestorContainer;
    var el = node.nodeType === 1 ? node : node.parentElement;
    var content = el && el.closest(".msg .content");
    var article = content && content.closest("article.msg");
    if (article) { picked = { mid: article.dataset.mid, text: sel.toString().trim() }; }
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.classList || !form.classList.contains("fav-form")) { return; }
    var article = form.closest("article.msg");
    var input = form.querySelector(".fav-excerpt");
    if (input) { input.value = picked && article && picked.mid === article.dataset.mid ? picked.text : ""; }
    picked = null;
  }, true);
})();

// --- Issue 17: stop (U2), code-block copy buttons (U1), a refused line back in the composer (S3).
(function () {
  "use strict";

  function chat() { return document.querySelector(".chat"); }

  // Esc stops the reply that is streaming (the same frame as its Stop button).
  document.addEventListener("keydown", function (evt) {
    if (evt.key !== "Escape" || evt.isComposing) { return; }
    var form = document.querySelector(".msg.streaming form.stop");
    if (form) { evt.preventDefault(); form.requestSubmit(); }
  });

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) { return navigator.clipboard.writeText(text); }
    // http on a LAN address: the old way, through a hidden textarea.
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.appendChild(area);
    area.select();
    try { document.execCommand("copy"); } finally { area.remove(); }
    return Promise.resolve();
  }

  // Every fenced code block of a rendered reply gets a copy button (labels from the page).
  function addCopyButtons(root) {
    var section = chat();
    if (!section || !root || !root.querySelectorAll) { return; }
    root.querySelectorAll(".content.md pre").forEach(function (pre) {
      if (pre.parentElement.classList.contains("code-block")) { return; }
      var wrap = document.createElement("div");
      wrap.className = "code-block";
      pre.parentNode.insertBefore(wrap, pre);
      wrap.appendChild(pre);
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy-code secondary";
      button.textContent = section.dataset.copy || "Copy";
      wrap.appendChild(button);
    });
  }

  // Copy a whole line (U3); edit and resend the last line of the person (U2).
  document.addEventListener("click", function (evt) {
    var tool = evt.target.closest ? evt.target.closest(".copy-line, .edit-line") : null;
    if (!tool) { return; }
    var article = tool.closest("article.msg");
    var content = article && article.querySelector(".content");
    if (!content) { return; }
    if (tool.classList.contains("copy-line")) {
      copyText(content.innerText).then(function () {
        var section = chat();
        var label = tool.textContent;
        tool.textContent = (section && section.dataset.copied) || "Copied";
        setTimeout(function () { tool.textContent = label; }, 1500);
      });
      return;
    }
    var form = document.getElementById("composer");
    var box = document.getElementById("composer-text");
    form.dataset.edits = tool.dataset.mid;
    form.classList.add("editing");
    box.value = content.textContent;
    box.focus();
  });

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest ? evt.target.closest(".copy-code") : null;
    if (!button) { return; }
    var pre = button.parentElement.querySelector("pre");
    copyText(pre ? pre.textContent : "").then(function () {
      var section = chat();
      button.textContent = (section && section.dataset.copied) || "Copied";
      button.classList.add("done");
      setTimeout(function () {
        button.textContent = (section && section.dataset.copy) || "Copy";
        button.classList.remove("done");
      }, 1500);
    });
  });

  document.addEventListener("htmx:oobAfterSwap", function (evt) {
    var target = evt.detail && evt.detail.target;
    if (!target) { return; }
    if (target.id === "composer-restore") {
      var holder = target.querySelector("template[data-text]");
      var composer = document.getElementById("composer-text");
      if (holder && composer) {
        // Never dropped: the refused line goes back before whatever was typed since.
        composer.value = composer.value ? holder.dataset.text + "\n" + composer.value : holder.dataset.text;
        composer.focus();
      }
      target.textContent = "";
      return;
    }
    addCopyButtons(target.parentNode || document);
  });
  document.addEventListener("htmx:wsAfterMessage", function () { addCopyButtons(document); });
  document.addEventListener("htmx:afterSwap", function (evt) { addCopyButtons(evt.detail.target); });
  if (document.readyState !== "loading") { addCopyButtons(document); }
  document.addEventListener("DOMContentLoaded", function () { addCopyButtons(document); });
})();

// --- Issue 17 point 5: the line menu (favourite whole or selected part, hide, delete for good
// through the archive's confirmation). It is a <details>: pointer and keyboard open it natively;
// a long press on a touch screen opens it too.
(function () {
  "use strict";

  var press = null;

  function menuOf(el) {
    var article = el && el.closest ? el.closest("article.msg") : null;
    return article ? article.querySelector("details.line-menu") : null;
  }

  document.addEventListener("touchstart", function (evt) {
    var menu = menuOf(evt.target);
    if (!menu || evt.target.closest("button, a, input, summary, textarea")) { return; }
    press = setTimeout(function () {
      menu.open = true;
      var summary = menu.querySelector("summary");
      if (summary) { summary.focus(); }
      press = null;
    }, 550);
  }, { passive: true });

  function cancelPress() { if (press) { clearTimeout(press); press = null; } }
  document.addEventListener("touchend", cancelPress, { passive: true });
  document.addEventListener("touchmove", cancelPress, { passive: true });
  document.addEventListener("touchcancel", cancelPress, { passive: true });

  function articleFor(mid) { return mid ? document.getElementById("msg-" + mid) : null; }

  document.body.addEventListener("message-hidden", function (evt) {
    var article = articleFor(evt.detail && evt.detail.mid);
    if (article) { article.classList.add("hidden"); }
  });
  document.body.addEventListener("message-unhidden", function (evt) {
    var article = articleFor(evt.detail && evt.detail.mid);
    if (article) { article.classList.remove("hidden"); }
  });
  document.body.addEventListener("message-deleted", function (evt) {
    var article = articleFor(evt.detail && evt.detail.mid);
    if (article && evt.detail.status !== "refused") {
      var content = article.querySelector(".content");
      if (content) { content.textContent = ""; }
      article.classList.add("deleted");
    }
  });
})();

// --- Issue 17 point 7: conversations at hand. The list is open beside the chat on wide screens
// (closed on phones); a past conversation opens in place (htmx into #past) and "Back to now"
// (or sending a line) returns to the live one. The item on view is marked aria-current.
(function () {
  "use strict";

  var WIDE = "(min-width: 48rem)";

  function past() { return document.getElementById("past"); }
  function panel() { return document.getElementById("conversations"); }

  function mark(key) {
    var links = document.querySelectorAll("#conversation-list .conversation > a");
    for (var i = 0; i < links.length; i++) {
      var item = links[i].parentElement;
      if (key && item.dataset.key === key) { links[i].setAttribute("aria-current", "true"); }
      else { links[i].removeAttribute("aria-current"); }
    }
  }

  function nowKey() {
    var list = document.getElementById("conversation-list");
    return list ? list.dataset.now || "" : "";
  }

  function shownKey() {
    var view = document.querySelector("#past > .past-view");
    return view ? view.dataset.key : nowKey();
  }

  function closeOnPhone() {
    var details = panel();
    if (details && !window.matchMedia(WIDE).matches) { details.open = false; }
  }

  function backToNow(focusComposer) {
    var box = past();
    if (box) { box.textContent = ""; }
    // A page opened on a past conversation (?conversation=) reloads as now from here on.
    if (window.history && window.history.replaceState && /[?&]conversation=/.test(window.location.search)) {
      var params = new URLSearchParams(window.location.search);
      params.delete("conversation");
      var query = params.toString();
      window.history.replaceState(null, "", window.location.pathname + (query ? "?" + query : ""));
    }
    mark(nowKey());
    closeOnPhone();
    var list = document.getElementById("messages");
    if (list) { list.scrollTop = list.scrollHeight; }
    if (focusComposer) {
      var composer = document.getElementById("composer-text");
      if (composer) { composer.focus(); }
    }
  }

  function init() {
    var details = panel();
    if (details && window.matchMedia && window.matchMedia(WIDE).matches) { details.open = true; }
  }
  if (document.readyState !== "loading") { init(); } else { document.addEventListener("DOMContentLoaded", init); }

  document.addEventListener("click", function (evt) {
    var link = evt.target.closest ? evt.target.closest(".chat-layout a.back-to-now") : null;
    if (!link || evt.ctrlKey || evt.metaKey || evt.shiftKey || evt.button !== 0) { return; }
    evt.preventDefault();
    backToNow(true);
  });

  document.addEventListener("htmx:afterSwap", function (evt) {
    var target = evt.detail && evt.detail.target;
    if (!target) { return; }
    if (target.id === "past") {
      mark(shownKey());
      closeOnPhone();
      target.scrollTop = 0;
      var title = target.querySelector(".past-title");
      if (title) { title.focus({ preventScroll: true }); }
    } else if (target.closest && target.closest("#conversation-list")) {
      mark(shownKey());
    }
  });
  // "More conversations" swaps its own <li> (outerHTML): the new items are marked after.
  document.addEventListener("htmx:afterSettle", function (evt) {
    var target = evt.detail && evt.detail.target;
    if (target && !document.body.contains(target)) { mark(shownKey()); }
  });

  // The list follows the chat: a reply finished or a new conversation started, it is asked
  // for again (its first page; the open conversation is "now").
  var refreshTimer = null;
  function refreshList() {
    var list = document.getElementById("conversation-list");
    if (!list || !list.dataset.src || !window.htmx) { return; }
    htmx.ajax("GET", list.dataset.src, { target: list, swap: "innerHTML" }).then(function () {
      var now = list.querySelector("li.conversation.now");
      list.dataset.now = now ? now.dataset.key : "";
      mark(shownKey());
    });
  }
  function refreshSoon() {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refreshList, 1500);
  }
  document.addEventListener("htmx:wsAfterMessage", refreshSoon);  // every frame: settles after the last
  document.addEventListener("htmx:afterRequest", function (evt) {
    var elt = evt.detail && evt.detail.elt;
    if (elt && elt.closest && elt.closest(".chat-bar") && evt.detail.successful) { refreshSoon(); }
  });

  // A line sent while a past conversation is on view goes to now, and so does the view.
  document.addEventListener("htmx:wsConfigSend", function (evt) {
    var form = evt.target.closest ? evt.target.closest("form") : null;
    if (form && form.id === "composer" && !evt.defaultPrevented && document.querySelector("#past > .past-view")) {
      backToNow(false);
    }
  });
})();
