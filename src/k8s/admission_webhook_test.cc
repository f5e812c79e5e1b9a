// The pod admission webhook: AdmissionReview in, JSONPatch out; the patch is applied (RFC 6902,
// nlohmann's json::patch) and the result checked.
#include "k8s/admission_webhook.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <vector>

namespace egs::k8s {
namespace {

using nlohmann::json;

std::string Base64Decode(const std::string& s) {
  std::vector<unsigned char> out(s.size());
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(s.data()),
                                static_cast<int>(s.size()));
  std::size_t len = static_cast<std::size_t>(n);
  if (s.size() >= 1 && s[s.size() - 1] == '=') --len;
  if (s.size() >= 2 && s[s.size() - 2] == '=') --len;
  return std::string(reinterpret_cast<const char*>(out.data()), len);
}

json Review(const std::string& ns, json pod, const std::string& op = "CREATE") {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
            {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
            {"namespace", ns},
            {"operation", op},
            {"object", std::move(pod)}}}};
}

json Pod(json spec = {{"containers", {{{"name", "main"}, {"image", "busybox"}}}}}) {
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}}}, {"spec", spec}};
}

AdmissionPolicy Policy(bool active, bool deny = true) {
  AdmissionPolicy p;
  p.lookup = [active](const std::string& ns) -> std::optional<NamespaceTarget> {
    if (ns != "team-a") return std::nullopt;
    return NamespaceTarget{core::WorkspaceId(7), "team-a", active};
  };
  p.deny_without_reservation = deny;
  return p;
}

// Applies the response's patch to the review's pod.
json Patched(const json& review, const json& response) {
  const json& r = response.at("response");
  if (!r.contains("patch")) return review["request"]["object"];
  EXPECT_EQ(r.value("patchType", ""), "JSONPatch");
  return review["request"]["object"].patch(json::parse(Base64Decode(r["patch"])));
}

const json kRequirement = {{"key", "egs.dev/workspace"}, {"operator", "In"}, {"values", {"7"}}};
const json kToleration = {
    {"key", "egs.dev/workspace"}, {"operator", "Equal"}, {"value", "7"}, {"effect", "NoSchedule"}};

constexpr const char* kRequired = "requiredDuringSchedulingIgnoredDuringExecution";

TEST(AdmissionWebhookTest, PlainPodGetsAffinityAndToleration) {
  const json review = Review("team-a", Pod());
  auto out = ReviewPod(review, Policy(true));
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ((*out)["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ((*out)["kind"], "AdmissionReview");
  EXPECT_EQ((*out)["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_TRUE((*out)["response"]["allowed"].get<bool>());
  const json pod = Patched(review, *out);
  const json terms = pod["spec"]["affinity"]["nodeAffinity"]
                        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 1u);
  EXPECT_EQ(terms[0]["matchExpressions"], json::array({kRequirement}));
  EXPECT_EQ(pod["spec"]["tolerations"], json::array({kToleration}));
  EXPECT_EQ(pod["spec"]["containers"][0]["name"], "main");  // untouched
}

TEST(AdmissionWebhookTest, ExistingTermsEachGetTheRequirementAndTolerationsAreAppended) {
  json spec = Pod()["spec"];
  spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
      ["nodeSelectorTerms"] = {
          {{"matchExpressions", {{{"key", "zone"}, {"operator", "In"}, {"values", {"a"}}}}}},
          {{"matchFields",
            {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"gpu-1"}}}}}}};
  spec["tolerations"] = {{{"key", "other"}, {"operator", "Exists"}}};
  const json review = Review("team-a", Pod(spec));
  auto out = ReviewPod(review, Policy(true));
  ASSERT_TRUE(out.ok());
  const json pod = Patched(review, *out);
  const json terms = pod["spec"]["affinity"]["nodeAffinity"]
                        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 2u);
  EXPECT_EQ(terms[0]["matchExpressions"].size(), 2u);
  EXPECT_EQ(terms[0]["matchExpressions"][1], kRequirement);
  EXPECT_EQ(terms[1]["matchExpressions"], json::array({kRequirement}));
  EXPECT_EQ(terms[1]["matchFields"].size(), 1u);
  ASSERT_EQ(pod["spec"]["tolerations"].size(), 2u);
  EXPECT_EQ(pod["spec"]["tolerations"][1], kToleration);

  // Reviewing the mutated pod again adds nothing (reinvocation is harmless).
  auto again = ReviewPod(Review("team-a", pod), Policy(true));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE((*again)["response"].contains("patch"));
}

