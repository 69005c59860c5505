// The run players of the course (docs/course/players/*.html, written by docs-gen) share this
// script. It reads the picture the page holds: each bar's data-first/data-last steps and
// data-x/data-w extent, each mark's data-show step, each step's place (data-step-x), and
// draws one frame per event. Tools/docs-site/check.py drives it in Chromium.
(function () {
  var svg = document.getElementById("orderly-picture");
  var stepX = svg.getAttribute("data-step-x").split(" ").map(Number);
  var last = stepX.length;
  var top = Number(svg.getAttribute("data-top"));
  var rowHeight = Number(svg.getAttribute("data-row-height"));
  var bars = svg.querySelectorAll("[data-first]");
  var marks = svg.querySelectorAll("[data-show]");
  var highlight = document.getElementById("orderly-current-row");
  var lines = document.querySelectorAll("#log li");
  var slider = document.getElementById("slider");
  var position = document.getElementById("position");
  var play = document.getElementById("play");
  var back = document.getElementById("back");
  var step = document.getElementById("step");
  var current = 1;
  var timer = null;

  // Opened from a clone, the lesson link would show its Markdown as raw text: go back to the
  // page the learner came from (the lesson, read on the repository's web page or in a viewer),
  // or, for a player opened on its own, say which file the lesson is.
  var lessonLink = document.getElementById("lesson-link");
  var lessonNote = document.getElementById("lesson-note");
  if (lessonLink && location.protocol === "file:") {
    lessonLink.addEventListener("click", function (event) {
      event.preventDefault();
      if (history.length > 1) { history.back(); return; }
      if (lessonNote) { lessonNote.hidden = false; }
    });
  }

  function show(frame) {
    current = Math.max(1, Math.min(last, frame));
    var x = stepX[current - 1];
    bars.forEach(function (bar) {
      var first = Number(bar.getAttribute("data-first"));
      var end = Number(bar.getAttribute("data-last"));
      var width = Number(bar.getAttribute("data-w"));
      if (current < first) { bar.setAttribute("visibility", "hidden"); return; }
      bar.removeAttribute("visibility");
      var reached = x - Number(bar.getAttribute("data-x"));
      var drawn = current >= end ? width : Math.max(3, Math.min(width, reached));
      bar.setAttribute("width", String(drawn));
      // A job that has not ended is running: its outcome's colour comes when it ends.
      if (bar.hasAttribute("data-fill")) {
        var fill = current >= end ? "data-fill" : "data-running-fill";
        bar.setAttribute("fill", bar.getAttribute(fill));
      }
    });
    marks.forEach(function (mark) {
      if (current >= Number(mark.getAttribute("data-show"))) mark.removeAttribute("visibility");
      else mark.setAttribute("visibility", "hidden");
    });
    lines.forEach(function (line, index) {
      line.classList.toggle("done", index < current);
      line.classList.toggle("current", index === current - 1);
      if (index === current - 1) line.setAttribute("aria-current", "step");
      else line.removeAttribute("aria-current");
    });
    var row = Number(lines[current - 1].getAttribute("data-row"));
    if (row >= 0) {
      highlight.setAttribute("y", String(top + row * rowHeight));
      highlight.removeAttribute("visibility");
    } else {
      highlight.setAttribute("visibility", "hidden");
    }
    slider.value = String(current);
    position.textContent = "event " + current + " of " + last;
    back.disabled = current === 1;
    step.disabled = current === last;
    if (current === last) stop();
  }
  function stop() {
    if (timer !== null) { clearInterval(timer); timer = null; }
    play.textContent = "Play";
    play.setAttribute("aria-pressed", "false");
  }
  function start() {
    if (current === last) show(1);
    play.textContent = "Pause";
    play.setAttribute("aria-pressed", "true");
    timer = setInterval(function () { show(current + 1); }, 700);
  }
  play.addEventListener("click", function () { if (timer === null) start(); else stop(); });
  back.addEventListener("click", function () { stop(); show(current - 1); });
  step.addEventListener("click", function () { stop(); show(current + 1); });
  slider.addEventListener("input", function () { stop(); show(Number(slider.value)); });
  document.addEventListener("keydown", function (event) {
    if (event.target === slider && event.key !== " ") return;
    var keys = { ArrowRight: current + 1, ArrowLeft: current - 1, Home: 1, End: last };
    if (event.key in keys) {
      event.preventDefault();
      stop();
      show(keys[event.key]);
    } else if (event.key === " " && event.target.tagName !== "BUTTON") {
      event.preventDefault();
      if (timer === null) start(); else stop();
    }
  });
  show(1);
})();
