// The page side of PlotView (plot_view.py): draw one plotly figure, fill the width it is
// given, follow resizes, and tell the kernel what the user zoomed to and clicked.
//
// plotly.js is not bundled here: the first view on a page asks the kernel for a copy (one
// message, once per page and bundle), and every later view reuses it. The small bundle (a
// quarter of the parse: bar, heatmap, scatter, table) is asked for while a figure draws only
// those types (the kernel lists them in `small_types`, none when its small bundle is another
// version); the full one once a figure needs any other, and then it draws everything.
// A page's first explorer may have it parsed before any view is displayed (`initialize`).
// Errors while drawing are sent back so the explorer can say them in its status line
// instead of leaving them in the browser console.

const KEY = "__explorerPlotly";

// Which bundle a figure needs: "small" when every trace type is one the small bundle draws.
function bundleFor(fig, smallTypes) {
  const types = (fig.data || []).map((t) => t.type || "scatter");
  return types.every((t) => smallTypes.includes(t)) ? "small" : "full";
}

// The page's copies of one plotly.js version: JupyterLab is one page for every notebook, and
// two kernels may have two versions; a figure is only ever drawn by its kernel's version.
function copiesOf(version) {
  const all = window[KEY] || (window[KEY] = {});
  return all[version] || (all[version] = {});
}

// { lib, bundle } for `wanted`: the full bundle whenever the page has (or is loading) it.
function loadPlotly(model, wanted) {
  const cache = copiesOf(model.get("plotly_version"));
  if (cache.full) return cache.full;
  if (wanted === "small" && cache.small) return cache.small;
  // JupyterLab's plotly extension may have loaded the very same plotly.js for a static figure
  // (it sets window.Plotly): reuse it rather than parse a second copy.
  const present = window.Plotly;
  if (present && typeof present.react === "function" && present.version === model.get("plotly_version")) {
    cache.full = Promise.resolve({ lib: present, bundle: "full" });
    return cache.full;
  }
  const loading = fetchPlotly(model, wanted);
  cache[wanted] = loading;
  // The kernel answers with the full bundle when it has no small one of this version.
  loading.then((got) => { if (got.bundle !== wanted) { cache[got.bundle] = loading; delete cache[wanted]; } },
    () => { delete cache[wanted]; });
  return loading;
}

function fetchPlotly(model, wanted) {
  return new Promise((resolve, reject) => {
    const onMessage = (msg, buffers) => {
      if (!msg || msg.type !== "plotly") return;
      model.off("msg:custom", onMessage);
      runBundle(buffers[0], msg.bundle === "small" ? "small" : "full").then(resolve, reject);
    };
    model.on("msg:custom", onMessage);
    model.send({ type: "plotly?", bundle: wanted });
  });
}

// Run one plotly.js bundle (bytes) and resolve with { lib, bundle }, the page's globals as before.
function runBundle(bytes, bundle) {
  return new Promise((resolve, reject) => {
    // A <script> from a blob URL, not eval: the browser compiles a large script off the
    // main thread, so the page does not freeze while plotly.js is parsed.
    const url = URL.createObjectURL(new Blob([bytes], { type: "text/javascript" }));
    const before = { Plotly: window.Plotly, define: window.define };
    window.define = undefined;  // a loader's AMD define would swallow the global
    const script = document.createElement("script");
    script.async = true;
    script.src = url;
    const done = (err) => {
      const ours = window.Plotly;
      window.Plotly = before.Plotly;  // leave the page's globals as they were
      window.define = before.define;
      // A bundle that declares `var Plotly` leaves a property that cannot be deleted.
      if (before.Plotly === undefined) try { delete window.Plotly; } catch (err) { window.Plotly = undefined; }
      URL.revokeObjectURL(url);
      script.remove();
      if (err || !ours || ours === before.Plotly) reject(err || new Error("plotly.js did not define Plotly"));
      else resolve({ lib: ours, bundle });
    };
    script.onload = () => done(null);
    script.onerror = () => done(new Error("the browser refused to run plotly.js"));
    document.head.appendChild(script);
  });
}

