#include "egsctl/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace egs::egsctl {
namespace {

using ::egs::testing::StatusIs;

TEST(ConfigTest, PathPrecedenceFlagThenEnvThenHome) {
  Environment env{{"HOME", "/home/u"}, {"EGSCTL_CONFIG", "/etc/egs.yaml"}};
  EXPECT_EQ(ConfigPath(std::string("/x.yaml"), env), "/x.yaml");
  EXPECT_EQ(ConfigPath(std::nullopt, env), "/etc/egs.yaml");
  env.erase("EGSCTL_CONFIG");
  EXPECT_EQ(ConfigPath(std::nullopt, env), "/home/u/.egs/config.yaml");
  EXPECT_EQ(ConfigPath(std::nullopt, {}), "");
}

TEST(ConfigTest, SettingsPrecedenceFlagThenEnvThenFileThenDefault) {
  ConfigFile file{"http://file:1", "file-token", "file-ns", "", false};
  Environment env{{"EGSCTL_SERVER", "http://env:2"}, {"EGSCTL_TOKEN", "env-token"}};
  Settings s = ResolveSettings(std::string("http://flag:3"), std::nullopt, std::nullopt, env, file);
  EXPECT_EQ(s.server, "http://flag:3");
  EXPECT_EQ(s.token, "env-token");
  EXPECT_EQ(s.ns, "file-ns");
  s = ResolveSettings(std::nullopt, std::string("flag-token"), std::string("flag-ns"), {}, file);
  EXPECT_EQ(s.server, "http://file:1");
  EXPECT_EQ(s.token, "flag-token");
  EXPECT_EQ(s.ns, "flag-ns");
  s = ResolveSettings(std::nullopt, std::nullopt, std::nullopt, {}, {});
  EXPECT_EQ(s.server, kDefaultServer);
  EXPECT_EQ(s.token, "");
  EXPECT_EQ(s.ns, "default");
}

TEST(ConfigTest, SaveThenLoadRoundTrips) {
  testing::TempDir dir;
  std::string path = dir.File("sub/config.yaml");
  ASSERT_OK(SaveConfigFile(path, {"http://s:8080", "t0k", "team-a", "/etc/egs/ca.pem", true}));
  auto loaded = LoadConfigFile(path);
  ASSERT_OK(loaded);
  EXPECT_EQ(loaded->server, "http://s:8080");
  EXPECT_EQ(loaded->token, "t0k");
  EXPECT_EQ(loaded->ns, "team-a");
  EXPECT_EQ(loaded->certificate_authority, "/etc/egs/ca.pem");
  EXPECT_TRUE(loaded->insecure_skip_tls_verify);
}

TEST(ConfigTest, MissingFileIsEmptyAndMalformedIsAnError) {
  testing::TempDir dir;
  auto missing = LoadConfigFile(dir.File("nope.yaml"));
  ASSERT_OK(missing);
  EXPECT_EQ(missing->server, "");
  EXPECT_THAT(LoadConfigFile(dir.Write("bad.yaml", "server: [unclosed\n")),
              StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(LoadConfigFile(dir.Write("list.yaml", "- a\n- b\n")),
              StatusIs(common::StatusCode::kInvalidArgument));
}

TEST(ConfigTest, UnknownKeysWrongTypesDirectoriesAndNamedMissingFilesAreErrors) {
  testing::TempDir dir;
  auto unknown = LoadConfigFile(dir.Write("u.yaml", "server: http://s\nsever: http://t\n"));
  ASSERT_THAT(unknown, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(unknown.error().message(), ::testing::HasSubstr("u.yaml:2: unknown key 'sever'"));
  auto list = LoadConfigFile(dir.Write("t.yaml", "token: [a]\n"));
  ASSERT_THAT(list, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(list.error().message(), ::testing::HasSubstr("t.yaml:1: token: must be a string"));
  auto flag = LoadConfigFile(dir.Write("b.yaml", "insecureSkipTLSVerify: maybe\n"));
  ASSERT_THAT(flag, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(flag.error().message(),
              ::testing::HasSubstr("insecureSkipTLSVerify: must be true or false"));
  auto twice =
      LoadConfigFile(dir.Write("d.yaml", "server: http://a\ntoken: t\nserver: http://b\n"));
  ASSERT_THAT(twice, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(twice.error().message(),
              ::testing::HasSubstr("d.yaml:3: server: duplicate key (first at line 1)"));
  // A second document would be dropped by the next `config set-*`, which rewrites the file.
  auto two = LoadConfigFile(dir.Write("two.yaml", "server: http://a\n---\nserver: http://b\n"));
  ASSERT_THAT(two, StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(two.error().message(), ::testing::HasSubstr("two.yaml: a second YAML document"));
  EXPECT_OK(LoadConfigFile(dir.Write("one.yaml", "---\nserver: http://a\n")));
  EXPECT_THAT(LoadConfigFile(dir.path().string()), StatusIs(common::StatusCode::kInvalidArgument));
  EXPECT_THAT(LoadConfigFile(dir.File("nope.yaml"), /*must_exist=*/true),
              StatusIs(common::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace egs::egsctl
