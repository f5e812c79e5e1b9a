#include "api/static_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>

namespace egs::api {

namespace {

HttpResponse Plain(int status, std::string text) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(text);
  return r;
}

// The relative path a URL path names below the prefix; nullopt for a path that tries to leave
// the directory or is malformed.
std::optional<std::filesystem::path> SafeRelative(std::string_view rest) {
  std::filesystem::path out;
  std::size_t start = 0;
  while (start <= rest.size()) {
    std::size_t slash = rest.find('/', start);
    if (slash == std::string_view::npos) slash = rest.size();
    std::string_view seg = rest.substr(start, slash - start);
    if (seg.empty()) {
      if (slash != rest.size()) return std::nullopt;  // "a//b"
    } else {
      if (seg == "." || seg == "..") return std::nullopt;
      if (seg.find('\\') != std::string_view::npos || seg.find('\0') != std::string_view::npos) {
        return std::nullopt;
      }
      out /= std::string(seg);
    }
    start = slash + 1;
  }
  return out;
}

bool Inside(const std::filesystem::path& root, const std::filesystem::path& p) {
  auto [r, q] = std::mismatch(root.begin(), root.end(), p.begin(), p.end());
  return r == root.end();
}

}  // namespace

std::string ContentTypeFor(const std::filesystem::path& file) {
  std::string ext = file.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static const std::array<std::pair<std::string_view, std::string_view>, 16> kTypes = {{
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".jpg", "image/jpeg"},
      {".jpeg", "image/jpeg"},
      {".gif", "image/gif"},
      {".ico", "image/x-icon"},
      {".woff", "font/woff"},
      {".woff2", "font/woff2"},
      {".txt", "text/plain; charset=utf-8"},
      {".webmanifest", "application/manifest+json"},
  }};
  for (const auto& [e, type] : kTypes) {
    if (ext == e) return std::string(type);
  }
  return "application/octet-stream";
}

common::Result<StaticFiles> StaticFiles::Open(const std::filesystem::path& dir,
                                              std::string prefix) {
  if (prefix.empty() || prefix.front() != '/' || prefix.back() == '/') {
    return common::InvalidArgumentError(
        fmt::format("portal prefix \"{}\": must start with / and not end with one", prefix));
  }
  std::error_code ec;
  std::filesystem::path root = std::filesystem::canonical(dir, ec);
  if (ec || !std::filesystem::is_directory(root, ec)) {
    return common::InvalidArgumentError(
        fmt::format("portal directory {}: not a readable directory", dir.string()));
  }
  if (!std::filesystem::is_regular_file(root / "index.html", ec)) {
    return common::InvalidArgumentError(
        fmt::format("portal directory {}: has no index.html (is the portal built?)", dir.string()));
  }
  return StaticFiles(std::move(root), std::move(prefix));
}

std::optional<HttpResponse> StaticFiles::Serve(const HttpRequest& request) const {
  std::string_view path = request.path;
  if (path != prefix_ && !(path.starts_with(prefix_) && path[prefix_.size()] == '/')) {
    return std::nullopt;
  }
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse r = Plain(405, "method not allowed: the portal serves GET and HEAD\n");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  std::string_view rest = path.substr(std::min(path.size(), prefix_.size() + 1));
  auto relative = SafeRelative(rest);
  if (!relative) return Plain(400, "bad path\n");

  std::error_code ec;
  std::filesystem::path file = root_ / *relative;
  if (relative->empty() || std::filesystem::is_directory(file, ec)) file /= "index.html";
  if (!std::filesystem::is_regular_file(file, ec)) {
    // A client-side route (no extension): the app's entry point.
    if (!relative->has_extension()) {
      file = root_ / "index.html";
    } else {
      return Plain(404, fmt::format("{}: not found\n", path));
    }
  }
  std::filesystem::path real = std::filesystem::canonical(file, ec);
  if (ec || !Inside(root_, real)) return Plain(404, fmt::format("{}: not found\n", path));

  std::ifstream in(real, std::ios::binary);
  if (!in) return Plain(404, fmt::format("{}: not found\n", path));
  std::ostringstream body;
  body << in.rdbuf();
  HttpResponse r;
  r.status = 200;
  r.content_type = ContentTypeFor(real);
  if (request.method == "GET") r.body = body.str();
  r.headers.emplace_back("Cache-Control",
                         real.filename() == "index.html" ? "no-cache" : "public, max-age=3600");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return r;
}

}  // namespace egs::api
