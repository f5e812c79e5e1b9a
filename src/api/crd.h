// CustomResourceDefinitions generated from egsd's OpenAPI v3 document (discovery.h), so that the
// schema users `kubectl apply` against in their clusters is the one egsd itself serves: one
// source, no hand-maintained copy. deploy/crds/*.yaml and deploy/helm/egs/crds/*.yaml are the
// output of `egs-crdgen` (apps/egs-crdgen, scripts/gen-crds.sh); crd_test.cc fails when the
// committed files differ from what this code prints.
//
// Which kinds become CRDs: only GPUProvisionRequest. It is the one kind users create in their
// own namespaces of a member cluster (the connector mirrors it to egsd and writes status back,
// issue 8). Projects, clusters, shapes, nodes and workspaces are egsd's own records (a second
// copy in every cluster would be a second source of truth); events are core/v1 Events there;
// tokens are secrets; quotes are not stored.
//
// The conversion makes the OpenAPI schema structural (what the API server requires of a CRD):
// $refs are inlined, ObjectMeta becomes {type: object} (a CRD may not constrain metadata beyond
// name), allOf-with-description wrappers are unwrapped, x-kubernetes-group-version-kind is
// dropped, and every node must carry a type.
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace egs::api {

// An additionalPrinterColumns entry. `name` is also the name of the column egsd prints for the
// kind (TableColumns), so `kubectl get gpr` reads the same against egsd and against a cluster.
struct PrinterColumn {
  std::string name;
  std::string type;  // "string", "integer", "number", "date"
  std::string json_path;
  std::string description;
  int priority = 0;  // > 0: only with -o wide
};

// The kinds published as CRDs, in a stable order.
const std::vector<std::string>& CrdKinds();

// The printer columns of `kind`'s CRD (empty for a kind that is not a CRD kind).
std::vector<PrinterColumn> CrdPrinterColumns(std::string_view kind);

// The CustomResourceDefinition (apiextensions.k8s.io/v1) of `kind`. NotFound for an unknown
// kind; InvalidArgument for a kind that is not published as a CRD; Internal when the OpenAPI
// schema cannot be made structural (a bug in discovery.cc).
common::Result<nlohmann::json> CrdJson(std::string_view kind);

// CrdJson as a YAML document, preceded by a comment saying it is generated.
common::Result<std::string> CrdYaml(std::string_view kind);

// The file name of `kind`'s CRD: "<plural>.<group>.yaml" ("gpuprovisionrequests.egs.dev.yaml").
// Empty for an unknown kind.
std::string CrdFileName(std::string_view kind);

// `schema` (an OpenAPI v3 schema that may use $ref into `components`, the document's
// components.schemas) as a structural schema. InvalidArgument naming the path of the first node
// that cannot be converted (an unresolvable $ref, a node without a type).
common::Result<nlohmann::json> StructuralSchema(const nlohmann::json& schema,
                                                const nlohmann::json& components);

// Block-style YAML of a JSON value. Strings that YAML would read as another type ("true", "1",
// "null", "") are quoted; keys keep nlohmann's (sorted) order, so the output is deterministic.
std::string JsonToYaml(const nlohmann::json& value);

}  // namespace egs::api
