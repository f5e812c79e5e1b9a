#include "api/notification_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace egs::api {
namespace {

using common::Result;
using common::Status;
using nlohmann::json;

constexpr std::size_t kMaxUrlLength = 2048;
constexpr std::size_t kMaxReasons = 64;
constexpr std::size_t kMaxReasonLength = 128;

Status Invalid(std::string_view path, std::string_view why) {
  return common::InvalidArgumentError(fmt::format("{}: {}", path, why));
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool IsHostChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
}

// "[::1]" or a DNS name / IPv4 address: dot-separated labels of 1-63 characters that neither
// start nor end with '-' (an absolute name may end with one '.'), so "." or "a..b" is no host.
bool IsHost(std::string_view host) {
  if (host.empty()) return false;
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    return std::all_of(host.begin() + 1, host.end() - 1, [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c)) != 0 || c == ':' || c == '.';
    });
  }
  if (host.back() == '.') host.remove_suffix(1);
  if (host.empty() || host.size() > 253) return false;
  while (true) {
    const std::size_t dot = host.find('.');
    const std::string_view label = host.substr(0, dot);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-' ||
        !std::all_of(label.begin(), label.end(), IsHostChar)) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    host.remove_prefix(dot + 1);
  }
}

// Event reasons are CamelCase words ("Progress50", "AlertRaised"); allow what Kubernetes
// reasons use in practice.
bool IsReason(std::string_view r) {
  if (r.empty() || r.size() > kMaxReasonLength) return false;
  return std::all_of(r.begin(), r.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
  });
}

Status WrongType(std::string_view path, std::string_view expected) {
  return Invalid(path, fmt::format("expected {}", expected));
}

Status ReadSpec(const json& spec, NotificationSubscriptionDoc& d) {
  if (!spec.is_object()) return WrongType("spec", "object");
  for (auto it = spec.begin(); it != spec.end(); ++it) {
    const std::string& key = it.key();
    if (key != "url" && key != "format" && key != "reasons") {
      return Invalid("spec." + key, "unknown field");
    }
  }
  auto url = spec.find("url");
  if (url == spec.end() || url->is_null()) return Invalid("spec.url", "is required");
  if (!url->is_string()) return WrongType("spec.url", "string");
  d.url = url->get<std::string>();
  EGS_RETURN_IF_ERROR(ParseWebhookUrl(d.url, "spec.url").status());
  if (auto f = spec.find("format"); f != spec.end() && !f->is_null()) {
    if (!f->is_string()) return WrongType("spec.format", "string");
    d.format = f->get<std::string>();
    if (d.format != "JSON" && d.format != "Slack") {
      return Invalid("spec.format",
                     fmt::format("must be one of \"JSON\", \"Slack\", not \"{}\"", d.format));
    }
  }
  if (auto r = spec.find("reasons"); r != spec.end() && !r->is_null()) {
    if (!r->is_array()) return WrongType("spec.reasons", "array of strings");
    if (r->size() > kMaxReasons) {
      return Invalid("spec.reasons", fmt::format("at most {} reasons", kMaxReasons));
    }
    std::set<std::string, std::less<>> seen;
    for (std::size_t i = 0; i < r->size(); ++i) {
      const std::string path = fmt::format("spec.reasons[{}]", i);
      const json& e = (*r)[i];
      if (!e.is_string()) return WrongType(path, "string");
      std::string reason = e.get<std::string>();
      if (!IsReason(reason)) {
        return Invalid(path, fmt::format("\"{}\" is not an event reason (letters, digits, '_', "
                                         "'-', '.'; 1-{} chars)",
                                         reason, kMaxReasonLength));
      }
      if (!seen.insert(reason).second) {
        return Invalid(path, fmt::format("duplicate reason \"{}\"", reason));
      }
      d.reasons.push_back(std::move(reason));
    }
  }
  return common::OkStatus();
}

}  // namespace

