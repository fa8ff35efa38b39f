// The site's charts, drawn by Plotly from the JSON of the page (torch_perf_suite/nightly/site.py writes both).
"use strict";
const COLORS = {alert: "#d62728", improvement: "#2ca02c", failed: "#ff7f0e"};
const SYMBOLS = {alert: "triangle-down", improvement: "triangle-up", failed: "x"};

function draw() {
  const data = JSON.parse(document.getElementById("data").textContent);
  (data.sparks || []).forEach((values, k) => spark("spark-" + k, values));
  (data.charts || []).forEach((chart, k) => plot("chart-" + k, chart, data.nights, data.changes));
}

// the index's trend line: no axes, its unit in the column's heading
function spark(id, values) {
  Plotly.newPlot(id, [{y: values, mode: "lines", line: {width: 1.5, color: "#1f77b4"}, hoverinfo: "skip"}],
    {width: 180, height: 40, margin: {l: 2, r: 2, t: 2, b: 2}, xaxis: {visible: false}, yaxis: {visible: false},
     paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)", showlegend: false}, {staticPlot: true});
}

// one number over the nights: a line a GPU model, its levels, its change points, the change points said (alerts and
// improvements), the failed nights and the GPU model's changes; a click on a night goes to its row (commit and run)
function plot(id, chart, nights, changes) {
  const date = i => (i === null ? null : nights[i][0]);
  const label = i => nights[i][0] + " " + nights[i][1] + "<br>" + nights[i][2];
  const traces = chart.lines.map(line => ({
    x: line.x.map(date), y: line.y, customdata: line.x, text: line.x.map(label), name: line.gpu,
    mode: "lines+markers", marker: {size: 4},
    hovertemplate: "%{y:,.5~g} " + chart.unit + "<br>%{text}<extra></extra>"}));
  traces.push({x: chart.levels[0].map(date), y: chart.levels[1], name: "level", mode: "lines",
    line: {dash: "dot", color: "#444"}, hoverinfo: "skip"});
  for (const kind of ["alert", "improvement", "failed"]) {
    const marks = chart.marks.filter(m => m[2] === kind && m[1] !== null);
    if (marks.length) {
      traces.push({x: marks.map(m => date(m[0])), y: marks.map(m => m[1]), customdata: marks.map(m => m[0]),
        text: marks.map(m => kind + ": " + m[3] + "<br>" + label(m[0])), name: kind, mode: "markers",
        marker: {size: 11, color: COLORS[kind], symbol: SYMBOLS[kind]}, hovertemplate: "%{text}<extra></extra>"});
    }
  }
  const vline = (i, color, dash, text) => ({
    shape: {type: "line", xref: "x", yref: "paper", x0: date(i), x1: date(i), y0: 0, y1: 1,
            line: {color: color, dash: dash, width: 1}},
    note: {x: date(i), y: 1, xref: "x", yref: "paper", text: text, showarrow: false, yanchor: "bottom",
           font: {size: 10, color: color}}});
  const lines = chart.changes.map(c => vline(c[0], "#666", "dot", c[1]))
    .concat(changes.map(c => vline(c[0], "#9467bd", "dash", c[1])));
  const layout = {height: 300, margin: {l: 80, r: 20, t: 30, b: 60}, hovermode: "closest",
    shapes: lines.map(l => l.shape), annotations: lines.map(l => l.note), legend: {orientation: "h", y: -0.3},
    xaxis: {title: {text: "night (date)"}, type: "date"}, yaxis: {title: {text: chart.unit}}};
  Plotly.newPlot(id, traces, layout, {displaylogo: false, responsive: true});
  document.getElementById(id).on("plotly_click", event => {
    const i = event.points[0].customdata;
    if (i === undefined) return;
    location.href = document.getElementById("night-" + i) ? "#night-" + i : "../index.html#night-" + i;
  });
}
