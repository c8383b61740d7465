// A small line chart on <canvas>: a rolling window of points per series.
const COLORS = ["#2f6fde", "#1e9e5a", "#d64545"];

export class LineChart {
  constructor(canvas, series, colors = COLORS, points = 60) {
    this.canvas = canvas;
    this.colors = colors;
    this.series = series;
    this.points = points;
    this.data = series.map(() => []);
  }

  push(values) {
    values.forEach((v, i) => {
      const d = this.data[i];
      d.push(v);
      if (d.length > this.points) d.shift();
    });
    this.draw();
  }

  draw() {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth, h = c.clientHeight;
    if (c.width !== w * dpr) { c.width = w * dpr; c.height = h * dpr; }
    const g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const max = Math.max(1, ...this.data.flat());
    const left = 34, bottom = h - 16, top = 8, right = w - 6;
    g.strokeStyle = "#e2e5eb"; g.fillStyle = "#6b7385"; g.font = "11px system-ui"; g.lineWidth = 1;
    for (let i = 0; i <= 2; i++) {
      const y = bottom - ((bottom - top) * i) / 2;
      g.beginPath(); g.moveTo(left, y); g.lineTo(right, y); g.stroke();
      g.fillText(fmt((max * i) / 2), 2, y + 4);
    }
    g.fillText(`last ${this.points}s`, left, h - 2);
    this.data.forEach((d, s) => {
      if (d.length < 2) return;
      g.strokeStyle = this.colors[s % this.colors.length]; g.lineWidth = 2; g.beginPath();
      d.forEach((v, i) => {
        const x = left + ((right - left) * (i + this.points - d.length)) / (this.points - 1);
        const y = bottom - ((bottom - top) * v) / max;
        if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
      });
      g.stroke();
    });
  }
}

function fmt(v) {
  if (v >= 1000) return `${(v / 1000).toFixed(1)}k`;
  return v >= 10 || v === 0 ? v.toFixed(0) : v.toFixed(1);
}
