// StaticFiles: serves the portal's built assets (a directory of files) under a URL prefix,
// from the same server as the API.
//
//   - GET and HEAD only (others: 405). No token needed: the assets are public; the portal itself
//     calls the API with the user's token.
//   - `prefix` + "/" serves index.html; a path without a file extension that names no file also
//     serves index.html (client-side routes of a single-page app); a missing file with an
//     extension is 404.
//   - Content-Type from the extension; Cache-Control "no-cache" for index.html (so a new build
//     is picked up) and one hour for the rest.
//   - Paths are resolved inside the directory only: "..", "." and empty segments, backslashes and
//     NUL are refused (400); symbolic links leaving the directory are refused (404).
//
// Thread-safety: Serve may be called concurrently (it only reads files).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "api/http.h"
#include "common/status.h"

namespace egs::api {

class StaticFiles {
 public:
  // `dir` must be a readable directory holding index.html; `prefix` starts with "/" and does
  // not end with one (e.g. "/portal"). InvalidArgument naming the problem otherwise.
  static common::Result<StaticFiles> Open(const std::filesystem::path& dir, std::string prefix);

  // The answer for `request` when its path is the prefix or below it; nullopt otherwise.
  std::optional<HttpResponse> Serve(const HttpRequest& request) const;

  const std::string& prefix() const { return prefix_; }

 private:
  StaticFiles(std::filesystem::path root, std::string prefix)
      : root_(std::move(root)), prefix_(std::move(prefix)) {}

  std::filesystem::path root_;  // canonical
  std::string prefix_;
};

// The Content-Type for a file name, by extension ("application/octet-stream" when unknown).
std::string ContentTypeFor(const std::filesystem::path& file);

}  // namespace egs::api
