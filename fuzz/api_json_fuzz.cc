// Fuzz target: a request body as the REST API, the /api/v1 compatibility surface, the agent
// report endpoint and the admission webhook receive it. Every input must either be refused with
// a Status or decoded; nothing may crash. A decoded document must survive its own encoding: the
// encoded form decodes again and encodes to the same JSON (a codec that writes what it cannot
// read back would lose accepted objects on the next start).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/report_json.h"
#include "api/agent_report.h"
#include "api/codec.h"
#include "api/json_body.h"
#include "api/notification_codec.h"
#include "common/check.h"
#include "compat/v1_model.h"
#include "k8s/admission_webhook.h"

namespace egs {
namespace {

// Decode, encode, decode again: the second encoding must equal the first.
template <typename Parse>
void RoundTrip(const nlohmann::json& j, Parse parse) {
  auto doc = parse(j);
  if (!doc.ok()) return;
  const nlohmann::json encoded = api::ToJson(*doc);
  auto again = parse(encoded);
  // What the codec wrote must read back, and read back the same.
  EGS_CHECK(again.ok());
  EGS_CHECK(api::ToJson(*again) == encoded);
}

std::vector<compat::ShapeInfo> Shapes() {
  compat::ShapeInfo h100{.name = "8xh100-80gb",
                         .gpu_model = "H100",
                         .gpus_per_node = 8,
                         .memory_per_gpu_mib = 81920,
                         .interconnect = "nvlink",
                         .price_per_gpu_hour = 2.5};
  compat::ShapeInfo a10{.name = "1xa10-24gb",
                        .gpu_model = "A10",
                        .gpus_per_node = 1,
                        .memory_per_gpu_mib = 24576,
                        .interconnect = "",
                        .price_per_gpu_hour = std::nullopt};
  return {h100, a10};
}

void Compat(const nlohmann::json& body) {
  for (bool for_template : {false, true}) (void)compat::ValidateGprFields(body, for_template);
  if (!compat::ValidateGprFields(body, false).ok()) return;
  if (!compat::RequiredGprFields(body).ok()) return;
  (void)compat::ToGprObject(body, "fuzzed", Shapes());
  (void)compat::ApplyTemplate(body, body);
}

void Agent(std::string_view text, const nlohmann::json& body) {
  std::vector<telemetry::GpuInfo> known(2);
  known[0].model = "H100";
  known[1].model = "H100";
  (void)api::CheckAgentInventory(body, known);
  (void)api::CountAgentEvents(body, 2, common::FromUnixMicros(1'800'000'000'000'000));
  (void)agent::ParseReportAnswer(text);
}

void Admission(const nlohmann::json& review) {
  k8s::AdmissionPolicy policy;
  policy.lookup = [](const std::string& ns) -> std::optional<k8s::NamespaceTarget> {
    if (ns != "team-a") return std::nullopt;
    return k8s::NamespaceTarget{core::WorkspaceId(3), "team-a", true};
  };
  (void)k8s::ReviewPod(review, policy);
  policy.deny_without_reservation = false;
  (void)k8s::ReviewPod(review, policy);
}

}  // namespace
}  // namespace egs

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace egs;  // NOLINT(google-build-using-namespace): a fuzz entry point
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto body = api::ParseJsonBody(text);
  if (!body.ok()) {
    Agent(text, nlohmann::json::object());
    return 0;
  }
  const nlohmann::json& j = *body;
  RoundTrip(j, [](const nlohmann::json& x) { return api::ParseProject(x); });
  RoundTrip(j, [](const nlohmann::json& x) { return api::ParseCluster(x); });
  RoundTrip(j, [](const nlohmann::json& x) { return api::ParseGpuShape(x); });
  RoundTrip(j, [](const nlohmann::json& x) { return api::ParseNode(x); });
  RoundTrip(j, [](const nlohmann::json& x) { return api::ParseWorkspace(x); });
  RoundTrip(j, [](const nlohmann::json& x) { return api::ParseGpr(x); });
  RoundTrip(j, [](const nlohmann::json& x) { return api::ParseEvent(x); });
  RoundTrip(j, [](const nlohmann::json& x) { return api::ParseQuote(x); });
  RoundTrip(j, [](const nlohmann::json& x) { return api::ParseNotificationSubscription(x); });
  if (j.is_object() && j.contains("spec")) {
    RoundTrip(j["spec"], [](const nlohmann::json& x) { return api::ParseGprSpec(x); });
    const nlohmann::json& spec = j["spec"];
    if (spec.is_object() && spec.contains("policy")) {
      RoundTrip(spec["policy"],
                [](const nlohmann::json& x) { return api::ParseWorkspacePolicy(x); });
    }
  }
  Compat(j);
  Agent(text, j);
  Admission(j);
  return 0;
}
