// MathJax 2 for the docs site and the feedback pages, read before MathJax.js
// loads. Both serve MathJax themselves (autograder/mathjax.py copies it from the
// package jupyter-server-mathjax: the site's assets/mathjax/, a feedback
// folder's mathjax/), so no page loads anything from another host.
// A feedback page loads it only for TeX that autograder/mathml.py could not
// convert to MathML. Math is looked for only where authors write it: the
// notebooks' markdown (class jp-RenderedMarkdown on the site and on the feedback
// pages, $...$ and $$...$$ as Jupyter reads them) and pymdownx.arithmatex's spans on the site's
// markdown pages; code, outputs, verdicts and the rest of a page (md-typeset on
// the site, grader-page on a feedback page) are left alone.
// A feedback page shows a student's notebook, whose markdown the student can
// edit: the Safe extension keeps TeX from adding links other than http(s) and
// mailto, classes, ids or styles beyond a few harmless ones.
window.MathJax = {
  // config/Safe.js adds the Safe extension once the configuration is read (an
  // extensions list here would be overwritten by the combined configuration's)
  config: ["TeX-AMS-MML_HTMLorMML-full.js", "Safe.js"],
  MMLorHTML: { prefer: "HTML" },
  tex2jax: {
    inlineMath: [["$", "$"], ["\\(", "\\)"]],
    displayMath: [["$$", "$$"], ["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
    ignoreClass: "md-typeset|grader-page",
    processClass: "arithmatex|jp-RenderedMarkdown",
  },
  // MathML already on a page (a feedback page's converted math, where some TeX
  // was left for MathJax) is the browser's to draw: the combined configuration's
  // MathML reader is given no <math> element to take.
  mml2jax: { Augment: { PushMathElements: function () {} } },
  // the package holds the STIX-Web web fonts only
  "HTML-CSS": { availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null },
  messageStyle: "none",
  showMathMenu: false,
  // In LaTeX, \text{min\_lr} prints min_lr: \_ is text mode's underscore. MathJax 2
  // takes a \text...{} argument literally and would show the backslash, so the
  // escapes LaTeX text needs (\_ \% \& \#) lose it inside those arguments first.
  AuthorInit: function () {
    MathJax.Hub.Register.StartupHook("TeX Jax Ready", function () {
      MathJax.InputJax.TeX.prefilterHooks.Add(function (data) {
        data.math = data.math.replace(/(\\(?:text[a-z]*|mbox)\s*\{)([^{}]*)\}/g, function (all, open, text) {
          return open + text.replace(/\\([_%&#])/g, "$1") + "}";
        });
      });
    });
  },
};