TEST(AdmissionWebhookTest, AffinityWithoutNodeAffinity) {
  json spec = Pod()["spec"];
  spec["affinity"] = {{"podAntiAffinity", json::object()}};
  const json review = Review("team-a", Pod(spec));
  auto out = ReviewPod(review, Policy(true));
  ASSERT_TRUE(out.ok());
  const json pod = Patched(review, *out);
  EXPECT_TRUE(pod["spec"]["affinity"].contains("podAntiAffinity"));
  EXPECT_EQ(
      pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
         ["nodeSelectorTerms"][0]["matchExpressions"][0],
      kRequirement);
}

TEST(AdmissionWebhookTest, NoActiveReservationDeniesOrWarns) {
  const json review = Review("team-a", Pod());
  auto denied = ReviewPod(review, Policy(false, true));
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE((*denied)["response"]["allowed"].get<bool>());
  EXPECT_EQ((*denied)["response"]["status"]["code"], 403);
  EXPECT_NE((*denied)["response"]["status"]["message"].get<std::string>().find(
                "workspace team-a, which has no active GPU reservation"),
            std::string::npos);

  auto passed = ReviewPod(review, Policy(false, false));
  ASSERT_TRUE(passed.ok());
  EXPECT_TRUE((*passed)["response"]["allowed"].get<bool>());
  EXPECT_FALSE((*passed)["response"].contains("patch"));
  EXPECT_EQ((*passed)["response"]["warnings"].size(), 1u);
}

TEST(AdmissionWebhookTest, OtherNamespacesKindsAndOperationsPassUnchanged) {
  for (const json& review : {Review("kube-system", Pod()), Review("team-a", Pod(), "UPDATE")}) {
    auto out = ReviewPod(review, Policy(true));
    ASSERT_TRUE(out.ok());
    EXPECT_TRUE((*out)["response"]["allowed"].get<bool>());
    EXPECT_FALSE((*out)["response"].contains("patch"));
  }
  json svc = Review("team-a", Pod());
  svc["request"]["kind"]["kind"] = "Service";
  auto out = ReviewPod(svc, Policy(true));
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE((*out)["response"].contains("patch"));
}

TEST(AdmissionWebhookTest, MalformedReviewsAreRefusedNamingTheField) {
  auto wrong = ReviewPod(json{{"kind", "Pod"}}, Policy(true));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code(), common::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.error().message().find("AdmissionReview"), std::string::npos);
  json no_uid = Review("team-a", Pod());
  no_uid["request"].erase("uid");
  auto missing = ReviewPod(no_uid, Policy(true));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("request.uid"), std::string::npos);
}

// Members of the wrong JSON type are refused naming them; before, reading them threw out of
// ReviewPod (found by fuzz/api_json_fuzz.cc).
TEST(AdmissionWebhookTest, MembersOfTheWrongTypeAreRefusedNamingThem) {
  struct Case {
    json review;
    std::string message;
  };
  json kind_object = Review("team-a", Pod());
  kind_object["kind"] = json::object();
  json request_string = Review("team-a", Pod());
  request_string["request"] = "x";
  json request_kind = Review("team-a", Pod());
  request_kind["request"]["kind"] = "Pod";
  json ns_number = Review("team-a", Pod());
  ns_number["request"]["namespace"] = 7;
  json operation_array = Review("team-a", Pod());
  operation_array["request"]["operation"] = json::array({"CREATE"});
  json object_string = Review("team-a", Pod());
  object_string["request"]["object"] = "pod";
  const std::string not_a_pod =
      "request.object: not a Pod: a field of spec.affinity or spec.tolerations has the wrong type";
  const Case cases[] = {
      {kind_object, "body: must be an AdmissionReview of apiVersion admission.k8s.io/v1"},
      {request_string, "request: expected an object"},
      {request_kind, "request.kind: expected an object"},
      {ns_number, "request.namespace: expected a string"},
      {operation_array, "request.operation: expected a string"},
      {object_string, "request.object: expected an object"},
      {Review("team-a", Pod({{"tolerations", "all"}})), not_a_pod},
      {Review("team-a", Pod({{"tolerations", {{{"key", 1}}}}})), not_a_pod},
      {Review("team-a", Pod({{"affinity", {{"nodeAffinity", {{kRequired, 5}}}}}})), not_a_pod},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.review.dump());
    auto r = ReviewPod(c.review, Policy(true));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), common::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.error().message(), c.message);
  }
}

TEST(AdmissionWebhookTest, Base64MatchesKnownVectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
}

}  // namespace
}  // namespace egs::k8s
