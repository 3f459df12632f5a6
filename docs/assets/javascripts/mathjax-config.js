// MathJax 2 for every page of the site, read before MathJax.js loads (both are
// in mkdocs.yml's extra_javascript). The site serves MathJax itself
// (assets/mathjax/, copied from the package jupyter-server-mathjax by
// autograder/authoring/docs_hooks.py), so no page loads anything from another host.
// Math is looked for only where authors write it: the notebooks' markdown cells
// ($...$ and $$...$$, as Jupyter reads them) and pymdownx.arithmatex's spans on
// the markdown pages; code, outputs and the rest of the page are left alone.
window.MathJax = {
  config: ["TeX-AMS-MML_HTMLorMML-full.js"],
  MMLorHTML: { prefer: "HTML" },
  tex2jax: {
    inlineMath: [["$", "$"], ["\\(", "\\)"]],
    displayMath: [["$$", "$$"], ["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
    ignoreClass: "md-typeset",
    processClass: "arithmatex|jp-RenderedMarkdown",
  },
  // the package holds the STIX-Web web fonts only
  "HTML-CSS": { availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null },
  messageStyle: "none",
  showMathMenu: false,
};
