// Discovery: the registry of API kinds (the one list every part of the API consults) and the
// documents that let kubectl and client-go find them:
//   /version                        {"major":"1","minor":"30","gitVersion":"v1.30.0-egs",...}
//   /api                            APIVersions with no versions (EGS serves no core/v1 kinds)
//   /apis                           APIGroupList (group egs.dev, version v1alpha1), or the
//                                   aggregated APIGroupDiscoveryList (apidiscovery.k8s.io/v2)
//                                   when the Accept header asks for it
//   /apis/egs.dev                   APIGroup
//   /apis/egs.dev/v1alpha1          APIResourceList (kinds, subresource actions, verbs)
//   /openapi/v3                     index of OpenAPI v3 documents
//   /openapi/v3/apis/egs.dev/v1alpha1   OpenAPI v3 document: a schema per kind (with
//                                   x-kubernetes-group-version-kind) and every path. Its PATCH
//                                   operations declare the fieldValidation query parameter, so
//                                   kubectl leaves validation to the server
//                                   (fieldValidation=Strict) instead of validating client-side.
// and the meta.k8s.io/v1 Table columns kubectl prints for each kind.
//
// Thread-safety: everything here is immutable after first use (function-local statics).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/time.h"

namespace egs::api {

struct ResourceInfo {
  std::string kind;      // "GPUProvisionRequest"
  std::string plural;    // "gpuprovisionrequests"
  std::string singular;  // "gpuprovisionrequest"
  std::vector<std::string> short_names;
  bool namespaced = false;
  // Kubernetes verbs: get, list, watch, create, update, patch, delete.
  std::vector<std::string> verbs;
  // Subresource actions: POST .../{plural}/{name}/{action}.
  std::vector<std::string> actions;
  // Served generically (reads from the Store, writes through ControlPlane). False for kinds
  // another handler serves (tokens) or that are not stored (quotes).
  bool generic = true;

  bool HasVerb(std::string_view verb) const;
  bool HasAction(std::string_view action) const;
  std::string list_kind() const { return kind + "List"; }
};

// Every kind, in a stable order.
const std::vector<ResourceInfo>& Resources();
// nullptr when unknown.
const ResourceInfo* FindResourceByPlural(std::string_view plural);
const ResourceInfo* FindResourceByKind(std::string_view kind);

struct VersionOptions {
  std::string major = "1";
  std::string minor = "30";
  std::string git_version = "v1.30.0-egs";
};

nlohmann::json VersionJson(const VersionOptions& v);
nlohmann::json ApiVersionsJson();
nlohmann::json ApiGroupJson();
nlohmann::json ApiGroupListJson();
nlohmann::json ApiResourceListJson();
// `api_version` is "apidiscovery.k8s.io/v2" or "apidiscovery.k8s.io/v2beta1".
nlohmann::json AggregatedDiscoveryJson(std::string_view api_version);

nlohmann::json OpenApiV3IndexJson();
// The document for egs.dev/v1alpha1, serialized once.
const std::string& OpenApiV3Document();
// A short hash of OpenApiV3Document(), used in the index's serverRelativeURL.
const std::string& OpenApiV3Hash();

// Whether `path` ("status.phase", "metadata.name") names a scalar field (string, integer,
// number or boolean) of `r`'s schema in OpenApiV3Document(): what a fieldSelector may compare.
// Objects, arrays, map entries and fields the schema does not have are not selectable.
bool IsSelectableField(const ResourceInfo& r, std::string_view path);

// Table columns (meta.k8s.io/v1 TableColumnDefinition objects) for `r`, and the cells of one
// object's row. `now` is for ages.
nlohmann::json TableColumns(const ResourceInfo& r);
nlohmann::json TableCells(const ResourceInfo& r, const nlohmann::json& object, common::Time now);

// kubectl's age format: "45s", "5m10s", "3h", "2d5h", "3y".
std::string HumanDuration(common::Duration d);

}  // namespace egs::api
