#include "egsctl/resources.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace egs::egsctl {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

const std::vector<Resource>& AllResources() {
  static const std::vector<Resource> kResources = {
      {"GPUProvisionRequest", "gpuprovisionrequests", "gpuprovisionrequest", {"gpr"}, true},
      {"Workspace", "workspaces", "workspace", {"ws"}, false},
      {"Node", "nodes", "node", {"gnode"}, false},
      {"Cluster", "clusters", "cluster", {}, false},
      {"GPUShape", "gpushapes", "gpushape", {"shape"}, false},
      {"Project", "projects", "project", {"proj"}, false},
      {"Event", "events", "event", {"ev"}, true},
      {"NotificationSubscription",
       "notificationsubscriptions",
       "notificationsubscription",
       {"nsub"},
       true},
      {"Token", "tokens", "token", {}, false},
  };
  return kResources;
}

common::Result<const Resource*> FindResource(std::string_view name) {
  std::string lower = Lower(name);
  // "gpuprovisionrequest.egs.dev" names the same kind as "gpuprovisionrequest".
  if (auto dot = lower.find('.'); dot != std::string::npos && lower.substr(dot + 1) == kGroup) {
    lower.resize(dot);
  }
  // A short name also answers in the plural ("shapes" for "shape", "gprs" for "gpr").
  const std::string_view singular_of_short =
      lower.size() > 1 && lower.back() == 's' ? std::string_view(lower).substr(0, lower.size() - 1)
                                              : std::string_view();
  for (const Resource& r : AllResources()) {
    const bool match =
        lower == r.plural || lower == r.singular || lower == Lower(r.kind) ||
        std::any_of(r.short_names.begin(), r.short_names.end(),
                    [&](const std::string& s) { return s == lower || s == singular_of_short; });
    if (match) return &r;
  }
  std::string known;
  for (const Resource& r : AllResources()) {
    known += known.empty() ? "" : ", ";
    known += r.plural;
    if (!r.short_names.empty()) known += " (" + r.short_names[0] + ")";
  }
  return common::InvalidArgumentError(
      fmt::format("unknown resource type \"{}\"; known types: {}", name, known));
}

std::string CollectionPath(const Resource& r, std::string_view ns) {
  if (r.namespaced && !ns.empty()) {
    return fmt::format("{}/namespaces/{}/{}", kApiPrefix, ns, r.plural);
  }
  return fmt::format("{}/{}", kApiPrefix, r.plural);
}

std::string ObjectPath(const Resource& r, std::string_view ns, std::string_view name) {
  return fmt::format("{}/{}", CollectionPath(r, ns), EscapePathSegment(name));
}

std::string EscapePathSegment(std::string_view s) {
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

}  // namespace egs::egsctl
