#include "sim/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace egs::sim {
namespace {

constexpr double kWidth = 760, kHeight = 440;
constexpr double kLeft = 70, kRight = 170, kTop = 40, kBottom = 60;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                   "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

const char* Color(std::size_t i) { return kColors[i % std::size(kColors)]; }

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void Add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  // Non-empty and of positive width.
  Range Usable(double default_lo, double default_hi) const {
    Range r = *this;
    if (!(r.lo <= r.hi)) return {default_lo, default_hi};
    if (r.hi - r.lo < 1e-12) {
      r.lo -= 0.5;
      r.hi += 0.5;
    }
    return r;
  }
};

// About five round-number ticks covering [lo, hi].
std::vector<double> LinearTicks(double lo, double hi) {
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  }
  return ticks;
}

std::string Header(const std::string& title) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{3}</text>\n",
      kWidth, kHeight, kLeft + kPlotW / 2, Escape(title));
}

std::string Axes(const std::string& x_label, const std::string& y_label) {
  return fmt::format(
      "<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" fill=\"none\" stroke=\"black\"/>\n"
      "<text x=\"{4}\" y=\"{5}\" text-anchor=\"middle\">{6}</text>\n"
      "<text x=\"18\" y=\"{7}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {7})\">{8}"
      "</text>\n",
      kLeft, kTop, kPlotW, kPlotH, kLeft + kPlotW / 2, kHeight - 15, Escape(x_label),
      kTop + kPlotH / 2, Escape(y_label));
}

std::string YTicks(const Range& y) {
  std::string out;
  for (double t : LinearTicks(y.lo, y.hi)) {
    const double py = kTop + kPlotH - (t - y.lo) / (y.hi - y.lo) * kPlotH;
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>\n"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
        kLeft, py, kLeft + kPlotW, kLeft - 6, py + 4, t);
  }
  return out;
}

std::string Legend(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const double y = kTop + 10 + 20 * static_cast<double>(i);
    out += fmt::format(
        "<rect x=\"{0}\" y=\"{1:.1f}\" width=\"14\" height=\"10\" fill=\"{2}\"/>\n"
        "<text x=\"{3}\" y=\"{4:.1f}\">{5}</text>\n",
        kLeft + kPlotW + 12, y, Color(i), kLeft + kPlotW + 32, y + 9, Escape(names[i]));
  }
  return out;
}

}  // namespace

std::string RenderLinePlot(const LinePlot& plot) {
  auto fx = [&](double x) { return plot.log_x ? std::log10(x) : x; };
  Range xr, yr;
  for (const LineSeries& s : plot.series) {
    for (const auto& [x, y] : s.points) {
      if (plot.log_x && !(x > 0)) continue;
      xr.Add(fx(x));
      yr.Add(y);
    }
  }
  const Range x = xr.Usable(0, 1), y = yr.Usable(0, 1);
  auto px = [&](double v) { return kLeft + (fx(v) - x.lo) / (x.hi - x.lo) * kPlotW; };
  auto py = [&](double v) { return kTop + kPlotH - (v - y.lo) / (y.hi - y.lo) * kPlotH; };
  std::string out = Header(plot.title) + YTicks(y);
  std::vector<double> xticks;
  if (plot.log_x) {
    for (double e = std::ceil(x.lo); e <= x.hi + 1e-9; ++e) xticks.push_back(std::pow(10, e));
  } else {
    xticks = LinearTicks(x.lo, x.hi);
  }
  for (double t : xticks) {
    out += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>\n"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
        px(t), kTop, kTop + kPlotH, kTop + kPlotH + 16, t);
  }
  out += Axes(plot.x_label, plot.y_label);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    const LineSeries& s = plot.series[i];
    names.push_back(s.name);
    std::string pts;
    for (const auto& [vx, vy] : s.points) {
      if (plot.log_x && !(vx > 0)) continue;
      pts += fmt::format("{:.1f},{:.1f} ", px(vx), py(vy));
    }
    out +=
        fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n",
                    Color(i), pts);
  }
  return out + Legend(names) + "</svg>\n";
}

std::string RenderBarPlot(const BarPlot& plot) {
  Range yr;
  yr.Add(0);
  for (const BarSeries& s : plot.series) {
    for (double v : s.values) yr.Add(v);
  }
  const Range y = yr.Usable(0, 1);
  auto py = [&](double v) { return kTop + kPlotH - (v - y.lo) / (y.hi - y.lo) * kPlotH; };
  std::string out = Header(plot.title) + YTicks(y) + Axes(plot.x_label, plot.y_label);
  const double group_w =
      kPlotW / static_cast<double>(std::max<std::size_t>(1, plot.categories.size()));
  const double bar_w =
      group_w * 0.8 / static_cast<double>(std::max<std::size_t>(1, plot.series.size()));
  for (std::size_t c = 0; c < plot.categories.size(); ++c) {
    const double gx = kLeft + group_w * static_cast<double>(c);
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\">{}</text>\n",
        gx + group_w / 2, kTop + kPlotH + 16, Escape(plot.categories[c]));
    for (std::size_t i = 0; i < plot.series.size(); ++i) {
      const auto& values = plot.series[i].values;
      const double v = c < values.size() ? values[c] : 0;
      const double top = py(std::max(v, 0.0)), base = py(std::min(v, 0.0));
      out += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n",
          gx + group_w * 0.1 + bar_w * static_cast<double>(i), top, bar_w, base - top, Color(i));
    }
  }
  std::vector<std::string> names;
  for (const BarSeries& s : plot.series) names.push_back(s.name);
  return out + Legend(names) + "</svg>\n";
}

}  // namespace egs::sim