// A model that carries the small bundle in its state (`preload`, see plot_view.warm_page) is
// created while the kernel still computes the first explorer's figures: parse plotly.js then,
// so the views find it ready when they are displayed. A page that has a copy keeps it.
function initialize({ model }) {
  const bytes = model.get("preload");
  const size = bytes ? bytes.byteLength : 0;
  const cache = copiesOf(model.get("plotly_version"));
  if (!size || cache.small || cache.full) return;
  const view = bytes instanceof DataView ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : bytes;
  const loading = runBundle(view, "small");
  cache.small = loading;
  loading.catch(() => { if (cache.small === loading) delete cache.small; });  // the views ask the kernel instead
}

function decode(bytes) {
  if (!bytes || !bytes.byteLength) return { data: [], layout: {} };
  const view = bytes instanceof DataView ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : new Uint8Array(bytes);
  return JSON.parse(new TextDecoder().decode(view));
}

function axisRange(event, axis) {
  if (event[`${axis}.autorange`]) return "auto";
  const a = event[`${axis}.range[0]`], b = event[`${axis}.range[1]`];
  if (a !== undefined && b !== undefined) return [Number(a), Number(b)];
  const r = event[`${axis}.range`];
  return Array.isArray(r) ? [Number(r[0]), Number(r[1])] : undefined;
}

async function render({ model, el }) {
  el.classList.add("explorer-plot");
  el.style.width = "100%";
  el.style.minWidth = "0";
  const div = document.createElement("div");
  div.style.width = "100%";
  el.appendChild(div);
  const report = (where, err) => model.send({ type: "error", where, message: String((err && err.message) || err) });

  let Plotly, bundle, listening;  // the plotly.js drawing this div, which bundle, handlers on it
  let drawing = Promise.resolve();
  let timer;
  // A figure the small bundle cannot draw moves the div to the full bundle: the small one
  // lets go of it first, and the handlers are attached again to what the full one draws.
  const ensure = async (fig) => {
    const wanted = bundleFor(fig, model.get("small_types") || []);
    if (Plotly && (bundle === "full" || wanted === "small")) return;
    const got = await loadPlotly(model, wanted);
    if (Plotly && got.lib !== Plotly) {
      try { Plotly.purge(div); } catch (err) { /* drawn again below */ }
      listening = undefined;
    }
    Plotly = got.lib;
    bundle = got.bundle;
  };
  const draw = () => {
    return drawing = drawing.then(async () => {
      const revision = model.get("revision");
      const fig = decode(model.get("spec"));
      try {
        await ensure(fig);
      } catch (err) {
        div.textContent = "plotly.js could not be loaded: " + err;
        report("loading plotly.js", err);
        return;
      }
      try {
        const layout = Object.assign({}, fig.layout || {}, { autosize: true });
        delete layout.width;
        await Plotly.react(div, fig.data || [], layout, Object.assign({ responsive: true, displaylogo: false }, fig.config || {}));
        if (listening !== Plotly) listen();
        el.dataset.revision = String(revision);
        model.send({ type: "drawn", revision });
      } catch (err) {
        report("drawing the figure", err);
      }
    });
  };
  // plotly adds .on() to the div with its first plot (and again after a purge).
  const listen = () => {
    if (typeof div.on !== "function") return;
    listening = Plotly;
    div.on("plotly_relayout", (event) => {
      const x = axisRange(event, "xaxis"), y = axisRange(event, "yaxis");
      if (x === undefined && y === undefined) return;
      model.send({ type: "relayout", x: x === undefined ? null : x, y: y === undefined ? null : y });
    });
    div.on("plotly_click", (event) => {
      const points = (event.points || []).map((p) => ({
        curve: p.curveNumber, index: Array.isArray(p.pointIndex) ? p.pointIndex : (p.pointIndex ?? p.pointNumber),
        x: p.x, y: p.y, name: p.data && p.data.name,
      }));
      model.send({ type: "click", points });
    });
  };
  draw();
  model.on("change:spec", draw);
  await drawing;

  // Width follows the output area: at first render the element may not be attached yet
  // (plotly then falls back to 700 px), and JupyterLab panels resize without window events.
  const observer = new ResizeObserver(() => {
    clearTimeout(timer);
    timer = setTimeout(() => { if (div.offsetWidth > 0 && div.data) Plotly.Plots.resize(div).catch(() => {}); }, 60);
  });
  observer.observe(el);

  return () => {
    observer.disconnect();
    try { if (Plotly) Plotly.purge(div); } catch (err) { /* the page is going away */ }
  };
}

export default { initialize, render };
