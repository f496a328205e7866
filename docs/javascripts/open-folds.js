// A link to something inside a folded block (a line of the page's folded source, from the
// pseudocode or the implementation details) opens the folds around it first, so that the
// browser can scroll to it: on a click, and on arriving at the page with its #anchor.
(function () {
  function target(hash) {
    if (!hash || hash.length < 2) return null;
    try { return document.getElementById(decodeURIComponent(hash.slice(1))); } catch (e) { return null; }
  }
  function openAround(element) {
    for (let node = element; node; node = node.parentElement)
      if (node.tagName === "DETAILS" && !node.open) node.open = true;
  }
  document.addEventListener("click", function (event) {
    const link = event.target.closest && event.target.closest('a[href^="#"]');
    const found = link && target(link.getAttribute("href"));
    if (found && found.closest("details")) {
      openAround(found);
      if (location.hash === link.getAttribute("href")) {  // no hashchange: scroll by hand
        event.preventDefault();
        found.scrollIntoView();
      }
    }
  }, true);
  function arrive() {
    const found = target(location.hash);
    if (found && found.closest("details:not([open])")) {
      openAround(found);
      found.scrollIntoView();
    }
  }
  window.addEventListener("hashchange", arrive);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", arrive);
  else arrive();
})();
