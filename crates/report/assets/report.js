// Draws the charts of an iocurve report from the JSON embedded in the page (uPlot). Every
// figure was computed by iocurve; this file only lays the numbers out. It runs once, at the
// end of the page, and builds every chart synchronously, so the page is complete when the
// browser's load event fires.
(function () {
  "use strict";

  const D = JSON.parse(document.getElementById("iocurve-data").textContent);
  const WIDTH = 560;
  const HEIGHT = 300;
  // Not blue or orange: those mark the optimum and the maximum.
  const PCT_COLORS = { p50: "#2ca02c", p90: "#17becf", p99: "#9467bd", p999: "#d62728" };
  const PCT_NAMES = { p50: "p50", p90: "p90", p99: "p99", p999: "p99.9" };
  const multiRun = D.runs.length > 1;
  // Latency beside throughput: in its own colour for one run; in a comparison the colour says
  // the run, so latency keeps it and is told apart by its points.
  // Blue and orange mark the optimum and the maximum; a single run's latency is drawn grey.
  const latColor = (s) => (multiRun ? s.color : "#555555");
  const OPTIMUM = "#1f77b4";
  const MAXIMUM = "#ff7f0e";
  // A column with only the step `at` (an index among the steps) kept: a point to mark.
  const only = (col, at) => col.map((v, i) => (i === at ? v : null));
  // The optimum's mark is the larger: where optimum and maximum are one step, a blue ring
  // shows around the orange point.
  const mark = (label, color, scale) => ({
    label, stroke: color, width: 0, scale, spanGaps: false,
    points: { show: true, size: color === OPTIMUM ? 15 : 9, stroke: color, fill: color }, value: legendValue,
  });

  // 1'234'567 above 100, 12.3 above 10, 1.23 below: the report's number style.
  function num(v) {
    if (v == null || !isFinite(v)) return "—";
    const a = Math.abs(v);
    if (a >= 100) return Math.round(v).toString().replace(/\B(?=(\d{3})+(?!\d))/g, "'");
    if (a >= 10) return v.toFixed(1);
    return v.toFixed(2);
  }
  // 5 rather than 5.00: bounds as the user gave them.
  const plain = (v) => String(Number(v.toPrecision(4)));
  const axisValues = (u, vals) => vals.map(num);
  const legendValue = (u, v) => num(v);
  // Log scales cannot show zero: such points are left out.
  const positive = (arr) => arr.map((v) => (v != null && v > 0 ? v : null));
  const maxOf = (arrays) => {
    let m = 0;
    for (const a of arrays) for (const v of a) if (v != null && v > m) m = v;
    return m;
  };
  const zeroTo = (m) => [0, m > 0 ? m * 1.08 : 1];
  // The x of the per-step charts: worker counts (log 2), or a rate ramp's target rates (log 10).
  const xAxis = (g) => (g.rate
    ? { label: "target " + g.unit, values: (u, vals) => vals.map((v) => (v == null ? "" : num(v))) }
    : { label: "workers", values: (u, vals) => vals.map((v) => (v == null ? "" : String(v))) });
  const xScale = (g) => ({ time: false, distr: 3, log: g.rate ? 10 : 2 });
  const xName = (g) => (g.rate ? "target " + g.unit : "workers");
  // A step as the step selector and captions name it.
  const stepName = (g, x) => (g.rate ? num(x) + " " + g.unit : x + (x === 1 ? " worker" : " workers"));

  function make(el, opts, data) {
    opts.width = WIDTH;
    opts.height = HEIGHT;
    return new uPlot(opts, data, el);
  }

  // Throughput (left axis) and mean latency (right axis) over workers, one pair per series.
  function throughputChart(g, el) {
    const tables = [];
    const series = [{ label: xName(g), value: (u, v) => (v == null ? "—" : g.rate ? num(v) : v) }];
    for (const s of g.series) {
      tables.push([s.x, s.tput, s.mean, only(s.tput, s.opt), only(s.tput, s.max)]);
      series.push({ label: s.label + " " + g.unit, stroke: s.color, dash: s.dash, width: 2, scale: "tput", spanGaps: true, value: legendValue });
      series.push({
        label: s.label + " mean µs", stroke: latColor(s), dash: s.dash, width: 1, scale: "lat", spanGaps: true,
        points: { show: true, size: 6, fill: "#fff" }, value: legendValue,
      });
      series.push(mark(s.label + " optimum", OPTIMUM, "tput"));
      series.push(mark(s.label + " maximum", MAXIMUM, "tput"));
    }
    return make(el, {
      series,
      scales: {
        x: xScale(g),
        tput: { range: () => zeroTo(maxOf(g.series.map((s) => s.tput))) },
        lat: { range: () => zeroTo(maxOf(g.series.map((s) => s.mean))) },
      },
      axes: [
        xAxis(g),
        { scale: "tput", label: g.unit, values: axisValues, size: 70 },
        { scale: "lat", side: 1, label: "mean latency µs", values: axisValues, size: 70, grid: { show: false } },
      ],
    }, uPlot.join(tables));
  }

  // p50 … p99.9 over workers on a log latency axis. Colour says the percentile, the line style
  // the working set; in a comparison the baseline is drawn thicker.
  function percentileChart(g, el) {
    const tables = [];
    const series = [{ label: xName(g), value: (u, v) => (v == null ? "—" : g.rate ? num(v) : v) }];
    for (const s of g.series) {
      const keys = Object.keys(PCT_COLORS);
      tables.push([s.x].concat(keys.map((k) => positive(s[k]))));
      for (const k of keys) {
        series.push({
          label: s.label + " " + PCT_NAMES[k] + " µs", stroke: PCT_COLORS[k], dash: s.dash,
          width: multiRun && s.run > 0 ? 1 : 2, spanGaps: true, value: legendValue,
        });
      }
    }
    return make(el, {
      series,
      scales: { x: xScale(g), y: { distr: 3, log: 10 } },
      axes: [xAxis(g), { label: "latency µs", values: axisValues, size: 70 }],
    }, uPlot.join(tables));
  }

  // Mean latency over throughput: the response-time curve, drawn in step order (the curve may
  // bend back when throughput falls at high load), with the SLA bounds as horizontal lines.
  function responseChart(g, el) {
    const data = [null];
    const series = [{}];
    for (const s of g.series) {
      data.push([s.tput, s.mean]);
      series.push({ label: s.label + " mean", stroke: s.color, dash: s.dash, width: 2, points: { show: true, size: 6 } });
    }
    // The optimum and the maximum on the curve: blue and orange points, painted over it (a
    // series of one point is not drawn in this chart's mode).
    const marks = [];
    for (const s of g.series) {
      if (s.opt != null) marks.push([s.tput[s.opt], s.mean[s.opt], OPTIMUM, 7.5]);
      if (s.max != null) marks.push([s.tput[s.max], s.mean[s.max], MAXIMUM, 4.5]);
    }
    const paintMarks = (u) => {
      const ctx = u.ctx;
      for (const [x, y, color, r] of marks) {
        if (x == null || y == null) continue;
        ctx.beginPath();
        ctx.fillStyle = color;
        ctx.arc(u.valToPos(x, "x", true), u.valToPos(y, "y", true), r * devicePixelRatio, 0, 2 * Math.PI);
        ctx.fill();
      }
    };
    // A rate ramp's curve is the published response-time curve: mean and p99 response time.
    const withP99 = g.rate || D.runs.some((r) => r.sla_p99_us != null);
    if (withP99) {
      for (const s of g.series) {
        data.push([s.tput, s.p99]);
        series.push({ label: s.label + " p99", stroke: s.color, dash: s.dash, width: 1, alpha: 0.6, points: { show: true, size: 4 } });
      }
    }
    const maxX = maxOf(g.series.map((s) => s.tput)) * 1.05 || 1;
    let maxY = maxOf(data.slice(1).map((d) => d[1]));
    const bounds = [];
    for (const r of D.runs) {
      if (r.sla_mean_us != null) bounds.push(["SLA mean ≤ " + plain(r.sla_mean_us / 1000) + " ms", r.sla_mean_us]);
      if (r.sla_p99_us != null) bounds.push(["SLA p99 ≤ " + plain(r.sla_p99_us / 1000) + " ms", r.sla_p99_us]);
    }
    for (const s of g.series) {
      const who = g.series.length > 1 ? s.label + " " : "";
      if (s.stop_mean_us != null) bounds.push([who + "stop at mean > " + plain(s.stop_mean_us / 1000) + " ms", s.stop_mean_us]);
      if (s.stop_p99_us != null) bounds.push([who + "stop at p99 > " + plain(s.stop_p99_us / 1000) + " ms", s.stop_p99_us]);
    }
    const seen = new Set();
    const hidden = [];
    for (const [label, us] of bounds) {
      if (seen.has(label)) continue;
      seen.add(label);
      // A bound far above the curve would flatten it: keep the curve readable, say so below.
      if (us <= maxY * 3) maxY = Math.max(maxY, us);
      else hidden.push(label);
      data.push([[0, maxX], [us, us]]);
      series.push({ label, stroke: "#c0392b", dash: [4, 4], width: 1.5, points: { show: false } });
    }
    if (hidden.length) {
      const cap = el.parentNode.querySelector(".response-caption");
      cap.textContent += " — above the chart: " + hidden.join(", ");
    }
    return make(el, {
      mode: 2,
      series,
      hooks: { draw: [paintMarks] },
      legend: { live: false },
      scales: { x: { time: false, range: [0, maxX] }, y: { range: zeroTo(maxY) } },
      axes: [
        { label: g.unit, values: axisValues },
        { label: "latency µs", values: axisValues, size: 70 },
      ],
    }, data);
  }

  function cpuChart(g, el) {
    const tables = [];
    const series = [{ label: xName(g), value: (u, v) => (v == null ? "—" : g.rate ? num(v) : v) }];
    for (const s of g.series) {
      tables.push([s.x, s.busy, s.iowait]);
      series.push({ label: s.label + " busy %", stroke: s.color, dash: s.dash, width: 2, spanGaps: true, value: legendValue });
      series.push({ label: s.label + " iowait %", stroke: s.color, dash: s.dash, width: 1, alpha: 0.5, spanGaps: true, value: legendValue });
    }
    return make(el, {
      series,
      scales: { x: xScale(g), y: { range: [0, 100] } },
      axes: [xAxis(g), { label: "% of all cores", values: axisValues, size: 60 }],
    }, uPlot.join(tables));
  }

  // The per-second timeline of the chosen step: throughput and mean latency of every series
  // that ran that many workers.
  function timelineChart(g, el, workers) {
    const tables = [];
    const series = [{ label: "s", value: (u, v) => (v == null ? "—" : num(v)) }];
    for (const s of g.series) {
      const i = s.x.indexOf(workers);
      if (i < 0) continue;
      const t = s.timeline[i];
      tables.push([t.t, t.tput, t.lat]);
      series.push({ label: s.label + " " + g.unit, stroke: s.color, dash: s.dash, width: 2, scale: "tput", spanGaps: true, value: legendValue });
      series.push({ label: s.label + " mean µs", stroke: latColor(s), dash: s.dash, width: 1, scale: "lat", spanGaps: true, value: legendValue });
    }
    // I/O errors per second, on their own axis, when the step had any.
    const withErrors = [];
    for (const s of g.series) {
      const i = s.x.indexOf(workers);
      if (i >= 0 && s.timeline[i].errors) withErrors.push(s);
    }
    const errTables = withErrors.map((s) => {
      const t = s.timeline[s.x.indexOf(workers)];
      return [t.t, t.errors];
    });
    for (const s of withErrors) {
      series.push({ label: s.label + " errors/s", stroke: "#c0392b", dash: s.dash, width: 1, scale: "err", spanGaps: true, points: { show: true, size: 5 }, value: legendValue });
    }
    const joined = uPlot.join(tables.concat(errTables));
    // Scale bounds from the data of this step only.
    const tputs = [], lats = [];
    for (let k = 1; k < 1 + 2 * tables.length; k += 2) { tputs.push(joined[k]); lats.push(joined[k + 1]); }
    return make(el, {
      series,
      scales: {
        x: { time: false },
        tput: { range: () => zeroTo(maxOf(tputs)) },
        lat: { range: () => zeroTo(maxOf(lats)) },
      },
      axes: [
        { label: "seconds into the step", values: axisValues },
        { scale: "tput", label: g.unit, values: axisValues, size: 70 },
        { scale: "lat", side: 1, label: "mean latency µs", values: axisValues, size: 70, grid: { show: false } },
      ].concat(withErrors.length ? [{ scale: "err", side: 1, label: "errors/s", values: axisValues, size: 50, grid: { show: false } }] : []),
    }, joined);
  }

  // A multi-host step: each host's own per-second throughput, a line per host (and per series
  // in a comparison). Null when no series has per-host figures at that step.
  const HOST_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  function hostTimelineChart(g, el, workers) {
    const tables = [];
    const series = [{ label: "s", value: (u, v) => (v == null ? "—" : num(v)) }];
    for (const s of g.series) {
      const i = s.x.indexOf(workers);
      if (i < 0 || !s.hosts || !s.hosts[i]) continue;
      s.hosts[i].forEach((h, k) => {
        tables.push([h.t, h.tput]);
        const name = (g.series.length > 1 ? s.label + " " : "") + h.host + (h.lost ? " (lost)" : "");
        series.push({ label: name, stroke: HOST_COLORS[k % HOST_COLORS.length], dash: s.dash, width: 2, spanGaps: false, value: legendValue });
      });
    }
    if (!tables.length) return null;
    const joined = uPlot.join(tables);
    return make(el, {
      series,
      scales: { x: { time: false }, y: { range: () => zeroTo(maxOf(joined.slice(1))) } },
      axes: [{ label: "seconds into the step", values: axisValues }, { label: g.unit + " per host", values: axisValues, size: 70 }],
    }, joined);
  }

  // The SNIA steady-state check of the chosen step: every round's (interval's) throughput,
  // the window of 5 judged, the best-fit line through it and the band of ±10 % around its
  // mean (max − min may span 20 %). Null when no series has the check at that step.
  function steadyChart(g, el, workers) {
    const tables = [];
    const series = [{ label: "round", value: (u, v) => (v == null ? "—" : num(v)) }];
    const words = [];
    for (const s of g.series) {
      const i = s.x.indexOf(workers);
      const c = i >= 0 && s.steady ? s.steady[i] : null;
      if (!c) continue;
      const rounds = c.rounds.map((_, k) => k + 1);
      const inWindow = (k) => k >= c.first && k < c.first + c.n;
      const fit = c.rounds.map((_, k) => (inWindow(k) ? c.intercept + c.slope * (k - c.first) : null));
      const band = (f) => c.rounds.map((_, k) => (inWindow(k) ? c.mean * f : null));
      tables.push([rounds, c.rounds, c.rounds.map((v, k) => (inWindow(k) ? v : null)), fit, band(1.1), band(0.9)]);
      const name = g.series.length > 1 ? s.label + " " : "";
      series.push({ label: name + g.unit, stroke: s.color, dash: s.dash, width: 1, points: { show: true, size: 4 }, value: legendValue });
      series.push({ label: name + "window", stroke: s.color, width: 3, points: { show: true, size: 7 }, spanGaps: false, value: legendValue });
      series.push({ label: name + "best fit", stroke: "#555", width: 2, spanGaps: false, value: legendValue });
      series.push({ label: name + "mean + 10 %", stroke: "#999", dash: [4, 4], width: 1, spanGaps: false, value: legendValue });
      series.push({ label: name + "mean − 10 %", stroke: "#999", dash: [4, 4], width: 1, spanGaps: false, value: legendValue });
      words.push(name + (c.steady ? "steady" : "not steady") + ": rounds " + (c.first + 1) + "–" + (c.first + c.n) +
        ", mean " + num(c.mean) + " " + g.unit + ", range " + num(c.range_pct) + " % (allowed 20 %), best-fit excursion " +
        num(c.excursion_pct) + " % (allowed 10 %)");
    }
    if (!tables.length) return null;
    const joined = uPlot.join(tables);
    const chart = make(el, {
      series,
      scales: { x: { time: false }, y: { range: () => zeroTo(maxOf(joined.slice(1))) } },
      axes: [
        // Rounds are whole numbers: no ticks between them.
        { label: "round (interval)", values: (u, vals) => vals.map((v) => (Number.isInteger(v) ? String(v) : "")) },
        { label: g.unit, values: axisValues, size: 70 },
      ],
    }, joined);
    chart.words = words.join("; ");
    return chart;
  }

  function histogramTable(g, el, workers) {
    const table = document.createElement("table");
    const head = table.createTHead().insertRow();
    head.insertCell().textContent = "latency";
    const cols = [];
    for (const s of g.series) {
      const i = s.x.indexOf(workers);
      if (i < 0) continue;
      cols.push([s, s.hist[i]]);
      head.insertCell().textContent = s.label;
    }
    // Buckets above the slowest I/O of every shown series are left out: all zeros.
    let last = 0;
    for (const [, hist] of cols) hist.forEach((v, b) => { if (v > 0 && b > last) last = b; });
    const body = table.createTBody();
    D.buckets.slice(0, last + 1).forEach((name, b) => {
      const row = body.insertRow();
      row.insertCell().textContent = name;
      for (const [s, hist] of cols) {
        const cell = row.insertCell();
        cell.className = "bar";
        const v = hist[b] || 0;
        const fill = document.createElement("div");
        fill.className = "fill";
        fill.style.width = Math.min(100, v) + "%";
        fill.style.background = s.color;
        const text = document.createElement("span");
        text.textContent = (v >= 10 ? v.toFixed(0) : v.toFixed(1)) + " %";
        cell.append(fill, text);
      }
    });
    el.replaceChildren(table);
  }

  function stepDetail(g, section) {
    const select = section.querySelector(".step-select");
    const all = new Set();
    for (const s of g.series) for (const w of s.x) all.add(w);
    const workers = Array.from(all).sort((a, b) => a - b);
    for (const w of workers) {
      const opt = document.createElement("option");
      opt.value = String(w);
      opt.textContent = stepName(g, w);
      select.append(opt);
    }
    // Open at the first series' maximum: the step a reader asks about first.
    const first = g.series[0];
    let best = 0;
    first.tput.forEach((v, i) => { if (v > first.tput[best]) best = i; });
    select.value = String(first.x[best]);

    const holder = section.querySelector('[data-chart="timeline"]');
    const caption = section.querySelector(".timeline-caption");
    const flags = section.querySelector(".step-flags");
    const hist = section.querySelector(".histogram");
    const hostFigure = section.querySelector(".host-timeline");
    const hostHolder = section.querySelector('[data-chart="host-timeline"]');
    const steadyFigure = section.querySelector(".steady");
    const steadyHolder = section.querySelector('[data-chart="steady"]');
    const steadyCaption = section.querySelector(".steady-caption");
    let chart = null;
    let hostChart = null;
    let steady = null;
    const draw = () => {
      const w = Number(select.value);
      if (chart) chart.destroy();
      chart = timelineChart(g, holder, w);
      if (hostChart) hostChart.destroy();
      hostChart = hostFigure ? hostTimelineChart(g, hostHolder, w) : null;
      if (hostFigure) hostFigure.hidden = !hostChart;
      if (steady) steady.destroy();
      steady = steadyFigure ? steadyChart(g, steadyHolder, w) : null;
      if (steadyFigure) {
        steadyFigure.hidden = !steady;
        steadyCaption.textContent = steady ? "Steady state (SNIA) at " + stepName(g, w) + ": " + steady.words : "";
      }
      caption.textContent = "Per-second timeline at " + stepName(g, w) + ": " + g.unit + " and mean " + (g.rate ? "response time" : "latency");
      histogramTable(g, hist, w);
      const msgs = [];
      for (const s of g.series) {
        const i = s.x.indexOf(w);
        if (i >= 0) for (const m of s.flags[i]) msgs.push(s.label + ": " + m);
      }
      flags.textContent = msgs.length ? "⚠ " + msgs.join("; ") : "";
    };
    select.addEventListener("change", draw);
    draw();
  }

  const CHARTS = { throughput: throughputChart, percentiles: percentileChart, response: responseChart, cpu: cpuChart };
  for (const g of D.groups) {
    const section = document.getElementById(g.id);
    for (const el of section.querySelectorAll(".chart[data-chart]")) {
      const draw = CHARTS[el.dataset.chart];
      if (draw) draw(g, el);
    }
    stepDetail(g, section);
  }
})();
