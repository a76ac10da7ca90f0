// The page script of a lesson: unzip plotly.js and the lesson's data, then draw each block.
// Every verdict, finding, figure and right answer was computed when the lesson was built; this
// script only picks the state the controls name, draws what is stored and compares an answer
// with the stored marks. It makes no request.
(function () {
  "use strict";

  async function unpack(id) {
    const text = document.getElementById(id).textContent.trim();
    const raw = atob(text);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return await new Response(stream).text();
  }

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "html") node.innerHTML = v;
      else if (k === "text") node.textContent = v;
      else node.setAttribute(k, v);
    }
    for (const c of children || []) node.appendChild(c);
    return node;
  }

  let STORE = null;
  function figure(index) {
    const [layoutI, templateI, traces] = STORE.figures[index];
    const layout = Object.assign({}, STORE.pieces[layoutI]);
    if (templateI >= 0) layout.template = STORE.pieces[templateI];
    layout.autosize = true;
    delete layout.width;
    return { data: traces.map((i) => STORE.pieces[i]), layout: layout };
  }
  const CONFIG = { responsive: true, displaylogo: false };
  function draw(div, index, extraShapes) {
    const fig = figure(index);
    if (extraShapes) fig.layout.shapes = (fig.layout.shapes || []).concat(extraShapes);
    return Plotly.react(div, fig.data, fig.layout, CONFIG);
  }
  function cellShape(stage, step, colour) {
    return {
      type: "rect", name: "located", xref: "x", yref: "y",
      x0: step - 0.5, x1: step + 0.5, y0: stage - 0.5, y1: stage + 0.5,
      line: { color: colour, width: 4 },
    };
  }
  const pct = (x) => (100 * x).toFixed(1) + " %";

  // -- explore ------------------------------------------------------------------------------
  function explore(section, block) {
    const controls = el("div", { class: "controls" });
    const setup = el("select", { class: "setup", "aria-label": "schedule" });
    block.setups.forEach((s, i) => setup.appendChild(el("option", { value: String(i), text: s.label })));
    const spec = el("code", { class: "spec" });
    const slider = (name, values, start) => {
      const input = el("input", {
        type: "range", class: name, min: "0", max: String(values.length - 1), step: "1",
        value: String(values.indexOf(start)), "aria-label": name,
      });
      const out = el("output", { class: name + "-value" });
      controls.appendChild(el("label", {}, [document.createTextNode(name + " "), input, out]));
      return [input, out];
    };
    controls.appendChild(el("label", {}, [document.createTextNode("schedule "), setup]));
    const [stages, stagesOut] = slider("stages", block.stages, block.start[1]);
    const [mbs, mbsOut] = slider("micro-batches", block.microbatches, block.start[2]);
    section.appendChild(controls);
    section.appendChild(spec);
    const status = el("p", { class: "status", role: "status" });
    section.appendChild(status);
    const figs = {};
    for (const name of block.show) {
      if (name === "sizes") continue;
      figs[name] = el("div", { class: "figure " + name });
      section.appendChild(figs[name]);
    }
    const findings = el("ol", { class: "findings" });
    section.appendChild(el("h4", { text: "Findings (click one to locate it on the grid)" }));
    section.appendChild(findings);
    let sizes = null;
    if (block.show.includes("sizes")) {
      section.appendChild(el("h4", { text: "Every size at once (click a size to show it)" }));
      sizes = el("div", { class: "figure sizes" });
      section.appendChild(sizes);
    }

    function current() {
      return [Number(setup.value), block.stages[Number(stages.value)], block.microbatches[Number(mbs.value)]];
    }
    function locate(item, f) {
      findings.querySelectorAll("li").forEach((li) => li.classList.remove("selected"));
      item.classList.add("selected");
      if (figs.grid && f[1] >= 0 && f[2] >= 0) {
        const state = block.states[current().join("/")];
        draw(figs.grid, state.figs.grid, [cellShape(f[1], f[2], "#f5a623")]);
        figs.grid.dataset.located = f[1] + "/" + f[2];
        figs.grid.scrollIntoView({ block: "nearest" });
      }
    }
    // Controls can change faster than figures draw: only the latest change marks the block drawn.
    let latest = 0;
    async function update() {
      const token = ++latest;
      const [s, p, m] = current();
      stagesOut.textContent = String(p);
      mbsOut.textContent = String(m);
      spec.textContent = block.setups[s].spec;
      const state = block.states[s + "/" + p + "/" + m];
      section.dataset.state = s + "/" + p + "/" + m;
      findings.innerHTML = "";
      if (state.error) {
        status.textContent = p + " stages × " + m + " micro-batches: not a valid size here: " + state.error;
        status.className = "status refused";
        for (const div of Object.values(figs)) { Plotly.purge(div); div.innerHTML = ""; }
      } else {
        const n = state.findings.length + state.more;
        const bubble = state.bubble === null ? "no timeline (it deadlocks)" : "bubble " + pct(state.bubble) + " of the time, makespan " + state.makespan + " ticks";
        status.textContent = p + " stages × " + m + " micro-batches: " +
          (state.ok ? "clean, no findings" : n + " finding" + (n === 1 ? "" : "s")) + " · " + bubble +
          " · buffers per stage " + state.allocated.join(",") + " (needed " + state.needed.join(",") + ")";
        status.className = "status " + (state.ok ? "ok" : "bad");
        state.findings.forEach((f) => {
          const li = el("li", { text: f[0], tabindex: "0" });
          li.addEventListener("click", () => locate(li, f));
          findings.appendChild(li);
        });
        if (state.more) findings.appendChild(el("li", { class: "more", text: "… and " + state.more + " more (explorer check lists them all)" }));
        for (const [name, div] of Object.entries(figs)) {
          delete div.dataset.located;
          if (token !== latest) return;
          await draw(div, state.figs[name]);
        }
      }
      if (sizes && token === latest) await draw(sizes, block.sizes[s]);
      if (token === latest) section.dataset.drawn = s + "/" + p + "/" + m;
    }
    setup.addEventListener("change", update);
    stages.addEventListener("input", update);
    mbs.addEventListener("input", update);
    const ready = update().then(() => {
      if (sizes) sizes.on("plotly_click", (ev) => {
        const pt = ev.points[0];
        const i = block.stages.indexOf(pt.y), j = block.microbatches.indexOf(pt.x);
        if (i >= 0 && j >= 0) { stages.value = String(i); mbs.value = String(j); update(); }
      });
    });
    return ready;
  }

  // -- questions ----------------------------------------------------------------------------
  function feedback(box, right, note, q) {
    box.innerHTML = "";
    box.className = "feedback " + (right ? "right" : "wrong");
    box.appendChild(el("p", { class: "verdict", text: right ? "✓ Right." : "✗ Not quite." }));
    if (note) box.appendChild(el("p", { class: "note", text: note }));
    if (!right && q.mode === "choice") {
      const good = q.options.filter((o) => o.right).map((o) => o.label).join("; ");
      box.appendChild(el("p", { class: "answer", text: "The analyses say: " + good }));
    }
    if (q.explain) box.appendChild(el("div", { class: "explain", html: q.explain }));
  }

  function question(section, q) {
    section.id = q.id;
    section.appendChild(el("div", { class: "prompt", html: q.prompt }));
    const box = el("div", { class: "feedback", role: "status" });
    if (q.mode === "choice") {
      const list = el("div", { class: "options" });
      q.options.forEach((o, i) => {
        const b = el("button", { type: "button", class: "option", "data-option": String(i), text: o.label });
        b.addEventListener("click", () => {
          list.querySelectorAll("button").forEach((x) => x.classList.remove("chosen", "right", "wrong"));
          b.classList.add("chosen", o.right ? "right" : "wrong");
          feedback(box, o.right, o.note, q);
          section.dataset.answered = o.right ? "right" : "wrong";
        });
        list.appendChild(b);
      });
      section.appendChild(list);
      section.appendChild(box);
      return Promise.resolve();
    }
    const div = el("div", { class: "figure grid" });
    section.appendChild(div);
    section.appendChild(box);
    return draw(div, q.figure).then(() => {
      div.on("plotly_click", (ev) => {
        const pt = ev.points[0];
        if (typeof pt.x !== "number" || typeof pt.y !== "number") return;
        const step = Math.round(pt.x), stage = Math.round(pt.y);
        const right = q.answer.some((a) => a[0] === stage && a[1] === step);
        const there = q.cells[stage + "/" + step];
        const note = right ? q.right_note : "stage " + stage + ", step " + step + ": " +
          (there ? "this cell has a finding, but not the first one: " + there.join("; ") : "the check finds nothing wrong in this cell");
        draw(div, q.figure, [cellShape(stage, step, right ? "#2a8a2a" : "#d00")]);
        feedback(box, right, note, q);
        section.dataset.answered = right ? "right" : "wrong";
        section.dataset.clicked = stage + "/" + step;
      });
    });
  }

  // -- a recorded run and a fix search -------------------------------------------------------
  function recorded(section, block) {
    section.appendChild(el("p", { class: "diagnosis", html: "<b>" + block.cause + ".</b> " + block.diagnosis }));
    return Promise.all(block.figures.map((f) => {
      const div = el("div", { class: "figure" });
      section.appendChild(div);
      return draw(div, f);
    }));
  }
  function fixes(section, block) {
    section.appendChild(el("p", { html: "What <code>explorer fix</code> finds for <code>" + block.setup.replace(/</g, "&lt;") + "</code>:" }));
    section.appendChild(el("pre", { text: block.text }));
    return Promise.resolve();
  }

  // Milliseconds since navigation began, at each stage of opening (the benchmark reads them).
  const timings = (window.lessonTimings = {});
  async function main() {
    timings.script = performance.now();
    const plotlyText = await unpack("plotly-js");
    timings.plotly_unpacked = performance.now();
    const script = document.createElement("script");
    script.textContent = plotlyText;
    document.head.appendChild(script);
    timings.plotly_loaded = performance.now();
    const data = JSON.parse(await unpack("lesson-data"));
    timings.data_parsed = performance.now();
    STORE = data.figures;
    const drawers = { explore: explore, question: question, recorded: recorded, fixes: fixes };
    // A block is drawn when it comes near the screen: opening costs the blocks in view only.
    const start = (section) => {
      if (section.dataset.started) return Promise.resolve();
      section.dataset.started = "1";
      const block = data.blocks[Number(section.dataset.block)];
      return drawers[block.type](section, block).then(() => { section.dataset.ready = "1"; });
    };
    // Opening draws the blocks on screen; the others start once within 300 px of it.
    const observer = new IntersectionObserver((entries) => {
      for (const e of entries) if (e.isIntersecting) { observer.unobserve(e.target); start(e.target); }
    }, { rootMargin: "300px" });
    const waits = [];
    document.querySelectorAll("section.block").forEach((section) => {
      if (section.getBoundingClientRect().top < window.innerHeight) waits.push(start(section));
      else observer.observe(section);
    });
    await Promise.all(waits);
    timings.drawn = performance.now();
    document.getElementById("loading").remove();
    document.body.dataset.ready = "1";
  }
  main().catch((err) => {
    const p = document.getElementById("loading");
    if (p) { p.textContent = "This lesson could not be drawn: " + err; p.className = "loading failed"; }
    document.body.dataset.ready = "error";
    throw err;
  });
})();
