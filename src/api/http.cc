#include "api/http.h"

#include <algorithm>
#include <cctype>

namespace egs::api {

bool HeaderLess::operator()(std::string_view a, std::string_view b) const {
  return std::lexicographical_compare(
      a.begin(), a.end(), b.begin(), b.end(),
      [](unsigned char x, unsigned char y) { return std::tolower(x) < std::tolower(y); });
}

std::optional<std::string> HttpRequest::Query(std::string_view name) const {
  // multimap::find needs a std::string key (no transparent comparator); lower_bound keeps the
  // first value of a repeated parameter.
  auto it = query.lower_bound(std::string(name));
  if (it == query.end() || it->first != name) return std::nullopt;
  return it->second;
}

std::string HttpRequest::Header(std::string_view name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

}  // namespace egs::api
