// Minimal SVG charts for the benchmark report, written as text (no plotting library): line plots
// (optionally with a log-scaled x axis) and grouped bar charts, each with axes, ticks, labels and
// a legend. The output is a standalone document starting with "<svg".
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace egs::sim {

struct LineSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in the order given
};

struct LinePlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;  // x values <= 0 are then left out
  std::vector<LineSeries> series;
};

struct BarSeries {
  std::string name;
  std::vector<double> values;  // one per category; missing values count as 0
};

struct BarPlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<std::string> categories;
  std::vector<BarSeries> series;
};

std::string RenderLinePlot(const LinePlot& plot);
std::string RenderBarPlot(const BarPlot& plot);

}  // namespace egs::sim
