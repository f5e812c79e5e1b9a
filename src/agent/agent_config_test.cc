#include "agent/agent_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace egs::agent {
namespace {

using ::testing::HasSubstr;

TEST(AgentConfigTest, DefaultsAndEveryFlag) {
  auto c = ParseAgentFlags({"--server", "http://egsd:8080", "--token", "t0k"}, "gpu-node-1");
  ASSERT_OK(c);
  EXPECT_EQ(c->node, "gpu-node-1");
  EXPECT_EQ(c->interval, common::Seconds(10));
  EXPECT_FALSE(c->synthetic);
  EXPECT_FALSE(c->once);

  c = ParseAgentFlags(
      {"--server=https://egsd", "--token=x", "--node", "n7", "--interval", "1s", "--nvml-path",
       "/opt/nvml.so", "--once", "--buffer-samples", "100", "--backoff-max", "2m", "--timeout",
       "500ms", "--seed", "3", "--log-level", "debug"},
      "");
  ASSERT_OK(c);
  EXPECT_EQ(c->node, "n7");
  EXPECT_EQ(c->interval, common::Seconds(1));
  EXPECT_EQ(c->nvml_path, "/opt/nvml.so");
  EXPECT_TRUE(c->once);
  EXPECT_EQ(c->buffer_samples, 100u);
  EXPECT_EQ(c->backoff_max, common::Minutes(2));
  EXPECT_EQ(c->timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(c->seed, 3u);
}

TEST(AgentConfigTest, TokenFile) {
  testing::TempDir dir;
  auto c = ParseAgentFlags(
      {"--server", "http://e", "--token-file", dir.Write("tok", "secret\n"), "--synthetic"}, "n");
  ASSERT_OK(c);
  EXPECT_EQ(c->token, "secret");
  EXPECT_TRUE(c->synthetic);
  auto empty = ParseAgentFlags({"--server", "http://e", "--token-file", dir.Write("e", "")}, "n");
  EXPECT_THAT(empty.error().message(), HasSubstr("--token-file"));
  auto missing = ParseAgentFlags({"--server", "http://e", "--token-file", dir.File("none")}, "n");
  EXPECT_THAT(missing.error().message(), HasSubstr("cannot read"));
  // A directory reads as an empty file: say what it is.
  auto directory =
      ParseAgentFlags({"--server", "http://e", "--token-file", dir.path().string()}, "n");
  EXPECT_THAT(directory.error().message(), HasSubstr("is a directory"));
}

TEST(AgentConfigTest, TheHostNameMustBeANodeNameToo) {
  auto c = ParseAgentFlags({"--server", "http://e", "--token", "t"}, "Build Host");
  ASSERT_THAT(c, testing::StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(c.error().message(), HasSubstr("\"Build Host\" (the host name) is not a node name"));
  ASSERT_OK(ParseAgentFlags({"--server", "http://e", "--token", "t", "--node", "gpu-1.rack-2"},
                            "Build Host"));
  // An upper-case host name is the node's name in lower case, as the kubelet registers it.
  auto upper = ParseAgentFlags({"--server", "http://e", "--token", "t"}, "GPU-Node-7.Lab");
  ASSERT_OK(upper);
  EXPECT_EQ(upper->node, "gpu-node-7.lab");
  // An explicit --node is taken as given.
  auto given = ParseAgentFlags({"--server", "http://e", "--token", "t", "--node", "GPU-1"}, "h");
  ASSERT_THAT(given, testing::StatusIs(common::StatusCode::kInvalidArgument));
}

struct BadFlags {
  std::vector<std::string> args;
  std::string message;
};

TEST(AgentConfigTest, BadFlagsNameTheFlagAndTheReason) {
  const std::vector<std::string> ok = {"--server", "http://e", "--token", "t"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = ok;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  const BadFlags cases[] = {
      {{"--token", "t"}, "--server: is required"},
      {{"--server", "http://e"}, "--token or --token-file"},
      {with({"--interval", "fast"}), "--interval: \"fast\" is not a duration"},
      {with({"--interval", "10ms"}), "--interval: 10ms is outside [100ms, 1h]"},
      {with({"--interval"}), "--interval: needs a value"},
      {with({"--interval", "99999999999999h"}), "--interval: \"99999999999999h\" is out of range"},
      {with({"--synthetic-gpus", "65"}), "--synthetic-gpus: 65 is outside [0, 64]"},
      {with({"--buffer-samples", "x"}), "--buffer-samples: \"x\" is not an integer"},
      {with({"--log-level", "loud"}), "--log-level: \"loud\" is not one of"},
      {with({"--once=yes"}), "--once: takes no value"},
      {with({"--bogus"}), "unknown flag \"--bogus\""},
      {with({"--token-file", "/x"}), "--token and --token-file: give only one"},
      {with({"--synthetic", "--nvml-path", "/x"}), "--synthetic and --nvml-path"},
      {with({"--node", "a/b"}), "--node: \"a/b\" is not a node name"},
      {with({"--node", "a b"}), "--node: \"a b\" is not a node name (a DNS-1123 subdomain"},
      {with({"--node", "GPU-1"}), "--node: \"GPU-1\" is not a node name"},
      {with({"--node", ".."}), "--node: \"..\" is not a node name"},
      {with({"--node", ""}), "--node: is empty"},
      {with({"--node="}), "--node: is empty"},
      {with({"--nvml-path", ""}), "--nvml-path: is empty"},
      {with({"--token-file="}), "--token-file: is empty"},
      {with({"--node", "a", "--node", "b"}), "--node: is given twice"},
      {with({"--interval", "1s", "--interval=2s"}), "--interval: is given twice"},
      {with({"--once", "--once"}), "--once: is given twice"},
      {with({"--token", "u"}), "--token: is given twice"},
      {{"--server", "http://e", "--token", "--interval", "1s"}, "--token: needs a value"},
      {with({"--synthetic-gpus", "4"}), "--synthetic-gpus: only with --synthetic"},
      {with({"--help=yes"}), "--help: takes no value"},
      {{"--server", "ftp://e", "--token", "t"}, "--server: \"ftp://e\" is not a URL"},
      {{"--server", "http://e:70000", "--token", "t"}, "--server: port 70000 is outside"},
  };
  for (const BadFlags& c : cases) {
    auto r = ParseAgentFlags(c.args, "n");
    ASSERT_THAT(r, testing::StatusIs(common::StatusCode::kInvalidArgument)) << c.message;
    EXPECT_THAT(r.error().message(), HasSubstr(c.message));
  }
}

TEST(AgentConfigTest, HelpNeedsNothingElse) {
  auto c = ParseAgentFlags({"--help"}, "");
  ASSERT_OK(c);
  EXPECT_TRUE(c->help);
  EXPECT_THAT(AgentUsage(), HasSubstr("--nvml-path"));
}

}  // namespace
}  // namespace egs::agent
