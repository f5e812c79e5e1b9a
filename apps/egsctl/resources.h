// The kinds egsctl knows: their API plural, singular, short names and scope, and how a name typed
// on the command line ("gpr", "GPUProvisionRequest", "nodes", ...) resolves to one of them.
//
// Thread-safety: immutable data.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace egs::egsctl {

inline constexpr std::string_view kGroup = "egs.dev";
inline constexpr std::string_view kApiVersion = "egs.dev/v1alpha1";
inline constexpr std::string_view kApiPrefix = "/apis/egs.dev/v1alpha1";

struct Resource {
  std::string kind;      // "GPUProvisionRequest"
  std::string plural;    // "gpuprovisionrequests"
  std::string singular;  // "gpuprovisionrequest"
  std::vector<std::string> short_names;
  bool namespaced = false;
};

// Every kind, in the order `egsctl --help` lists them.
const std::vector<Resource>& AllResources();

// Resolves a plural, singular, short name or kind (case-insensitive for the kind).
// InvalidArgument naming the unknown type otherwise.
common::Result<const Resource*> FindResource(std::string_view name);

// The collection path: /apis/egs.dev/v1alpha1[/namespaces/{ns}]/{plural}. `ns` is ignored for
// cluster-scoped kinds; "" for a namespaced kind lists every namespace.
std::string CollectionPath(const Resource& r, std::string_view ns);
// The object path: CollectionPath + "/" + name (percent-encoded).
std::string ObjectPath(const Resource& r, std::string_view ns, std::string_view name);
// Percent-encodes everything but unreserved characters (RFC 3986), for path segments and query
// values.
std::string EscapePathSegment(std::string_view s);

}  // namespace egs::egsctl