std::string WebhookUrl::scheme_host_port() const {
  return fmt::format("{}://{}:{}", scheme, host, port);
}

Result<WebhookUrl> ParseWebhookUrl(std::string_view url, std::string_view field) {
  if (url.empty()) return Invalid(field, "must not be empty");
  if (url.size() > kMaxUrlLength) {
    return Invalid(field, fmt::format("longer than {} characters", kMaxUrlLength));
  }
  for (char c : url) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      return Invalid(field, "must not contain spaces or control characters");
    }
  }
  WebhookUrl out;
  const std::size_t colon = url.find("://");
  if (colon == std::string_view::npos) {
    return Invalid(field, "must be an absolute http:// or https:// URL");
  }
  out.scheme = Lower(url.substr(0, colon));
  if (out.scheme != "http" && out.scheme != "https") {
    return Invalid(field, fmt::format("scheme \"{}\" is not allowed: only http and https",
                                      url.substr(0, colon)));
  }
  std::string_view rest = url.substr(colon + 3);
  if (auto hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
  const std::size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  out.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (!out.path.empty() && out.path.front() == '?') out.path = "/" + out.path;
  if (authority.find('@') != std::string_view::npos) {
    return Invalid(field, "must not contain credentials (user@host)");
  }
  std::string_view host = authority;
  std::string_view port;
  const std::size_t port_colon = authority.rfind(':');
  if (port_colon != std::string_view::npos &&
      (authority.front() != '[' || authority.find(']') < port_colon)) {
    host = authority.substr(0, port_colon);
    port = authority.substr(port_colon + 1);
  }
  if (!IsHost(host)) return Invalid(field, "must name a host");
  out.host = std::string(host);
  out.port = out.scheme == "https" ? 443 : 80;
  if (!port.empty() || port_colon != std::string_view::npos) {
    int p = 0;
    bool digits = !port.empty() && port.size() <= 5 &&
                  std::all_of(port.begin(), port.end(),
                              [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    if (digits) p = std::stoi(std::string(port));
    if (!digits || p < 1 || p > 65535) {
      return Invalid(field, fmt::format("invalid port \"{}\"", port));
    }
    out.port = p;
  }
  return out;
}

Result<NotificationSubscriptionDoc> ParseNotificationSubscription(const json& j) {
  if (!j.is_object()) return WrongType("object", "object");
  NotificationSubscriptionDoc d;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (key != "apiVersion" && key != "kind" && key != "metadata" && key != "spec" &&
        key != "status") {
      return Invalid(key, "unknown field");
    }
  }
  if (auto v = j.find("apiVersion"); v != j.end() && !v->is_null()) {
    if (!v->is_string() || v->get<std::string>() != kApiVersion) {
      return Invalid("apiVersion", fmt::format("must be \"{}\"", kApiVersion));
    }
  }
  if (auto k = j.find("kind"); k != j.end() && !k->is_null()) {
    if (!k->is_string() || k->get<std::string>() != kNotificationSubscriptionKind) {
      return Invalid("kind", fmt::format("must be \"{}\"", kNotificationSubscriptionKind));
    }
  }
  auto meta = j.find("metadata");
  if (meta == j.end() || meta->is_null()) return Invalid("metadata", "is required");
  EGS_ASSIGN_OR_RETURN(d.meta, ParseObjectMeta(*meta, "metadata"));
  auto spec = j.find("spec");
  if (spec == j.end() || spec->is_null()) return Invalid("spec.url", "is required");
  EGS_RETURN_IF_ERROR(ReadSpec(*spec, d));
  return d;
}

json ToJson(const NotificationSubscriptionDoc& d) {
  json j = {{"apiVersion", kApiVersion},
            {"kind", kNotificationSubscriptionKind},
            {"metadata", ToJson(d.meta)},
            {"spec", {{"url", d.url}, {"format", d.format}, {"reasons", d.reasons}}}};
  return j;
}

}  // namespace egs::api
