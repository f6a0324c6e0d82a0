/* Every page (issue 17): the light/dark theme (system preference, or the person's choice kept
   in localStorage) applied before the first paint; the phone menu; the companion and language
   menus acting on selection. Loaded from <head>, so the listeners are delegated. No inline
   script or style anywhere: the strict CSP stays as it is. */
(function () {
  "use strict";
  var root = document.documentElement;
  var KEY = "previously-theme";
  var media = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

  var unsaved = null; // the choice when storage is refused (private modes): this page only
  function stored() {
    try { return localStorage.getItem(KEY) || unsaved; } catch (e) { return unsaved; }
  }
  function effective() {
    var chosen = stored();
    if (chosen === "dark" || chosen === "light") return chosen;
    return media && media.matches ? "dark" : "light";
  }
  function apply() {
    var chosen = stored();
    if (chosen === "dark" || chosen === "light") root.setAttribute("data-theme", chosen);
    else root.removeAttribute("data-theme");
    var dark = effective() === "dark";
    var buttons = document.querySelectorAll(".theme-toggle");
    for (var i = 0; i < buttons.length; i++) {
      var b = buttons[i];
      b.setAttribute("aria-pressed", dark ? "true" : "false");
      var label = b.querySelector(".theme-label");
      // The label names what a press gives.
      if (label) label.textContent = dark ? b.getAttribute("data-light") : b.getAttribute("data-dark");
    }
  }

  root.classList.add("js");
  apply();
  if (media && media.addEventListener) media.addEventListener("change", apply);

  function setMenu(open) {
    var toggle = document.querySelector(".nav-toggle");
    if (!toggle) return;
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
    root.classList.toggle("menu-open", open);
  }

  document.addEventListener("DOMContentLoaded", apply);
  document.addEventListener("click", function (event) {
    var theme = event.target.closest(".theme-toggle");
    if (theme) {
      var next = effective() === "dark" ? "light" : "dark";
      // Choosing what the system gives anyway forgets the choice: the system leads again.
      var system = media && media.matches ? "dark" : "light";
      unsaved = next === system ? null : next;
      try {
        if (next === system) localStorage.removeItem(KEY); else localStorage.setItem(KEY, next);
      } catch (e) { /* kept in `unsaved` for this page */ }
      apply();
      return;
    }
    var toggle = event.target.closest(".nav-toggle");
    if (toggle) setMenu(toggle.getAttribute("aria-expanded") !== "true");
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && root.classList.contains("menu-open")) {
      setMenu(false);
      var toggle = document.querySelector(".nav-toggle");
      if (toggle) toggle.focus();
    }
  });
  document.addEventListener("change", function (event) {
    var select = event.target;
    if (!select.matches || !select.matches("select[data-autosubmit]")) return;
    var form = select.form;
    if (!form) return;
    if (form.requestSubmit) form.requestSubmit(); else form.submit();
  });
})();
