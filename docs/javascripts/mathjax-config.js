// MathJax 3, served from the site itself (docs/gen_pages.py copies it into mathjax/): only
// the equations that pymdownx.arithmatex marked are typeset, as SVG (no font files), when
// the page loads (the site does not use Material's instant navigation, so once is enough).
window.MathJax = {
  tex: {inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]],
        processEscapes: true, processEnvironments: true},
  options: {ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex"},
  svg: {fontCache: "global"}
};
